package monitor

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpu-telemetry/gpu-telemetry/fanguard"
	"github.com/gpu-telemetry/gpu-telemetry/runstate"
	"github.com/gpu-telemetry/gpu-telemetry/sampler/fakenvml"
)

// withFanGuard turns the fan guard on with its defaults.
func withFanGuard(c *Config) {
	fg := fanguard.DefaultConfig()
	c.FanGuard = &fg
}

// hot sets the GPU's die temperature.
func hot(d *fakenvml.Dev, c uint32) {
	d.Update(func(d *fakenvml.Dev) { d.Getters[fakenvml.Getter{Fn: "GetTemperature", Arg: 0}] = c })
}

var fanSetters = []string{"SetFanSpeed_v2", "SetDefaultFanSpeed_v2", "SetFanControlPolicy", "GetMinMaxFanSpeed"}

// Without --fan-guard no fan setter is called, however hot the GPU.
func TestNoFanSetterWithoutTheFanGuard(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 1, nil)
		hot(r.devs[0], 95)
		r.run(3*time.Second, nil)
		for _, fn := range fanSetters {
			if n := r.devs[0].Count(fn); n != 0 {
				t.Errorf("%s called %d times without --fan-guard", fn, n)
			}
		}
		if slices.Contains(r.steps, "fans-handed-back") {
			t.Errorf("shutdown steps %v hand fans back without --fan-guard", r.steps)
		}
	})
}

// The guard takes a hot GPU's fans, the rows say so, run-state records
// them while held, and shutdown hands them back after the workers stop and
// before the files close; run-state then holds none.
func TestFanGuardTakesAndHandsBackAtShutdown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 1, withFanGuard)
		d := r.devs[0]
		hot(d, 75)
		var during runstate.State
		r.run(3*time.Second, func() {
			time.Sleep(2 * time.Second)
			during, _, _ = runstate.Read(r.dir)
		})
		if n := d.Count("SetFanSpeed_v2"); n != 2 {
			t.Errorf("SetFanSpeed_v2 called %d times, want 2 (each fan once: 75 C stays put)", n)
		}
		if n := d.Count("SetDefaultFanSpeed_v2"); n != 2 {
			t.Errorf("SetDefaultFanSpeed_v2 called %d times at shutdown, want 2", n)
		}
		if len(during.FanGuard) != 1 || during.FanGuard[0].UUID != "GPU-a" || !slices.Equal(during.FanGuard[0].Fans, []int{0, 1}) {
			t.Errorf("run-state while held: %+v", during.FanGuard)
		}
		if after, _, _ := runstate.Read(r.dir); len(after.FanGuard) != 0 {
			t.Errorf("run-state after the hand-back: %+v", after.FanGuard)
		}
		rows := r.rows(0)
		if !strings.HasSuffix(rows[len(rows)-1], "FAN_GUARD(76%)") {
			t.Errorf("last row %q does not carry FAN_GUARD(76%%)", rows[len(rows)-1])
		}
		ev, _ := os.ReadFile(filepath.Join(r.dir, EventsLog))
		for _, want := range []string{"type=FAN_GUARD kind=engaged fan=0 speed_pct=76 firmware_pct=30 temp_c=75 reason=temperature",
			"type=FAN_GUARD kind=released fan=1 speed_pct=76 firmware_pct=31 temp_c=75 reason=shutdown"} {
			if !strings.Contains(string(ev), want) {
				t.Errorf("events.log lacks %q:\n%s", want, ev)
			}
		}
		want := []string{"stop-sampling", "listeners-stopped", "workers-stopped", "fans-handed-back", "snapshots-closed", "summary-written", "files-closed", "nvml-closed"}
		if !slices.Equal(r.steps, want) {
			t.Errorf("shutdown steps %v, want %v", r.steps, want)
		}
		if v := r.m.board.View().GPUs[0].FanGuard; v == nil || v.Holding() {
			t.Errorf("published view after stop: %+v", v)
		}
	})
}

