package simnvml_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// TestScriptedProcesses: "gpu SEL proc PID ..." puts real PIDs on GPUs, with
// kind, memory, SM/memory busy and a time window, next to the count-based
// processes; GetProcessUtilization reports the busy ones.
func TestScriptedProcesses(t *testing.T) {
	t.Parallel()
	simulate(t, opts{scenario: `gpus 2
gpu 0 procs 1
gpu 0 proc 777 mem 1500 sm 80 memutil 30 for 1.5s
gpu 0 proc 888 both mem na sm 5
gpu 0 proc 999 graphics
gpu 1 proc 777
gpu 1 fail DeviceGetProcessUtilization not_supported
`}, func(c clock, l nvml.Interface) {
		d0, d1 := dev(t, l, 0), dev(t, l, 1)
		ps, r := d0.GetComputeRunningProcesses()
		ok(t, r, "compute procs")
		// count-based first (4000), then scripted in statement order
		if len(ps) != 3 || ps[0].Pid != 4000 || ps[1].Pid != 777 || ps[2].Pid != 888 {
			t.Fatalf("compute %+v", ps)
		}
		if ps[1].UsedGpuMemory != 1500<<20 || ps[2].UsedGpuMemory != ^uint64(0) {
			t.Fatalf("memory %d %d", ps[1].UsedGpuMemory, ps[2].UsedGpuMemory)
		}
		gp, r := d0.GetGraphicsRunningProcesses()
		ok(t, r, "graphics procs")
		if len(gp) != 2 || gp[0].Pid != 888 || gp[1].Pid != 999 {
			t.Fatalf("graphics %+v", gp)
		}
		if ps, _ := d1.GetComputeRunningProcesses(); len(ps) != 1 || ps[0].Pid != 777 {
			t.Fatalf("gpu 1 (same PID on two GPUs) %+v", ps)
		}

		before := uint64(time.Now().UnixMicro())
		us, r := d0.GetProcessUtilization(0)
		ok(t, r, "process utilization")
		// 777 and 888 ran (sm given); 999 has no sample (idle)
		if len(us) != 2 || us[0].Pid != 777 || us[0].SmUtil != 80 || us[0].MemUtil != 30 ||
			us[1].Pid != 888 || us[1].SmUtil != 5 || us[1].MemUtil != 0 {
			t.Fatalf("samples %+v", us)
		}
		if us[0].TimeStamp < before-1_000_000 || us[0].TimeStamp > before+1_000_000 {
			t.Fatalf("timestamp %d not wall-clock microseconds (now %d)", us[0].TimeStamp, before)
		}
		if _, r := d0.GetProcessUtilization(us[0].TimeStamp + 10_000_000); r != nvml.ERROR_NOT_FOUND {
			t.Fatalf("nothing newer than lastSeen: %v, want NOT_FOUND", r)
		}
		wantRet(t, ret(d1.GetProcessUtilization(0)), nvml.ERROR_NOT_SUPPORTED, "gpu 1 fail rule")

		// 777 leaves GPU 0 after 1.5 s.
		c.sleepUntil(2 * time.Second)
		ps, _ = d0.GetComputeRunningProcesses()
		if len(ps) != 2 || ps[1].Pid != 888 {
			t.Fatalf("after 777's window: %+v", ps)
		}
	})
}

func TestScriptedProcessErrors(t *testing.T) {
	cases := []struct{ scenario, stderr string }{
		{"gpu 0 proc\n", "expected: [at T] gpu SEL proc PID"},
		{"gpu 0 proc 12 sm 101\n", `proc: bad percentage "101"`},
		{"gpu 0 proc 12 mem\n", `proc: "mem" needs a value`},
		{"gpu 0 proc 12 color red\n", `proc: unknown word "color"`},
		{"gpu 0 proc 12 for x\n", `proc: bad duration "x"`},
	}
	for i, tc := range cases {
		t.Run(strconv.Itoa(i), func(t *testing.T) {
			t.Parallel()
			o := opts{scenario: tc.scenario, env: []string{envWant + "=" + strconv.Itoa(int(nvml.ERROR_UNKNOWN))}}
			out := runChildAs(t, "TestInitResults", o)
			if !strings.Contains(out, "test.scn:1: "+tc.stderr) {
				t.Fatalf("stderr lacks %q:\n%s", tc.stderr, out)
			}
		})
	}
}
