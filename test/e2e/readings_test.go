package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/user"
	"strconv"
	"testing"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/live"
)

// TestDetailReadings: the readings of top's GPU detail view (issue 40)
// reach the status document from the simulated driver; on an old driver
// that lacks their functions they are null, never 0. The fans' control
// policies and the GSP firmware's version and mode are given by the new
// driver and absent on the old one; a process's user (from /proc, not the
// driver) is its owner's name.
func TestDetailReadings(t *testing.T) {
	t.Parallel()
	pid := sleeper(t)
	for _, c := range []struct {
		name string
		o    opts
		// want: the value of each key (-1: null).
		want map[string]float64
	}{
		{"new driver", opts{scenario: fmt.Sprintf("gpus 1\ngpu 0 proc %d mem 100 sm 5 memutil 1\n", pid)}, map[string]float64{
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
				for i, f := range g.Fans {
					if p, ok := f["policy"]; !ok || p != nil {
						t.Errorf("old driver: fan %d policy %v (key present %v), want null", i, p, ok)
					}
				}
				if g.GSPVersion != "" || g.GSPMode != "" {
					t.Errorf("old driver: GSP firmware %q mode %q, want absent", g.GSPVersion, g.GSPMode)
				}
				return
			}
			if len(g.Fans) == 0 {
				t.Error("no fans in the document")
			}
			for i, f := range g.Fans {
				if p := f["policy"]; p == nil || *p != 0 {
					t.Errorf("fan %d policy %v, want 0 (auto)", i, p)
				}
			}
			if g.GSPVersion == "" || g.GSPMode != "enabled" {
				t.Errorf("GSP firmware %q mode %q, want a version and enabled", g.GSPVersion, g.GSPMode)
			}
			uid := uint32(os.Getuid())
			name := strconv.Itoa(os.Getuid())
			if u, err := user.LookupId(name); err == nil {
				name = u.Username
			}
			if g.Processes == nil {
				t.Fatal("no process read in the document")
			}
			found := false
			for _, pr := range g.Processes.List {
				if pr.PID == uint32(pid) {
					found = true
					if pr.UID == nil || *pr.UID != uid || pr.User != name {
						t.Errorf("process %d: uid %v user %q, want %d %q", pid, pr.UID, pr.User, uid, name)
					}
				}
			}
			if !found {
				t.Errorf("process %d not in the document: %+v", pid, g.Processes)
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
