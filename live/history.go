package live

import "time"

// HistoryDoc is one GPU's recent readings from the daemon's in-memory ring
// (issue 40): one value a StepS seconds per series, oldest first, the last
// at End. Served only when a request asks for it (status history=DUR), so
// the plain document stays small. A value the GPU did not give (refused,
// unsupported, hung, not sampled yet) is null, never 0.
type HistoryDoc struct {
	StepS  float64     `json:"step_s"`
	End    time.Time   `json:"end"`
	Series []SeriesDoc `json:"series"`
}

// SeriesDoc is one reading's history: Key is the reading's key in GPUDoc
// (temperature_c, power_w, gpu_util_pct, ...).
type SeriesDoc struct {
	Key    string     `json:"key"`
	Values []*float64 `json:"values"`
}

// Values returns the values of the series named key; nil when absent.
func (h *HistoryDoc) Values(key string) []*float64 {
	if h == nil {
		return nil
	}
	for _, s := range h.Series {
		if s.Key == key {
			return s.Values
		}
	}
	return nil
}
