package live_test

import (
	"testing"

	"github.com/gpu-telemetry/gpu-telemetry/live"
	"github.com/gpu-telemetry/gpu-telemetry/live/livetest"
)

// TestLookup: a key of the table is found (absent when the GPU has no
// value); a key this build lacks is not found and absent, never a panic.
func TestLookup(t *testing.T) {
	g := live.NewDoc(livetest.View()).GPUs[0]
	if v, ok := g.Lookup("temperature_c"); !ok || v.Text("C") != "71C" {
		t.Errorf("temperature_c: %v %v", v.Text("C"), ok)
	}
	if v, ok := g.Lookup("ofa_util_pct_not_a_key"); ok || v.Text("") != "n/a" {
		t.Errorf("an unknown key: %v %v", v.Text(""), ok)
	}
	var empty live.GPUDoc
	if v, ok := empty.Lookup("temperature_c"); !ok || v.Text("") != "n/a" {
		t.Errorf("no readings: %v %v", v.Text(""), ok)
	}
}
