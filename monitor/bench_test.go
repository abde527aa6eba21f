package monitor

import (
	"testing"

	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

// BenchmarkRecordHealth is a healthy sample's health bookkeeping (nothing
// changed since the last one, so no events.log line and no new view): what
// every GPU pays every tick. Its view (8.6 kB) and NVLink reading (4.8 kB)
// were copied at each sample until they were copied only on a change.
func BenchmarkRecordHealth(b *testing.B) {
	r := newRig(b, 1, nil)
	gs := r.m.gpus[0]
	var s reading.Sample
	gs.g.Sample(&s)
	res := gs.tr.Observe(&s, s.Time)
	gs.recordHealth(&s, &res, sampleIncident{}) // the baseline
	gs.g.Sample(&s)
	res = gs.tr.Observe(&s, s.Time)
	if res.HealthBaseline || res.NumHealthChanges() > 0 {
		b.Fatal("the second sample changed the health counters")
	}
	b.ReportAllocs()
	for b.Loop() {
		gs.recordHealth(&s, &res, sampleIncident{})
	}
}
