package anomaly

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

// TestDetectorsDeclared: every detector has what the outputs need: a name,
// a counter with its help, a notice message for the notices it gives, a
// constructor, and flag kinds that exist.
func TestDetectorsDeclared(t *testing.T) {
	names := map[string]bool{}
	for _, d := range Detectors {
		if d.Name == "" || names[d.Name] || d.Counter.Name == "" || d.Counter.Help == "" || d.New == nil {
			t.Errorf("detector %+v: name, counter, help or New missing, or name taken", d)
		}
		names[d.Name] = true
		if (d.Notice.Msg == "") != (d.Notice.Attrs == nil) {
			t.Errorf("%s: a notice needs both a message and its attributes", d.Name)
		}
		for _, kn := range d.Knobs {
			if err := kn.Check(kn.Name, kn.Default); err != nil || kn.Help == "" {
				t.Errorf("%s: knob %s: default invalid (%v) or no help", d.Name, kn.Name, err)
			}
		}
	}
}

// TestOutputOrders: the status document lists flag kinds, and summary.log
// and the status line the counters, in the order they always have (the
// Python logger's flag legend and summary line), whatever Detectors' order;
// a detector it did not have follows them, by Name.
func TestOutputOrders(t *testing.T) {
	var later []*Def // detectors after the Python logger's
	for _, d := range Detectors {
		if !slices.Contains([]string{"throttle_change", "tdp_change", "fan_spike", "fan_inversion", "spurious_throttle", "power_over"}, d.Name) {
			later = append(later, d)
		}
	}
	var kinds []string
	for _, k := range reading.FlagKinds() {
		kinds = append(kinds, k.Def().Name)
	}
	want := []string{"fan_spike", "temp_fan_inv", "spur_throt", "power_over", "tdp_reduced", "tdp_restored"}
	for _, d := range later {
		for _, f := range d.Flags {
			want = append(want, f.Name)
		}
	}
	want = append(want, "xid", "nvml_hung", "nvml_failed", "gpu_lost", "health_warning", "health_critical", "fan_guard")
	if !slices.Equal(kinds, want) {
		t.Errorf("flag kinds %v, want %v", kinds, want)
	}
	var counters []string
	for _, d := range CounterDefs {
		counters = append(counters, d.Name)
	}
	want = []string{"samples", "skipped", "spikes", "pwr_breaches", "fan_inversions", "spurious_throttles",
		"tdp_changes", "throttle_changes"}
	for _, d := range later {
		want = append(want, d.Counter.Name)
	}
	want = append(want, "health_warnings", "health_critical")
	if !slices.Equal(counters, want) {
		t.Errorf("counters %v, want %v", counters, want)
	}
}

// TestExaminationOrder: every sample is examined by the Python logger's
// detectors in its order (so a row's flags and the notices read as they
// always have), then by the later ones, by name; none is missing.
func TestExaminationOrder(t *testing.T) {
	var got, later []string
	for _, d := range Detectors {
		got = append(got, d.Name)
	}
	want := []string{"throttle_change", "tdp_change", "fan_spike", "fan_inversion", "spurious_throttle", "power_over"}
	if len(got) < len(want) || !slices.Equal(got[:len(want)], want) {
		t.Fatalf("Detectors %v, want them to begin %v", got, want)
	}
	later = got[len(want):]
	if !slices.IsSorted(later) || !slices.Contains(later, "pcie_degraded") {
		t.Errorf("later detectors %v, want them by name, pcie_degraded among them", later)
	}
	for _, order := range [][]string{pythonOrder.flags, pythonOrder.counters} {
		if !slices.Equal(slices.Sorted(slices.Values(order)), slices.Sorted(slices.Values(want))) {
			t.Errorf("pythonOrder list %v does not hold the Python logger's detectors %v", order, want)
		}
	}
}

// TestRegisterOrder: what register derives (Detectors, the flag kinds
// registered with reading, CounterDefs and each detector's place in them)
// does not depend on the order the detectors' init funcs run in.
func TestRegisterOrder(t *testing.T) {
	type state struct {
		dets     []*Def
		kinds    [][]reading.FlagKind
		counters []Counter
		flags    []reading.FlagKind
		defs     []CounterDef
	}
	snap := func() state {
		s := state{dets: slices.Clone(Detectors), flags: reading.FlagKinds(), defs: slices.Clone(CounterDefs)}
		for _, d := range Detectors {
			s.kinds = append(s.kinds, slices.Clone(d.kinds))
			s.counters = append(s.counters, d.counter)
		}
		return s
	}
	reregister := func(defs []*Def) {
		Detectors = nil
		for _, d := range defs {
			register(d)
		}
	}
	orig := snap()
	t.Cleanup(func() { reregister(orig.dets) })
	reversed := slices.Clone(orig.dets)
	slices.Reverse(reversed)
	byName := slices.SortedFunc(slices.Values(orig.dets), func(a, b *Def) int { return strings.Compare(a.Name, b.Name) })
	for name, order := range map[string][]*Def{"reversed": reversed, "by name": byName, "last first": slices.Concat(orig.dets[len(orig.dets)-1:], orig.dets[:len(orig.dets)-1])} {
		reregister(order)
		if got := snap(); !reflect.DeepEqual(got, orig) {
			t.Errorf("registered %s: %+v, want %+v", name, got, orig)
		}
	}
}
