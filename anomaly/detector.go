package anomaly

import (
	"cmp"
	"fmt"
	"log/slog"
	"slices"
	"strings"
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
// how to build it. Each detector's file declares its Def and its type and
// registers the Def (register); the Tracker, Config, the counters, the
// notices and the command line all walk Detectors.
type Def struct {
	Name    string            // names the detector and its notices in logs: "fan_inversion"
	Flags   []reading.FlagDef // the kinds of flag it writes on rows, if any
	Counter CounterDef        // what it counts; every finding with Count set
	Notice  NoticeDef         // its log notice, if its findings ask for one
	Knobs   []Knob            // its thresholds, in Config.Knobs
	// SpikeSnapshot: a flagged finding asks for a (rate-limited) fan spike
	// snapshot (Result.Spike).
	SpikeSnapshot bool
	// Evidence is the health reason its flag is evidence of: a flagged
	// finding begins (or prolongs) that reason in the health verdict.
	Evidence reading.Opt[HealthReason]
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

// Detectors are the registered detectors in the order each sample is
// examined: the order of their flags on a row and of their notices (see
// pythonOrder). Each detector's file registers its Def in an init func
// (register); nothing else lists them.
var Detectors []*Def

// pythonOrder holds the detectors of the Python logger this one replaced
// (gpu-telemetry-deep.py), by Def.Name, in the order each of its outputs
// had them. It is frozen, so that rows, `gpu-telemetry status` and
// summary.log read, and grep, as they always have; a detector it did not
// have follows them in every order, by Name.
var pythonOrder = struct{ examined, flags, counters []string }{
	// Its sampling step (the throttle transition, the TDP change), then the
	// fan spike, then its _check_anomalies (inversion, spurious throttle,
	// power breach): Detectors, the flags on a row and the notices.
	examined: []string{"throttle_change", "tdp_change", "fan_spike", "fan_inversion", "spurious_throttle", "power_over"},
	// Its flag legend: the flag kinds `gpu-telemetry status` and the
	// metrics list (throttle_change has none).
	flags: []string{"fan_spike", "fan_inversion", "spurious_throttle", "power_over", "tdp_change", "throttle_change"},
	// Its summary line: the counters in summary.log and the status line.
	counters: []string{"fan_spike", "power_over", "fan_inversion", "spurious_throttle", "tdp_change", "throttle_change"},
}

// inOrder returns defs sorted by their place in order, one of pythonOrder's
// lists; the detectors not in it come after, by Name.
func inOrder(order []string, defs []*Def) []*Def {
	place := func(d *Def) int {
		if i := slices.Index(order, d.Name); i >= 0 {
			return i
		}
		return len(order)
	}
	return slices.SortedFunc(slices.Values(defs), func(a, b *Def) int {
		return cmp.Or(cmp.Compare(place(a), place(b)), strings.Compare(a.Name, b.Name))
	})
}

// register adds detector d. Every detector's file calls it from an init
// func. It recomputes all that is derived from the detectors (Detectors'
// order, the flag kinds registered with reading, CounterDefs and the
// detectors' places in it) from the set registered so far, so the result
// does not depend on the order in which Go runs the init funcs; it is
// complete once the package has initialized, before any importer runs. For
// the same reason nothing in this package may read that state in a
// package-level var: those are initialized before any init func runs.
func register(d *Def) {
	if slices.ContainsFunc(Detectors, func(e *Def) bool { return e.Name == d.Name }) {
		panic("anomaly: detector " + d.Name + " registered twice")
	}
	if len(Detectors) == maxDetectors {
		panic(fmt.Sprintf("anomaly: more than %d detectors", maxDetectors))
	}
	Detectors = inOrder(pythonOrder.examined, append(Detectors, d))
	registerFlagKinds()
	CounterDefs = counterDefs()
}

// registerFlagKinds registers every detector's flags with reading, in the
// order outputs list them, replacing those registered before.
func registerFlagKinds() {
	var flags []reading.FlagDef
	for _, d := range inOrder(pythonOrder.flags, Detectors) {
		flags = append(flags, d.Flags...)
	}
	kinds := reading.RegisterFlagKinds(flags)
	for _, d := range inOrder(pythonOrder.flags, Detectors) {
		d.kinds, kinds = kinds[:len(d.Flags)], kinds[len(d.Flags):]
	}
}

// FlagReason returns the health reason that the flag family on a row
// ("PCIE_DEGRADED" of "PCIE_DEGRADED(x8,gen4)") is evidence of
// (Def.Evidence), for a reader replaying rows through HealthWatch.
func FlagReason(family string) (HealthReason, bool) {
	for _, d := range Detectors {
		rs, ok := d.Evidence.Get()
		if !ok {
			continue
		}
		for _, f := range d.Flags {
			if fam, _, _ := strings.Cut(f.Text, "("); fam == family {
				return rs, true
			}
		}
	}
	return 0, false
}

// maxDetectors bounds Detectors: a Result holds at most one notice of each.
const maxDetectors = 16
