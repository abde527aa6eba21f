package simnvml_test

import (
	"math"
	"os"
	"path/filepath"
	"strconv"
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
		simulate(t, opts{scenario: "gpus 1\ngpu 0 hang 1500ms fn fan_setters\n"}, func(c clock, l nvml.Interface) {
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
			if r != nvml.SUCCESS || took < 500*time.Millisecond {
				t.Fatalf("hung setter: %v after %v, want success after ~1.5 s", r, took)
			}
			got(d.GetFanSpeed_v2(0)).want(t, "fan after the hang", 80)
		})
	})
}

// The thermal model's defaults (csrc/fans.c), fitted to issue 1045's RTX PRO
// 6000 at 500 W: 73 C at 78 % fans, 95 C at the broken firmware's 53 %.
const (
	thAmbient = 25.0
	thG0      = 0.2086
	thGFan    = 0.1309
)

// steadyTemp is where the model's die settles at watts with the fans at pct.
func steadyTemp(watts, pct float64) float64 { return thAmbient + watts/(thG0+thGFan*pct) }

// crossing is when the model's die, from t0 C at time 0 with constant watts
// and fans at pct, first reads above limit: the model steps on a 100 ms grid.
func crossing(t0, watts, pct, tau, limit float64) time.Duration {
	ss, temp := steadyTemp(watts, pct), t0
	for k := 1; k < 1e6; k++ {
		temp = ss + (temp-ss)*math.Exp(-0.1/tau)
		if temp > limit {
			return time.Duration(k) * 100 * time.Millisecond
		}
	}
	panic("never crosses")
}

func TestThermalFigures(t *testing.T) {
	// What the defaults were fitted to (issue 1045).
	for _, c := range []struct {
		name      string
		pct, want float64
	}{
		{"guard's 78 %", 78, 73},
		{"broken firmware's 53 %", 53, 95},
	} {
		if got := steadyTemp(500, c.pct); math.Abs(got-c.want) > 0.5 {
			t.Errorf("%s: settles at %.1f C, want %.0f", c.name, got, c.want)
		}
	}
}

// brokenFan is the RTX PRO 6000 of issue 1045 at 500 W with the broken
// firmware fan controller, fast (tau) so a test need not wait long.
const brokenFan = `
gpus 2
gpu 0 thermal firmware broken 53 crash 90 for 20s tau %s
gpu 0 power 500
gpu 0 temp 38
`

// TestThermalCrash: nobody intervenes: the die climbs past 85 C with the
// fans at 53 %, and once it has been above 90 C for 20 s, Xid 62 and the GSP
// crash chain follow and the GPU is lost; the other GPU is unaffected.
func TestThermalCrash(t *testing.T) {
	t.Parallel()
	scn := strings.Replace(brokenFan, "%s", "0.5s", 1)
	crash := crossing(38, 500, 53, 0.5, 90) + 20*time.Second
	t.Run("events", func(t *testing.T) {
		// Start 1 s before the crash is due: the die has been above
		// 90 C for 19 s.
		offset := crash - time.Second
		simulate(t, opts{scenario: scn, env: []string{"SIMNVML_TIME_OFFSET=" + strconvSec(offset)}}, func(c clock, l nvml.Interface) {
			d0 := dev(t, l, 0)
			set, r := l.EventSetCreate()
			ok(t, r, "create")
			defer set.Free()
			ok(t, d0.RegisterEvents(nvml.EventTypeXidCriticalError, set), "register")
			temp, r := d0.GetTemperature(nvml.TEMPERATURE_GPU)
			ok(t, r, "temp")
			fan, _ := d0.GetFanSpeed_v2(0)
			target, _ := d0.GetTargetFanSpeed(1)
			if temp <= 90 || fan != 53 || target != 53 {
				t.Fatalf("before the crash: %d C, fan %d %%, target %d %%; want > 90 C at 53 %%", temp, fan, target)
			}
			e, r := set.Wait(3000)
			ok(t, r, "wait for Xid 62")
			at := offset + c.since()
			if e.EventData != 62 || at < crash-100*time.Millisecond || at > crash+time.Second {
				t.Fatalf("Xid %d at %v, want Xid 62 at %v (20 s above 90 C)", e.EventData, at, crash)
			}
			e, r = set.Wait(3000)
			ok(t, r, "wait for Xid 45")
			if e.EventData != 45 {
				t.Fatalf("then Xid %d, want 45", e.EventData)
			}
		})
	})
	t.Run("chain", func(t *testing.T) {
		// Start after the chain: its kernel log records are written at
		// once, stamped with their own times, and the GPU is lost.
		kmsg := filepath.Join(t.TempDir(), "kmsg")
		if !simulate(t, opts{scenario: scn, env: []string{"SIMNVML_KMSG=" + kmsg,
			"SIMNVML_TIME_OFFSET=" + strconvSec(crash+10*time.Second)}}, func(_ clock, l nvml.Interface) {
			wantRet(t, ret(l.DeviceGetHandleByIndex(0)), nvml.ERROR_GPU_IS_LOST, "crashed GPU")
			got(dev(t, l, 1).GetTemperature(nvml.TEMPERATURE_GPU)).want(t, "other GPU", 38)
			time.Sleep(400 * time.Millisecond) // the model's thread writes the records
		}) {
			return
		}
		recs := kmsgRecords(t, kmsg)
		var xids []string
		for _, r := range recs {
			_, rest, _ := strings.Cut(r.Message, "): ")
			xid, _, _ := strings.Cut(rest, ",")
			xids = append(xids, xid)
		}
		if strings.Join(xids, " ") != "62 45 119 154 79" {
			t.Fatalf("kernel log Xids %v, want the GSP crash chain 62 45 119 154 79:\n%+v", xids, recs)
		}
		for i, gap := range []time.Duration{time.Second, time.Second, time.Second, 2 * time.Second} {
			if d := recs[i+1].Time - recs[i].Time; d < gap-time.Millisecond || d > gap+time.Millisecond {
				t.Errorf("record %d %v after record %d, want %v", i+1, d, i, gap)
			}
		}
	})
}

