package live

import (
	"math"
	"sync"
	"time"
	"unsafe"

	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

// The history ring's shape (issue 40): the last MaxHistory of each GPU's
// charted readings at HistoryStep resolution, the budget docs/performance.md
// states (at most 1 MB per GPU; HistoryBytes is what a ring takes).
const (
	HistoryStep = time.Second
	historyLen  = 600
	MaxHistory  = historyLen * HistoryStep
)

// historyKeys are the readings the terminal's views chart, by their key in
// GPUDoc; fan0_speed_pct is fan 0's speed_pct (GPUDoc.Fans[0]). PCIe TX and
// RX are the driver's cumulative byte counters as given: a reader derives
// the throughput from two values.
var historyKeys = [...]string{
	"temperature_c", "memory_temperature_c", "power_w", "gpu_util_pct", "memory_util_pct",
	"memory_used_bytes", "fan0_speed_pct", "graphics_clock_mhz", "sm_clock_mhz", "memory_clock_mhz",
	"pcie_tx_bytes", "pcie_rx_bytes",
}

const numHistory = len(historyKeys)

// HistoryKeys returns the keys of the series of every GPU's History, in
// their order (a copy).
func HistoryKeys() []string { return append([]string(nil), historyKeys[:]...) }

// historyDefs are historyKeys' rows of reading.Table (nil: the fan's).
var historyDefs = func() (defs [numHistory]*reading.Def) {
	for k, key := range historyKeys {
		if key == "fan0_speed_pct" {
			continue
		}
		i, ok := docIndex[key]
		if !ok {
			panic("live: history key " + key + " is no reading's Key")
		}
		defs[k] = docDefs[i]
	}
	return defs
}()

// HistoryBytes is the memory one GPU's ring holds, preallocated in its
// Slot: nothing grows while the daemon runs.
const HistoryBytes = int(unsafe.Sizeof(History{}))

// History is one GPU's ring: for each second of the last MaxHistory, the
// charted readings of the last answered sample in that second. Its own lock
// (not the Slot's) is held for a write of one row or the copy of a span, so
// a request never holds the view's writers for long. A second no answered
// sample fell in (hung, failing, lost, not started) has no row: its values
// are null, as are readings the sample did not have.
type History struct {
	mu   sync.Mutex
	sec  [historyLen]int64               // the Unix second row i holds (0: none)
	vals [historyLen][numHistory]float64 // NaN: absent
}

// Add takes an answered sample's readings into the row of its second
// (replacing an earlier sample's of the same second). Other samples are
// not taken. It does not allocate.
func (h *History) Add(s *reading.Sample) {
	if s.Status != reading.StatusAnswered || s.Time.Unix() <= 0 {
		return
	}
	sec := s.Time.Unix()
	var row [numHistory]float64
	for k, d := range historyDefs {
		row[k] = math.NaN()
		var u uint64
		ok := false
		if d == nil {
			var v uint32
			v, ok = reading.FanTable[0].Get(s, 0)
			u = uint64(v)
		} else {
			u, ok = d.Get(s)
		}
		if !ok {
			continue
		}
		n := float64(u)
		if d != nil && d.Signed() {
			n = float64(int64(u))
		}
		if d != nil && d.Doc == reading.DocMilli {
			n /= 1000
		}
		row[k] = n
	}
	i := sec % historyLen
	h.mu.Lock()
	h.sec[i], h.vals[i] = sec, row
	h.mu.Unlock()
}

// Doc returns the values of the span (at most MaxHistory, rounded up to
// whole steps) that ends with the second of end: one value per second,
// oldest first, null where the ring has none. nil when span is not
// positive. The ring's lock is held only to copy the raw rows (NaN where
// a second has none), so the sample path's Add waits a few microseconds
// at most; the pointers the document holds are made after.
func (h *History) Doc(end time.Time, span time.Duration) *HistoryDoc {
	if span <= 0 {
		return nil
	}
	n := int(min((span+HistoryStep-1)/HistoryStep, historyLen))
	last := end.Unix()
	backing := make([]float64, n*numHistory) // series k's value j at k*n+j
	h.mu.Lock()
	for j := range n {
		sec := last - int64(n-1-j)
		i := sec % historyLen
		have := sec > 0 && h.sec[i] == sec
		for k := range numHistory {
			v := math.NaN()
			if have {
				v = h.vals[i][k]
			}
			backing[k*n+j] = v
		}
	}
	h.mu.Unlock()
	testHookHistoryCopied(h)
	ptrs := make([]*float64, n*numHistory)
	for x := range backing {
		if !math.IsNaN(backing[x]) {
			ptrs[x] = &backing[x]
		}
	}
	d := &HistoryDoc{StepS: HistoryStep.Seconds(), End: time.Unix(last, 0).UTC(), Series: make([]SeriesDoc, numHistory)}
	for k := range d.Series {
		d.Series[k] = SeriesDoc{Key: historyKeys[k], Values: ptrs[k*n : (k+1)*n : (k+1)*n]}
	}
	return d
}

// testHookHistoryCopied runs in Doc once the rows are copied: tests check
// the lock is free from there on.
var testHookHistoryCopied = func(*History) {}
