package anomaly

import "github.com/gpu-telemetry/gpu-telemetry/reading"

// spurThrottle flags SPUR_THROT(<P>%ofLim): the SwPowerCap clocks event reason
// is set although the GPU draws only a small fraction of its power limit, so
// the power capping is not driven by power. Seen before GSP crashes when the
// firmware's power telemetry goes wrong.
type spurThrottle struct {
	fraction float64 // Config.SpuriousPowerFraction
	warmup   int     // Config.Warmup
}

// check returns the flag for cur and whether it applies. seen is how many good
// samples came before cur since start or the last outage. The throttle mask,
// the power and a non-zero power limit must all be present; a power of 0 W is
// not examined (the seed's guard: an idle reading, not a capped one). The flag
// carries the power as a rounded percentage of the limit.
func (d spurThrottle) check(seen int, cur *reading.Sample) (reading.Flag, bool) {
	if seen <= d.warmup {
		return reading.Flag{}, false
	}
	mask, ok := cur.Throttle.Get()
	if !ok || mask&reading.ThrottleSwPowerCap == 0 {
		return reading.Flag{}, false
	}
	p, okP := cur.PowerMW.Get()
	lim, okL := cur.PowerLimitMW.Get()
	if !okP || !okL || lim == 0 || p == 0 {
		return reading.Flag{}, false
	}
	if !(float64(p) < float64(lim)*d.fraction) {
		return reading.Flag{}, false
	}
	return reading.Flag{Kind: reading.FlagSpurThrot, A: roundPct(p, lim)}, true
}
