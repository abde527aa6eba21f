package e2e

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/live"
)

// TestDetailReadings: the readings of top's GPU detail view (issue 40)
// reach the status document from the simulated driver; on an old driver
// that lacks their functions they are null, never 0.
func TestDetailReadings(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		o    opts
		// want: the value of each key (-1: null).
		want map[string]float64
	}{
		{"new driver", opts{}, map[string]float64{
			"jpg_util_pct": 0, "ofa_util_pct": 0, "bar1_used_bytes": 4 << 20, "bar1_total_bytes": 256 << 20,
		}},
		{"old driver", opts{scenario: "@old-driver", oldLib: true}, map[string]float64{
			"jpg_util_pct": -1, "ofa_util_pct": -1, "pcie_gpu_max_gen": -1, "memory_reserved_bytes": -1,
			"bar1_total_bytes": 256 << 20,
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			p := start(t, c.o)
			p.waitForRows(0, 25, 20*time.Second)
			code, out := status(t, "--socket", p.socketPath(), "--json")
			p.stop()
			var d live.Doc
			if err := json.Unmarshal([]byte(out), &d); err != nil || len(d.GPUs) == 0 {
				t.Fatalf("status (exit %d): %v\n%s", code, err, out)
			}
			g := &d.GPUs[0]
			for key, want := range c.want {
				v, ok := g.Reading(key).Num()
				if !ok {
					v = -1
				}
				if v != want {
					t.Errorf("%s = %v, want %v (-1: null)", key, v, want)
				}
			}
			if c.name != "new driver" {
				return
			}
			// Read once and carried: every sample has them.
			for _, key := range []string{"max_graphics_clock_mhz", "max_sm_clock_mhz", "max_memory_clock_mhz", "shutdown_temp_c", "slowdown_temp_c", "memory_reserved_bytes"} {
				if v, ok := g.Reading(key).Num(); !ok || v <= 0 {
					t.Errorf("%s = %v (given %v)", key, v, ok)
				}
			}
			gpuMax, ok1 := g.Reading("pcie_gpu_max_gen").Num()
			linkMax, ok2 := g.Reading("pcie_max_gen").Num()
			if !ok1 || !ok2 || gpuMax != linkMax {
				t.Errorf("pcie_gpu_max_gen %v, pcie_max_gen %v: the simulated slot holds nothing back", gpuMax, linkMax)
			}
			if s, _ := g.Reading("slowdown_temp_c").Num(); s >= func() float64 { v, _ := g.Reading("shutdown_temp_c").Num(); return v }() {
				t.Errorf("slowdown at %v, not below shutdown", s)
			}
		})
	}
}
