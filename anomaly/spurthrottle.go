package anomaly

import (
	"log/slog"

	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

// spurThrottleDef flags SPUR_THROT(<P>%ofLim): the SwPowerCap clocks event
// reason is set although the GPU draws only a small fraction of its power
// limit, so the power capping is not driven by power. Seen before GSP
// crashes when the firmware's power telemetry goes wrong.
var spurThrottleDef = Def{
	Name:    "spurious_throttle",
	Flags:   []reading.FlagDef{{Name: "spur_throt", Text: "SPUR_THROT({A}%ofLim)", Anomaly: true}},
	Counter: CounterDef{Name: "spurious_throttles", Short: "spur", Snapshot: "spur_throt", Help: "spurious throttles (SPUR_THROT)", Window: WindowRate},
	Notice: NoticeDef{Msg: "anomaly: SwPowerCap throttle at low power", Level: slog.LevelWarn, Attrs: func(v [2]uint64) []slog.Attr {
		p, lim := uint32(v[0]), uint32(v[1])
		return []slog.Attr{slog.Int64("power_w", roundW(p)), slog.Int64("limit_w", roundW(lim)), slog.Int64("pct_of_limit", pctOrZero(p, lim))}
	}},
	Knobs: []Knob{
		// The Python logger's SPURIOUS_THROTTLE_POWER_PCT.
		{Name: "SpuriousPowerFraction", Default: 0.25, Min: 1e-9, Max: 1 - 1e-9, Want: "a fraction in (0,1)",
			Help: "Fraction of the power limit below which a SwPowerCap throttle is spurious."},
		warmupKnob,
	},
	New: func(k Knobs) Detector {
		return spurThrottle{fraction: k["SpuriousPowerFraction"], warmup: int(k["Warmup"])}
	},
}

func init() { register(&spurThrottleDef) }

type spurThrottle struct {
	fraction float64 // SpuriousPowerFraction
	warmup   int     // Warmup
}

// Check flags SwPowerCap at low power. The throttle mask, the power and a
// non-zero power limit must all be present; a power of 0 W is not examined
// (the Python logger's 0 < power guard: an idle reading, not a capped one).
// The flag carries the power as a rounded percentage of the limit.
func (d spurThrottle) Check(in Input) Finding {
	cur := in.Cur
	if in.Seen <= d.warmup {
		return Finding{}
	}
	mask, ok := cur.Values[reading.Throttle].Get()
	if !ok || mask&reading.ThrottleSwPowerCap == 0 {
		return Finding{}
	}
	p, okP := cur.U32(reading.PowerMW).Get()
	lim, okL := cur.U32(reading.PowerLimitMW).Get()
	if !okP || !okL || lim == 0 || p == 0 || !(float64(p) < float64(lim)*d.fraction) {
		return Finding{}
	}
	return Finding{Count: true, Flag: 1, A: roundPct(p, lim), Notice: true, V: [2]uint64{uint64(p), uint64(lim)}}
}

// pctOrZero is roundPct that tolerates a zero whole.
func pctOrZero(part, whole uint32) int64 {
	if whole == 0 {
		return 0
	}
	return roundPct(part, whole)
}
