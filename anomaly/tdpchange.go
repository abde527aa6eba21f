package anomaly

import (
	"log/slog"

	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

// TDPChange is a change of the power management limit, for the caller to write
// to events.log (type=TDP_CHANGE from=..W to=..W delta=..W).
type TDPChange struct {
	FromMW uint32 // the last present limit before the change
	ToMW   uint32 // the new limit
}

// FromW returns the old limit in watts, rounded.
func (c TDPChange) FromW() int64 { return roundW(c.FromMW) }

// ToW returns the new limit in watts, rounded.
func (c TDPChange) ToW() int64 { return roundW(c.ToMW) }

// DeltaW returns the change in watts, rounded; negative when the limit went down.
func (c TDPChange) DeltaW() int64 { return roundDeltaW(int64(c.ToMW) - int64(c.FromMW)) }

// tdpChangeDef finds changes of the power limit such as those made by
// nvidia-smi -pl or a dynamic-TDP fan controller, flagged TDP_REDUCED(<W>W)
// or TDP_RESTORED(<W>W) with the new limit. Every change is counted and
// reported for events.log, even when its notice is held back.
var tdpChangeDef = Def{
	Name: "tdp_change",
	Flags: []reading.FlagDef{
		{Name: "tdp_reduced", Text: "TDP_REDUCED({A}W)", Anomaly: true},
		{Name: "tdp_restored", Text: "TDP_RESTORED({A}W)", Anomaly: true},
	},
	Counter: CounterDef{Name: "tdp_changes", Short: "tdp_chg", Snapshot: "tdp_changes", Help: "TDP_REDUCED and TDP_RESTORED", Window: WindowPeriod},
	Notice: NoticeDef{Msg: "power limit changed", Level: slog.LevelInfo, Attrs: func(v [2]uint64) []slog.Attr {
		c := TDPChange{FromMW: uint32(v[0]), ToMW: uint32(v[1])}
		return []slog.Attr{slog.Int64("from_w", c.FromW()), slog.Int64("to_w", c.ToW()), slog.Int64("delta_w", c.DeltaW())}
	}},
	// The Python logger's TDP_CHANGE_EPSILON_W: smaller changes are rounding
	// noise. Zero would report an unchanged limit on every sample.
	Knobs: []Knob{{Name: "TDPEpsilonW", Default: 5, Int: true, Min: 1, Max: noLimit, Want: ">= 1",
		Help: "Smallest power limit change, in W, reported as a TDP change."}},
	New: func(k Knobs) Detector { return &tdpChange{epsilonMW: uint32(k["TDPEpsilonW"]) * 1000} },
}

func init() { register(&tdpChangeDef) }

// tdpChange remembers the last present limit since start or the last outage.
type tdpChange struct {
	epsilonMW uint32 // TDPEpsilonW in mW
	last      reading.Opt[uint32]
}

// Check compares the current power limit with the last present one. It
// reports a change when both are present and non-zero and differ by at least
// the epsilon. A zero limit is treated as absent: no GPU runs with one.
func (d *tdpChange) Check(in Input) Finding {
	if in.Seen == 0 {
		d.last = reading.Opt[uint32]{}
	}
	from, okF := d.last.Get()
	to, okT := in.Cur.U32(reading.PowerLimitMW).Get()
	if okT && to != 0 {
		d.last = in.Cur.U32(reading.PowerLimitMW)
	}
	if !okF || !okT || from == 0 || to == 0 {
		return Finding{}
	}
	diff, flag := to-from, 2 // TDP_RESTORED
	if from > to {
		diff, flag = from-to, 1 // TDP_REDUCED
	}
	if diff < d.epsilonMW {
		return Finding{}
	}
	c := TDPChange{FromMW: from, ToMW: to}
	return Finding{Count: true, Flag: flag, A: c.ToW(), Notice: true, V: [2]uint64{uint64(from), uint64(to)}, TDP: reading.Some(c)}
}
