package anomaly

import "github.com/gpu-telemetry/gpu-telemetry/reading"

// fanSpike flags FAN_SPIKE: some fan's speed moved by at least thresholdPct
// percentage points between two consecutive good samples. A sudden fan jump
// with no load change was the most common precursor of a GSP crash in the
// seed's logs.
type fanSpike struct {
	thresholdPct uint32 // Config.SpikeThresholdPct
	warmup       int    // Config.SpikeWarmup
}

// check reports whether cur shows a fan spike against prev. seen is how many
// good samples came before cur since start or the last outage; prev is nil
// when there is none. Only fans whose speed is present in both samples are
// compared: an absent speed is not a stopped fan.
func (d fanSpike) check(seen int, prev, cur *reading.Sample) bool {
	if prev == nil || seen <= d.warmup {
		return false
	}
	n := min(prev.NumFans, cur.NumFans, reading.MaxFans)
	for i := 0; i < n; i++ {
		a, okA := prev.Fans[i].Speed.Get()
		b, okB := cur.Fans[i].Speed.Get()
		if !okA || !okB {
			continue
		}
		diff := b - a
		if a > b {
			diff = a - b
		}
		if diff >= d.thresholdPct {
			return true
		}
	}
	return false
}
