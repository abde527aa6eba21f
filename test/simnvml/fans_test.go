package simnvml_test

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// setlogLines reads the setter log the simulator wrote at path, without the
// leading time: "gpu 0 nvmlDeviceSetFanSpeed_v2 fan 1 speed 78 ret 0".
func setlogLines(t *testing.T, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, line := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
		_, rest, ok := strings.Cut(line, " ")
		if !ok || !strings.HasPrefix(rest, "gpu ") {
			t.Fatalf("bad setter log line %q", line)
		}
		out = append(out, rest)
	}
	return out
}

// TestFanSetters: a command moves the fan and makes its policy manual while
// the firmware's target stays readable; the default hands the fan back;
// arguments are checked as NVML documents them; a fanless GPU supports no
// fan call; every call is counted and logged.
func TestFanSetters(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	setlog, calls := filepath.Join(dir, "setlog"), filepath.Join(dir, "calls")
	if !simulate(t, opts{env: []string{"SIMNVML_SETLOG=" + setlog, "SIMNVML_CALLS=" + calls}, scenario: `
gpus 3
gpu 0 fan 40
gpu 0 fan_target 53
gpu 1 fans 0
gpu 2 fan_min 20
gpu 2 fan_max 90
`}, func(_ clock, l nvml.Interface) {
		d0, d1, d2 := dev(t, l, 0), dev(t, l, 1), dev(t, l, 2)
		if mn, mx, r := d0.GetMinMaxFanSpeed(); r != nvml.SUCCESS || mn != 30 || mx != 100 {
			t.Fatalf("min/max %d %d %v, want 30 100", mn, mx, r)
		}
		if mn, mx, r := d2.GetMinMaxFanSpeed(); r != nvml.SUCCESS || mn != 20 || mx != 90 {
			t.Fatalf("gpu 2 min/max %d %d %v, want 20 90", mn, mx, r)
		}

		ok(t, d0.SetFanSpeed_v2(1, 78), "set fan 1")
		got(d0.GetFanSpeed_v2(1)).want(t, "commanded fan 1", 78)
		got(d0.GetTargetFanSpeed(1)).want(t, "firmware target of commanded fan 1", 53)
		got(d0.GetFanControlPolicy_v2(1)).want(t, "commanded fan 1 policy", nvml.FAN_POLICY_MANUAL)
		got(d0.GetFanSpeed_v2(0)).want(t, "fan 0 untouched", 40)
		got(d0.GetFanControlPolicy_v2(0)).want(t, "fan 0 policy", nvml.FAN_POLICY_TEMPERATURE_CONTINOUS_SW)

		for _, c := range []struct {
			name       string
			d          nvml.Device
			fan, speed int
			want       nvml.Return
		}{
			{"fan past count", d0, 2, 78, nvml.ERROR_INVALID_ARGUMENT},
			{"over 100", d0, 0, 101, nvml.ERROR_INVALID_ARGUMENT},
			{"under min", d0, 0, 29, nvml.ERROR_INVALID_ARGUMENT},
			{"over max", d2, 0, 91, nvml.ERROR_INVALID_ARGUMENT},
			{"at min", d2, 0, 20, nvml.SUCCESS},
			{"fanless", d1, 0, 50, nvml.ERROR_NOT_SUPPORTED},
		} {
			wantRet(t, c.d.SetFanSpeed_v2(c.fan, c.speed), c.want, "SetFanSpeed_v2 "+c.name)
		}
		got(d0.GetFanSpeed_v2(0)).want(t, "fan 0 after refused commands", 40)
		wantRet(t, d1.SetDefaultFanSpeed_v2(0), nvml.ERROR_NOT_SUPPORTED, "fanless default")
		wantRet(t, d1.SetFanControlPolicy(0, nvml.FAN_POLICY_MANUAL), nvml.ERROR_NOT_SUPPORTED, "fanless policy")
		if _, _, r := d1.GetMinMaxFanSpeed(); r != nvml.ERROR_NOT_SUPPORTED {
			t.Fatalf("fanless min/max: %v, want NOT_SUPPORTED", r)
		}
		wantRet(t, d0.SetDefaultFanSpeed_v2(2), nvml.ERROR_INVALID_ARGUMENT, "default past count")
		wantRet(t, d0.SetFanControlPolicy(0, 7), nvml.ERROR_INVALID_ARGUMENT, "unknown policy")

		// Manual without a command holds the fan where it runs.
		ok(t, d0.SetFanControlPolicy(0, nvml.FAN_POLICY_MANUAL), "manual fan 0")
		got(d0.GetFanControlPolicy_v2(0)).want(t, "fan 0 manual", nvml.FAN_POLICY_MANUAL)
		got(d0.GetFanSpeed_v2(0)).want(t, "fan 0 held", 40)
		ok(t, d0.SetFanControlPolicy(0, nvml.FAN_POLICY_TEMPERATURE_CONTINOUS_SW), "auto fan 0")
		got(d0.GetFanControlPolicy_v2(0)).want(t, "fan 0 auto", nvml.FAN_POLICY_TEMPERATURE_CONTINOUS_SW)

		ok(t, d0.SetDefaultFanSpeed_v2(1), "default fan 1")
		got(d0.GetFanSpeed_v2(1)).want(t, "fan 1 handed back", 40)
		got(d0.GetFanControlPolicy_v2(1)).want(t, "fan 1 policy handed back", nvml.FAN_POLICY_TEMPERATURE_CONTINOUS_SW)
		ok(t, d0.SetDefaultFanSpeed_v2(0), "default of a fan the firmware has")
	}) {
		return
	}
	want := []string{
		"gpu 0 nvmlDeviceSetFanSpeed_v2 fan 1 speed 78 ret 0",
		"gpu 0 nvmlDeviceSetFanSpeed_v2 fan 2 speed 78 ret 2",
		"gpu 0 nvmlDeviceSetFanSpeed_v2 fan 0 speed 101 ret 2",
		"gpu 0 nvmlDeviceSetFanSpeed_v2 fan 0 speed 29 ret 2",
		"gpu 2 nvmlDeviceSetFanSpeed_v2 fan 0 speed 91 ret 2",
		"gpu 2 nvmlDeviceSetFanSpeed_v2 fan 0 speed 20 ret 0",
		"gpu 1 nvmlDeviceSetFanSpeed_v2 fan 0 speed 50 ret 3",
		"gpu 1 nvmlDeviceSetDefaultFanSpeed_v2 fan 0 ret 3",
		"gpu 1 nvmlDeviceSetFanControlPolicy fan 0 policy 1 ret 3",
		"gpu 0 nvmlDeviceSetDefaultFanSpeed_v2 fan 2 ret 2",
		"gpu 0 nvmlDeviceSetFanControlPolicy fan 0 policy 7 ret 2",
		"gpu 0 nvmlDeviceSetFanControlPolicy fan 0 policy 1 ret 0",
		"gpu 0 nvmlDeviceSetFanControlPolicy fan 0 policy 0 ret 0",
		"gpu 0 nvmlDeviceSetDefaultFanSpeed_v2 fan 1 ret 0",
		"gpu 0 nvmlDeviceSetDefaultFanSpeed_v2 fan 0 ret 0",
	}
	if lines := setlogLines(t, setlog); strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Fatalf("setter log:\n%s\nwant:\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
	data, err := os.ReadFile(calls)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"nvmlDeviceSetFanSpeed_v2 7\n", "nvmlDeviceSetDefaultFanSpeed_v2 4\n",
		"nvmlDeviceSetFanControlPolicy 4\n", "nvmlDeviceGetMinMaxFanSpeed 3\n"} {
		if !strings.Contains(string(data), w) {
			t.Errorf("calls file lacks %q:\n%s", w, data)
		}
	}
}

