package anomaly

import (
	"log/slog"

	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

// throttleChangeDef: transitions of the clocks event reasons (throttle
// reasons) mask raise no flag, the mask is in every row already; each is
// logged so that the journal shows when throttling began, as the Python
// logger's "THROTTLE CHANGE" line did.
var throttleChangeDef = Def{
	Name:    "throttle_change",
	Counter: CounterDef{Name: "throttle_changes", Short: "throt_chg", Help: "clocks event reasons transitions"},
	Notice: NoticeDef{Msg: "throttle reasons changed", Level: slog.LevelInfo, Attrs: func(v [2]uint64) []slog.Attr {
		return []slog.Attr{
			slog.String("from", reading.ThrottleNames(v[0])),
			slog.String("to", reading.ThrottleNames(v[1])),
			slog.String("from_mask", hexMask(v[0])),
			slog.String("to_mask", hexMask(v[1]))}
	}},
	New: func(Knobs) Detector { return &throttleChange{} },
}

func init() { register(&throttleChangeDef) }

// throttleChange remembers the last present mask since start or the last
// outage.
type throttleChange struct{ last reading.Opt[uint64] }

// Check compares the current mask with the last present one and reports
// both when they differ. Nothing is reported when either is absent.
func (d *throttleChange) Check(in Input) Finding {
	if in.Seen == 0 {
		d.last = reading.Opt[uint64]{}
	}
	from, okF := d.last.Get()
	to, okT := in.Cur.Values[reading.Throttle].Get()
	if okT {
		d.last = in.Cur.Values[reading.Throttle]
	}
	if !okF || !okT || from == to {
		return Finding{}
	}
	return Finding{Count: true, Notice: true, V: [2]uint64{from, to}}
}
