package anomaly

import (
	"cmp"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

// Detector is one flag detector built for one GPU (Def.New). Check is pure
// but for the detector's own memory of earlier samples (the last present
// power limit, say), which it must drop when in.Seen is 0: the first good
// sample since start or since an outage is compared with nothing.
type Detector interface {
	Check(in Input) Finding
}

// Input is what a check sees: the current good sample, the previous one and
// the time, as a value.
type Input struct {
	Prev *reading.Sample // the previous good sample; nil when Seen is 0
	Cur  *reading.Sample // the sample examined; the check must not change it
	Seen int             // good samples before Cur since start or the last outage
	Now  time.Time       // when Cur was taken
}

// Finding is what one check found; the zero value is nothing.
type Finding struct {
	Count  bool      // count it in the detector's counter (Def.Counter)
	Flag   int       // 1 + the index in Def.Flags of the flag to write on the row; 0: none
	A, B   int64     // the flag's arguments
	Notice bool      // a log notice is due (Def.Notice), unless its cooldown holds it back
	V      [2]uint64 // the notice's values, read by Def.Notice.Attrs
	// TDP is a power limit change, for events.log (Result.TDP).
	TDP reading.Opt[TDPChange]
}

// Def declares one detector: its flags, counter, log notice and knobs, and
// how to build it. Each detector's file declares its Def and its type; the
// Tracker, Config, the counters, the notices and the command line all walk
// Detectors.
type Def struct {
	Name    string            // names the detector and its notices in logs: "fan_inversion"
	Flags   []reading.FlagDef // the kinds of flag it writes on rows, if any
	Counter CounterDef        // what it counts; every finding with Count set
	Notice  NoticeDef         // its log notice, if its findings ask for one
	Knobs   []Knob            // its thresholds, in Config.Knobs
	// SpikeSnapshot: a flagged finding asks for a (rate-limited) fan spike
	// snapshot (Result.Spike).
	SpikeSnapshot bool
	// New builds the detector for one GPU from validated knobs.
	New func(k Knobs) Detector

	kinds   []reading.FlagKind // Flags as registered with reading
	counter Counter            // Counter's place in CounterDefs
}

// NoticeDef is how a detector's notices are logged.
type NoticeDef struct {
	Msg string
	// Level is Warn for anomalies, Info for changes an operator may have
	// made on purpose.
	Level slog.Level
	// Attrs returns the attributes after gpu from a finding's V.
	Attrs func(v [2]uint64) []slog.Attr
}

// Detectors are the detectors in the order each sample is examined: the
// order of their flags on a row and of their notices. It is the order of the
// Python logger this one replaced (gpu-telemetry-deep.py): the throttle
// transition and the TDP change in its sampling step, then the fan spike,
// then its _check_anomalies (inversion, spurious throttle, power breach).
// Rows keep that order so they read, and grep, as they always have.
// A new detector is its own file and one line here.
var Detectors = []*Def{
	&throttleChangeDef,
	&tdpChangeDef,
	&fanSpikeDef,
	&fanInversionDef,
	&spurThrottleDef,
	&powerBreachDef,
	&pcieDegradedDef,
}

// pythonFlagOrder is the order in which `gpu-telemetry status` has always
// listed the first detectors' flags (the order of the Python logger's flag
// legend). It is frozen: a later detector's flags follow these, in
// Detectors' order.
var pythonFlagOrder = []string{"fan_spike", "temp_fan_inv", "spur_throt", "power_over", "tdp_reduced", "tdp_restored"}

// registerFlagKinds registers every detector's flags with reading, in the
// order outputs list them, while the package initializes.
var _ = registerFlagKinds()

func registerFlagKinds() bool {
	if len(Detectors) > maxDetectors {
		panic(fmt.Sprintf("anomaly: %d detectors, at most %d", len(Detectors), maxDetectors))
	}
	type flag struct {
		d *Def
		i int
	}
	var all []flag
	for _, d := range Detectors {
		d.kinds = make([]reading.FlagKind, len(d.Flags))
		for i := range d.Flags {
			all = append(all, flag{d, i})
		}
	}
	place := func(f flag) int { return placeIn(pythonFlagOrder, f.d.Flags[f.i].Name) }
	slices.SortStableFunc(all, func(a, b flag) int { return cmp.Compare(place(a), place(b)) })
	for _, f := range all {
		f.d.kinds[f.i] = reading.NewFlagKind(f.d.Flags[f.i])
	}
	return true
}

// placeIn is name's place in a frozen order; names not in it come after.
func placeIn(order []string, name string) int {
	if i := slices.Index(order, name); i >= 0 {
		return i
	}
	return len(order)
}

// maxDetectors bounds Detectors: a Result holds at most one notice of each.
const maxDetectors = 16