// strconvSec is d in seconds, as SIMNVML_TIME_OFFSET takes it.
func strconvSec(d time.Duration) string { return strconv.FormatFloat(d.Seconds(), 'f', 3, 64) }

// TestThermalCommanded: fans commanded at 78 % hold the die near 73 C; a
// guard's curve (40 % at 60 C to 100 % at 85 C) settles it in the low-to-mid
// 70s; the firmware's target stays readable at 53 % throughout; handed back,
// the fans return to 53 % and the die climbs again. The firmware's own
// (healthy) curve also keeps it in the 70s.
func TestThermalCommanded(t *testing.T) {
	t.Parallel()
	simulate(t, opts{scenario: `
gpus 3
gpu 0-1 thermal firmware broken 53 crash 90 for 20s tau 0.25s
gpu 2 thermal tau 0.25s
gpu all power 500
`}, func(c clock, l nvml.Interface) {
		d0, d1, d2 := dev(t, l, 0), dev(t, l, 1), dev(t, l, 2)
		for fan := 0; fan < 2; fan++ {
			ok(t, d0.SetFanSpeed_v2(fan, 78), "command 78 %")
		}
		temp := func(d nvml.Device) float64 {
			v, r := d.GetTemperature(nvml.TEMPERATURE_GPU)
			ok(t, r, "temp")
			return float64(v)
		}
		// GPU 1: the guard's curve, changed at most every 50 ms.
		for end := time.Now().Add(2500 * time.Millisecond); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
			pct := int(math.Round(min(100, max(40, 40+(temp(d1)-60)*60/25))))
			for fan := 0; fan < 2; fan++ {
				ok(t, d1.SetFanSpeed_v2(fan, pct), "curve")
			}
		}
		if v := temp(d0); math.Abs(v-73) > 1 {
			t.Errorf("at 78 %% fans the die reads %v C, want 73", v)
		}
		got(d0.GetFanSpeed_v2(1)).want(t, "commanded fan", 78)
		got(d0.GetTargetFanSpeed(1)).want(t, "firmware target while commanded", 53)
		if v := temp(d1); v < 72 || v > 77 {
			t.Errorf("on the guard's curve the die reads %v C, want the low-to-mid 70s", v)
		}
		if v := temp(d2); v < 70 || v > 77 {
			t.Errorf("on the firmware's own curve the die reads %v C, want the 70s", v)
		}

		for fan := 0; fan < 2; fan++ {
			ok(t, d0.SetDefaultFanSpeed_v2(fan), "hand back")
		}
		got(d0.GetFanSpeed_v2(0)).want(t, "handed-back fan", 53)
		got(d0.GetFanControlPolicy_v2(0)).want(t, "handed-back policy", nvml.FAN_POLICY_TEMPERATURE_CONTINOUS_SW)
		time.Sleep(1500 * time.Millisecond)
		if v := temp(d0); v < 90 {
			t.Errorf("handed back to the broken firmware the die reads %v C, want above 90", v)
		}
	})
}

// TestThermalCommandPreventsCrash: of two GPUs under the same load with the
// broken firmware (a crash rule of 1 s, to keep the test short), the one
// whose fans are commanded to 78 % never crashes; the other does.
func TestThermalCommandPreventsCrash(t *testing.T) {
	t.Parallel()
	simulate(t, opts{scenario: `
gpus 2
gpu all thermal firmware broken 53 crash 90 for 1s tau 0.2s
gpu all power 500
`}, func(c clock, l nvml.Interface) {
		d0, d1 := dev(t, l, 0), dev(t, l, 1)
		set, r := l.EventSetCreate()
		ok(t, r, "create")
		defer set.Free()
		for _, d := range []nvml.Device{d0, d1} {
			ok(t, d.RegisterEvents(nvml.EventTypeXidCriticalError, set), "register")
		}
		for fan := 0; fan < 2; fan++ {
			ok(t, d0.SetFanSpeed_v2(fan, 78), "command 78 %")
		}
		uuid1, _ := d1.GetUUID()
		e, r := set.Wait(5000)
		ok(t, r, "wait for the crash")
		if u, _ := e.Device.GetUUID(); u != uuid1 || e.EventData != 62 {
			t.Fatalf("Xid %d on %s, want Xid 62 on the uncommanded GPU %s", e.EventData, u, uuid1)
		}
		for {
			e, r := set.Wait(1500)
			if r == nvml.ERROR_TIMEOUT {
				break
			}
			ok(t, r, "wait")
			if u, _ := e.Device.GetUUID(); u != uuid1 {
				t.Fatalf("Xid %d on the commanded GPU", e.EventData)
			}
		}
		if v, r := d0.GetTemperature(nvml.TEMPERATURE_GPU); r != nvml.SUCCESS || v > 75 {
			t.Fatalf("commanded GPU: %d C (%v), want about 73", v, r)
		}
	})
}