// A previous run killed while it held fans: the next start hands them
// back before anything else, and says so.
func TestFanGuardRestoresWhatAKilledRunHeld(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 1, withFanGuard)
		if err := runstate.Write(r.dir, runstate.State{BootID: "b", Started: time.Now().Add(-time.Hour), PID: 1,
			FanGuard: []runstate.FanHold{{UUID: "GPU-a", Fans: []int{0, 1}}}}); err != nil {
			t.Fatal(err)
		}
		r.run(2*time.Second, nil)
		if n := r.devs[0].Count("SetDefaultFanSpeed_v2"); n != 2 {
			t.Errorf("SetDefaultFanSpeed_v2 called %d times, want 2 (the previous run's fans)", n)
		}
		if n := r.devs[0].Count("SetFanSpeed_v2"); n != 0 {
			t.Errorf("SetFanSpeed_v2 called %d times at 60 C", n)
		}
		if !strings.Contains(r.logs.String(), "previous run held these fans") {
			t.Errorf("no line says the previous run's fans were handed back:\n%s", r.logs)
		}
		if st, _, _ := runstate.Read(r.dir); len(st.FanGuard) != 0 {
			t.Errorf("run-state still holds %+v", st.FanGuard)
		}
	})
}

// Refused (not root): one WARN, counted, no flag, and the GPU keeps
// being recorded.
func TestFanGuardRefusedKeepsRecording(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 1, withFanGuard)
		hot(r.devs[0], 80)
		r.devs[0].Set("SetFanSpeed_v2", nvml.ERROR_NO_PERMISSION)
		r.run(3*time.Second, nil)
		if n := strings.Count(r.logs.String(), "refuses fan control"); n != 1 {
			t.Errorf("%d refusal lines, want 1:\n%s", n, r.logs)
		}
		if r.counted("fan_guard_refusals") != 1 {
			t.Errorf("fan_guard_refusals = %d", r.counted("fan_guard_refusals"))
		}
		rows := r.rows(0)
		if len(rows) < 25 || strings.Contains(strings.Join(rows, "\n"), "FAN_GUARD") {
			t.Errorf("%d rows; a refused guard flags none", len(rows))
		}
	})
}

// A GPU whose process read is stuck in the driver at shutdown is not
// touched by the hand-back either (a setter would block on the same
// fault), and the WARN names it; run-state keeps its fans.
func TestFanGuardShutdownSkipsAStuckProcessRead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 1, withFanGuard)
		d := r.devs[0]
		hot(d, 75)
		var release func()
		defer func() { release() }()
		r.run(3*time.Second, func() {
			time.Sleep(2 * time.Second)
			release = d.Block("GetComputeRunningProcesses", nil)
		})
		if n := d.Count("SetDefaultFanSpeed_v2"); n != 0 {
			t.Errorf("SetDefaultFanSpeed_v2 called %d times on a GPU stuck in a process read", n)
		}
		if !strings.Contains(r.logs.String(), `for the next start)" gpu=0 stuck="0 (process list)"`) {
			t.Errorf("no WARN naming the GPU:\n%s", r.logs)
		}
		if st, _, _ := runstate.Read(r.dir); len(st.FanGuard) != 1 {
			t.Errorf("run-state holds %+v, want GPU-a's fans", st.FanGuard)
		}
	})
}

// A GPU that did not answer at start is not touched by its guard until its
// static facts are read: no limits read, no setter, not even the previous
// run's hand-back (its UUID unknown). Once it answers, its guard hands back
// what the previous run held of it, then watches.
func TestFanGuardWaitsForAGPULateAtStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lib := fakeLib(2)
		d := lib.Devs[1]
		answer := d.Block("GetName", nil) // start-up gives up on GPU 1's static facts
		t.Cleanup(answer)
		hot(d, 80)
		r := newRigOn(t, lib, withFanGuard)
		if err := runstate.Write(r.dir, runstate.State{BootID: "b", Started: time.Now().Add(-time.Hour), PID: 1,
			FanGuard: []runstate.FanHold{{UUID: "GPU-b", Fans: []int{1}}}}); err != nil {
			t.Fatal(err)
		}
		var before map[string]int
		r.run(40*time.Second, func() {
			time.Sleep(3 * time.Second)
			before = d.Calls()
			answer()
		})
		for _, fn := range fanSetters {
			if before[fn] != 0 {
				t.Errorf("%s called %d times on a GPU whose facts were not known", fn, before[fn])
			}
		}
		if !strings.Contains(r.logs.String(), "its static facts are known now") {
			t.Fatalf("GPU 1 did not answer within the run:\n%s", r.logs)
		}
		if n := d.Count("SetDefaultFanSpeed_v2"); n < 1 || !strings.Contains(r.logs.String(), "previous run held these fans") {
			t.Errorf("SetDefaultFanSpeed_v2 called %d times; the previous run's fan 1 not handed back:\n%s", n, r.logs)
		}
	})
}
