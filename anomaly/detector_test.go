package anomaly

import (
	"slices"
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
// a detector it did not have follows them, in Detectors' order.
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
	want = append(want, "xid", "nvml_hung", "nvml_failed", "gpu_lost", "health_warning", "health_critical")
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
