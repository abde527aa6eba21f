package anomaly

import (
	"log/slog"

	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

// powerBreachDef finds power draw above the power limit. Every breach is
// counted; only an overage beyond the flag threshold is flagged PWR+<N>W on
// the row and logged, because short overshoots of a few watts are normal for
// the power controller.
var powerBreachDef = Def{
	Name:    "power_over",
	Flags:   []reading.FlagDef{{Name: "power_over", Text: "PWR+{A}W", Anomaly: true}},
	Counter: CounterDef{Name: "pwr_breaches", Short: "pwr", Snapshot: "pwr_breach", Help: "samples with power above the limit, flagged or not", Window: WindowRate},
	Notice: NoticeDef{Msg: "anomaly: power above limit", Level: slog.LevelWarn, Attrs: func(v [2]uint64) []slog.Attr {
		p, lim := uint32(v[0]), uint32(v[1])
		return []slog.Attr{slog.Int64("power_w", roundW(p)), slog.Int64("limit_w", roundW(lim)), slog.Int64("over_w", roundDeltaW(int64(p)-int64(lim)))}
	}},
	// The Python logger's overage_w > 50.
	Knobs: []Knob{{Name: "PowerOverFlagW", Default: 50, Int: true, Min: 0, Max: noLimit, Want: ">= 0",
		Help: "Overage above the power limit, in W, beyond which a breach is flagged."}},
	New: func(k Knobs) Detector { return powerBreach{flagMW: uint32(k["PowerOverFlagW"]) * 1000} },
}

func init() { register(&powerBreachDef) }

type powerBreach struct {
	flagMW uint32 // PowerOverFlagW in mW
}

// Check counts power above the limit, and flags it with the overage rounded
// to watts when the overage is strictly above the flag threshold. Power and
// a non-zero limit must both be present.
func (d powerBreach) Check(in Input) Finding {
	p, okP := in.Cur.U32(reading.PowerMW).Get()
	lim, okL := in.Cur.U32(reading.PowerLimitMW).Get()
	if !okP || !okL || lim == 0 || p <= lim {
		return Finding{}
	}
	if p-lim <= d.flagMW {
		return Finding{Count: true}
	}
	return Finding{Count: true, Flag: 1, A: roundW(p - lim), Notice: true, V: [2]uint64{uint64(p), uint64(lim)}}
}