// TestFanSettersRefused: a scenario makes the setters refuse (not root, an
// injected failure) or hang, reusing the hang and fail rules; getters keep
// answering and the fans stay with the firmware.
func TestFanSettersRefused(t *testing.T) {
	t.Parallel()
	t.Run("nonroot", func(t *testing.T) {
		simulate(t, opts{scenario: "gpus 1\nuser nonroot\n"}, func(_ clock, l nvml.Interface) {
			d := dev(t, l, 0)
			wantRet(t, d.SetFanSpeed_v2(0, 80), nvml.ERROR_NO_PERMISSION, "set as non-root")
			wantRet(t, d.SetDefaultFanSpeed_v2(0), nvml.ERROR_NO_PERMISSION, "default as non-root")
			wantRet(t, d.SetFanControlPolicy(0, nvml.FAN_POLICY_MANUAL), nvml.ERROR_NO_PERMISSION, "policy as non-root")
			got(d.GetFanSpeed_v2(0)).want(t, "fan stays with the firmware", 30)
			if mn, mx, r := d.GetMinMaxFanSpeed(); r != nvml.SUCCESS || mn != 30 || mx != 100 {
				t.Fatalf("min/max as non-root %d %d %v", mn, mx, r)
			}
		})
	})
	t.Run("fail", func(t *testing.T) {
		simulate(t, opts{scenario: "gpus 2\ngpu 0 fail fan_setters not_supported\n"}, func(_ clock, l nvml.Interface) {
			d0, d1 := dev(t, l, 0), dev(t, l, 1)
			wantRet(t, d0.SetFanSpeed_v2(0, 80), nvml.ERROR_NOT_SUPPORTED, "set refused")
			wantRet(t, d0.SetDefaultFanSpeed_v2(0), nvml.ERROR_NOT_SUPPORTED, "default refused")
			wantRet(t, d0.SetFanControlPolicy(0, nvml.FAN_POLICY_MANUAL), nvml.ERROR_NOT_SUPPORTED, "policy refused")
			got(d0.GetFanSpeed_v2(0)).want(t, "getter still answers", 30)
			ok(t, d1.SetFanSpeed_v2(0, 80), "other GPU")
		})
	})
	t.Run("hang", func(t *testing.T) {
		simulate(t, opts{scenario: "gpus 1\ngpu 0 hang 700ms fn fan_setters\n"}, func(c clock, l nvml.Interface) {
			d := dev(t, l, 0)
			var wg sync.WaitGroup
			var took time.Duration
			var r nvml.Return
			wg.Add(1)
			go func() {
				defer wg.Done()
				t0 := time.Now()
				r = d.SetFanSpeed_v2(0, 80)
				took = time.Since(t0)
			}()
			time.Sleep(100 * time.Millisecond)
			t0 := time.Now()
			got(d.GetFanSpeed_v2(0)).want(t, "fan while the setter hangs", 30)
			if el := time.Since(t0); el > 300*time.Millisecond {
				t.Fatalf("getter took %v while a setter hung", el)
			}
			wg.Wait()
			if r != nvml.SUCCESS || took < 400*time.Millisecond {
				t.Fatalf("hung setter: %v after %v, want success after ~0.7 s", r, took)
			}
			got(d.GetFanSpeed_v2(0)).want(t, "fan after the hang", 80)
		})
	})
}
