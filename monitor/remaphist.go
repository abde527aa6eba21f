package monitor

import (
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/reading"
	"github.com/gpu-telemetry/gpu-telemetry/sink"
)

// The row remapper histogram, as the sampler last read it (at start and
// when the remap counts change): in the baseline line, then one
// type=HEALTH counter=remap_histogram line per change, and in the health
// view for the crash snapshot and status.

// remapHistBaseline is the baseline line's remap_histogram= field; none
// when the GPU has no histogram.
func (gs *gpuState) remapHistBaseline() []sink.Field {
	if h := gs.g.RemapHistogram(); h != nil {
		return []sink.Field{{Key: "remap_histogram", Value: h.String()}}
	}
	return nil
}

// recordRemapHist puts a newly read histogram in the view v (prev: the
// last published one) and writes its change to events.log; the first one
// is in the baseline line when baseline. It reports whether v changed.
func (gs *gpuState) recordRemapHist(v *HealthView, prev *reading.RemapHistogram, baseline bool, now time.Time) bool {
	h := gs.g.RemapHistogram()
	if h == nil || h == prev {
		return false
	}
	v.RemapHist = h
	switch {
	case prev == nil && baseline:
	case prev == nil:
		gs.m.eventLine(gs.event(now, sink.TypeHealth, "counter", "remap_histogram", "from", "n/a", "to", h.String()))
	case prev.Buckets() != h.Buckets():
		gs.m.eventLine(gs.event(now, sink.TypeHealth, "counter", "remap_histogram", "from", prev.String(), "to", h.String()))
	}
	return true
}
