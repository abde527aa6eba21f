package monitor

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpu-telemetry/gpu-telemetry/live"
	"github.com/gpu-telemetry/gpu-telemetry/reading"
	"github.com/gpu-telemetry/gpu-telemetry/sampler/fakenvml"
)

// TestProcessesPublishedAndInCrashSnapshot: the slow tier's process list
// (this test's own PID on GPU 1) reaches the published view once a second,
// and the crash snapshot of GPU 1's hang names the process, read while the
// GPU's sample is stuck.
func TestProcessesPublishedAndInCrashSnapshot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 2, nil)
		pid := uint32(os.Getpid())
		r.devs[1].Update(func(d *fakenvml.Dev) { d.Procs = []nvml.ProcessInfo{{Pid: pid, UsedGpuMemory: 3 << 30}} })
		views := make(chan live.View, 1)
		released := make(chan func(), 1)
		r.run(4*time.Second, func() {
			go func() {
				time.Sleep(1500 * time.Millisecond)
				views <- r.m.Board().View()
				released <- r.devs[1].Block("GetTemperature", nil)
			}()
		})
		// Run has returned with GPU 1's call still stuck. Released now, the
		// call's goroutine logs NVML_RECOVERED to events.log; let it finish
		// before the test's temp dir is removed (cleanup runs before the
		// bubble's goroutines are waited for).
		(<-released)()
		synctest.Wait()
		v := <-views
		p := v.GPUs[1].Processes
		if p == nil || p.Status != reading.ProcOK || len(p.List) != 1 || p.List[0].PID != pid {
			t.Fatalf("published processes of GPU 1: %+v", p)
		}
		if p0 := v.GPUs[0].Processes; p0 == nil || p0.Status != reading.ProcOK || len(p0.List) != 0 {
			t.Errorf("GPU 0 (idle): %+v", p0)
		}
		m, _ := filepath.Glob(filepath.Join(r.dir, "crashes", "crash-*-gpu1.log"))
		if len(m) == 0 {
			t.Fatalf("no crash snapshot for the hang:\n%s", r.logs)
		}
		b, _ := os.ReadFile(m[0])
		snap := string(b)
		i := strings.Index(snap, "=== Processes on this GPU ===")
		if i < 0 {
			t.Fatalf("no processes section:\n%s", snap)
		}
		sec := snap[i:]
		exe, _ := os.ReadFile("/proc/self/comm")
		for _, w := range []string{strconv.Itoa(int(pid)), "3072 MiB", strings.TrimSpace(string(exe)) + ":"} {
			if !strings.Contains(sec, w) {
				t.Errorf("processes section lacks %q:\n%s", w, sec)
			}
		}
	})
}
