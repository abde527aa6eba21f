package anomaly

import "github.com/gpu-telemetry/gpu-telemetry/reading"

// powerBreach finds power draw above the power limit. Every breach is counted;
// only an overage beyond flagW is flagged PWR+<N>W on the row, because short
// overshoots of a few watts are normal for the power controller.
type powerBreach struct {
	flagMW uint32 // Config.PowerOverFlagW in mW
}

// check reports whether cur's power is above its limit (breached), and returns
// the PWR flag with the overage rounded to watts when the overage is strictly
// above the flag threshold (flagged). Power and a non-zero limit must both be
// present.
func (d powerBreach) check(cur *reading.Sample) (f reading.Flag, breached, flagged bool) {
	p, okP := cur.PowerMW.Get()
	lim, okL := cur.PowerLimitMW.Get()
	if !okP || !okL || lim == 0 || p <= lim {
		return reading.Flag{}, false, false
	}
	over := p - lim
	if over <= d.flagMW {
		return reading.Flag{}, true, false
	}
	return reading.Flag{Kind: reading.FlagPowerOver, A: roundW(over)}, true, true
}
