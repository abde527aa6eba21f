package anomaly

import "github.com/gpu-telemetry/gpu-telemetry/reading"

// throttleChange finds transitions of the clocks event reasons (throttle
// reasons) mask. They raise no flag: the mask is in every row already; the
// transition is logged so that the journal shows when throttling began.
type throttleChange struct{}

// check compares cur's mask with last, the last present mask since start or
// the last outage, and returns both when they differ. Nothing is reported when
// either is absent.
func (throttleChange) check(last reading.Opt[uint64], cur *reading.Sample) (from, to uint64, changed bool) {
	from, okF := last.Get()
	to, okT := cur.Throttle.Get()
	if !okF || !okT || from == to {
		return 0, 0, false
	}
	return from, to, true
}
