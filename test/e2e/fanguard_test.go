package e2e

import (
	"bufio"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The fan guard (--fan-guard, docs/fan-guard.md) on the simulated driver:
// its fan setters are counted (SIMNVML_CALLS) and logged with their
// arguments (SIMNVML_SETLOG).

// setCall is one line of the simulated driver's setter log.
type setCall struct {
	at         float64 // scenario seconds
	gpu        int
	fn         string // nvmlDeviceSetFanSpeed_v2, nvmlDeviceSetDefaultFanSpeed_v2, ...
	fan, speed int    // speed -1: none
	ret        int
}

// setLog reads the setter log at path ("SECONDS gpu I FUNCTION fan F
// [speed S|policy P] ret CODE"); none yet is an empty log.
func setLog(t *testing.T, path string) []setCall {
	t.Helper()
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []setCall
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) < 6 {
			continue
		}
		c := setCall{fn: fs[3], speed: -1}
		c.at, _ = strconv.ParseFloat(fs[0], 64)
		c.gpu, _ = strconv.Atoi(fs[2])
		for i := 4; i+1 < len(fs); i += 2 {
			n, _ := strconv.Atoi(fs[i+1])
			switch fs[i] {
			case "fan":
				c.fan = n
			case "speed":
				c.speed = n
			case "ret":
				c.ret = n
			}
		}
		out = append(out, c)
	}
	return out
}

// guardRun starts the logger on scenario with the guard's flags and a
// setter log; it returns the process and the setter log's path.
func guardRun(t *testing.T, o opts) (*proc, string) {
	t.Helper()
	if o.dir == "" {
		o.dir = t.TempDir()
	}
	log := filepath.Join(t.TempDir(), "setlog")
	o.env = append(o.env, "SIMNVML_SETLOG="+log)
	return start(t, o), log
}

// count returns the calls of fn (and fan, when >= 0) in log.
func count(log []setCall, fn string, fan int) int {
	n := 0
	for _, c := range log {
		if c.fn == fn && (fan < 0 || c.fan == fan) {
			n++
		}
	}
	return n
}

const (
	setSpeed   = "nvmlDeviceSetFanSpeed_v2"
	setDefault = "nvmlDeviceSetDefaultFanSpeed_v2"
)

// A GPU at 60 C, then heating from 2 s to 84 C over 8 s, its firmware
// holding the fans at 53 % (the broken controller of issue 1045).
const heating = `gpus 1
gpu all temp 60
gpu all fan 53
gpu all fan_target 53
gpu all power 500
at 2 gpu 0 ramp temp 66 84 8
`

// Without --fan-guard no fan setter is called, however hot the GPU runs.
func TestFanGuardOffTouchesNoFan(t *testing.T) {
	t.Parallel()
	p, log := guardRun(t, opts{scenario: "gpus 2\ngpu all temp 92\ngpu all fan 40\ngpu all fan_target 40\n"})
	p.waitForRows(1, 30, 20*time.Second)
	p.stop()
	calls := readCalls(t, p.calls)
	for _, fn := range []string{setSpeed, setDefault, "nvmlDeviceSetFanControlPolicy", "nvmlDeviceGetMinMaxFanSpeed"} {
		if calls[fn] != 0 {
			t.Errorf("%s called %d times without --fan-guard", fn, calls[fn])
		}
	}
	if l := setLog(t, log); len(l) != 0 {
		t.Errorf("setter log without --fan-guard: %+v", l)
	}
}

// The guard takes the fans at the engage temperature, follows the curve
// never below the firmware's target or the GPU's minimum and at most once
// a second per fan, flags the rows, and hands every fan back on SIGTERM.
func TestFanGuardEngagesAndHandsBackOnSIGTERM(t *testing.T) {
	t.Parallel()
	p, log := guardRun(t, opts{scenario: heating, args: []string{"--fan-guard"}})
	p.waitForEvent("the guard taking the fans", 30*time.Second, "type=FAN_GUARD kind=engaged fan=0", "type=FAN_GUARD kind=engaged fan=1")
	p.waitFor("a few changes", 30*time.Second, func() bool { return count(setLog(t, log), setSpeed, 0) >= 4 })
	p.stop()
	calls := setLog(t, log)
	last := map[int]float64{}
	for i, c := range calls {
		if c.ret != 0 {
			t.Errorf("call %d refused: %+v", i, c)
		}
		if c.fn != setSpeed {
			continue
		}
		if c.at < 2 {
			t.Errorf("fans taken at %.2f s, before the die reached 70 C", c.at)
		}
		if c.speed < 53 || c.speed > 100 {
			t.Errorf("fan %d commanded %d %%: below the firmware's 53 %% or above 100", c.fan, c.speed)
		}
		if prev, ok := last[c.fan]; ok && c.at-prev < 0.9 {
			t.Errorf("fan %d changed %.2f s after its previous change", c.fan, c.at-prev)
		}
		last[c.fan] = c.at
	}
	n := len(calls)
	if n < 2 || calls[n-2].fn != setDefault || calls[n-1].fn != setDefault || calls[n-2].fan+calls[n-1].fan != 1 {
		t.Errorf("the last calls are not SetDefaultFanSpeed_v2 on fans 0 and 1: %+v", calls[max(0, n-3):])
	}
	ev := events(p.dir)
	if !strings.Contains(ev, "kind=released fan=0") || !strings.Contains(ev, "reason=shutdown") {
		t.Errorf("events.log lacks the hand-back:\n%s", ev)
	}
	tb := readCSV(t, p.csvFile(0))
	flagged := 0
	for _, r := range tb.rows {
		if strings.Contains(tb.get(r, "flags"), "FAN_GUARD(") {
			flagged++
		}
	}
	if flagged == 0 {
		t.Error("no row carries FAN_GUARD")
	}
	if strings.Contains(p.stderr.String(), "fan guard: the previous run held") {
		t.Error("a first run restores fans")
	}
}

// Below the engage temperature, a fan inversion (hot, fans slow) takes the
// fans too.
func TestFanGuardEngagesOnInversion(t *testing.T) {
	t.Parallel()
	p, log := guardRun(t, opts{scenario: "gpus 1\ngpu all temp 86\ngpu all fan 40\ngpu all fan_target 40\n",
		args: []string{"--fan-guard", "--fan-guard-engage", "95", "--fan-guard-release", "80"}})
	p.waitForEvent("the guard taking the fans on the inversion", 30*time.Second, "kind=engaged fan=0", "reason=\"fan inversion\"")
	p.stop()
	if count(setLog(t, log), setSpeed, -1) < 2 {
		t.Errorf("setter log: %+v", setLog(t, log))
	}
}

// Once the die has stayed below the release temperature for 60 s the
// fans go back to the firmware.
func TestFanGuardHandsBackAfterTheReleaseDelay(t *testing.T) {
	t.Parallel()
	p, log := guardRun(t, opts{scenario: "gpus 1\ngpu all temp 75\ngpu all fan 53\ngpu all fan_target 53\nat 3 gpu 0 temp 60\n",
		args: []string{"--fan-guard"}})
	p.waitForEvent("the hand-back", 90*time.Second, "kind=released fan=1", "reason=cooled")
	calls := setLog(t, log)
	p.stop()
	var took, back float64
	for _, c := range calls {
		switch {
		case c.fn == setSpeed && took == 0:
			took = c.at
		case c.fn == setDefault && back == 0:
			back = c.at
		}
	}
	if back-3 < 59.5 || back-3 > 65 {
		t.Errorf("taken at %.1f s, cooled at 3 s, handed back at %.1f s: want 60 s after cooling", took, back)
	}
}

// Killed while holding the fans, the logger cannot hand them back; the
// next start does, first, and says so. `fan-guard release` does the same
// without a logger.
func TestFanGuardRestoresAfterSIGKILL(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	hot := "gpus 1\ngpu all temp 75\ngpu all fan 53\ngpu all fan_target 53\n"
	p, log := guardRun(t, opts{scenario: hot, dir: dir, args: []string{"--fan-guard"}})
	p.waitFor("the fans taken", 30*time.Second, func() bool { return count(setLog(t, log), setSpeed, -1) >= 2 })
	p.signal(syscall.SIGKILL)
	p.wait(10 * time.Second)
	if n := count(setLog(t, log), setDefault, -1); n != 0 {
		t.Fatalf("%d hand-backs by a killed logger", n)
	}
	if rs := readFile(t, filepath.Join(dir, "run-state")); !strings.Contains(rs, "fan_guard=") {
		t.Fatalf("run-state does not name the fans held:\n%s", rs)
	}

	// The release command, as the unit's ExecStopPost= runs it.
	rel := filepath.Join(t.TempDir(), "setlog")
	env := append(os.Environ(), "SIMNVML_SETLOG="+rel)
	for _, kv := range p.cmd.Env {
		if strings.HasPrefix(kv, "LD_LIBRARY_PATH=") || strings.HasPrefix(kv, "SIMNVML_SCENARIO=") {
			env = append(env, kv)
		}
	}
	code, out, errOut := runTool(t, env, "fan-guard", "release", "--log-dir", dir)
	if code != 0 || count(setLog(t, rel), setDefault, -1) != 2 || !strings.Contains(out, "fan 1: handed back") {
		t.Errorf("fan-guard release: exit %d, calls %+v\n%s%s", code, setLog(t, rel), out, errOut)
	}
	// It cleared run-state: the next start has nothing to restore...
	if rs := readFile(t, filepath.Join(dir, "run-state")); strings.Contains(rs, "fan_guard=") {
		t.Errorf("run-state after the release:\n%s", rs)
	}
	// ...but a killed run whose fans nobody released is restored at start.
	p2, log2 := guardRun(t, opts{scenario: hot, dir: dir, args: []string{"--fan-guard"}})
	p2.waitFor("the fans taken", 30*time.Second, func() bool { return count(setLog(t, log2), setSpeed, -1) >= 2 })
	p2.signal(syscall.SIGKILL)
	p2.wait(10 * time.Second)
	p3, log3 := guardRun(t, opts{scenario: "gpus 1\ngpu all temp 50\n", dir: dir, args: []string{"--fan-guard"}})
	p3.waitFor("the previous run's fans handed back", 30*time.Second, func() bool { return count(setLog(t, log3), setDefault, -1) >= 2 })
	p3.waitFor("the line that says so", 10*time.Second, func() bool {
		return strings.Contains(p3.stderr.String(), "previous run held these fans")
	})
	p3.stop()
	if c := setLog(t, log3); c[0].fn != setDefault || count(c, setSpeed, -1) != 0 {
		t.Errorf("restart's setter calls: %+v", c)
	}
}

// A fanless GPU: one line says so, and no fan call is made.
func TestFanGuardLeavesFanlessGPUs(t *testing.T) {
	t.Parallel()
	p, log := guardRun(t, opts{scenario: "@fanless", args: []string{"--fan-guard"}})
	p.waitForRows(0, 30, 20*time.Second)
	p.stop()
	if n := strings.Count(p.stderr.String(), "this GPU has no fans"); n != 1 {
		t.Errorf("%d lines say the GPU has no fans, want 1", n)
	}
	calls := readCalls(t, p.calls)
	for _, fn := range []string{setSpeed, setDefault, "nvmlDeviceGetMinMaxFanSpeed"} {
		if calls[fn] != 0 {
			t.Errorf("%s called %d times on a fanless GPU", fn, calls[fn])
		}
	}
	if l := setLog(t, log); len(l) != 0 {
		t.Errorf("setter log: %+v", l)
	}
}

// Refused (not root; an old driver without the setters): one WARN per GPU
// with the reason, counted, and the GPU keeps being recorded.
func TestFanGuardRefusedKeepsRecording(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		o      opts
		reason string
	}{
		{"not root", opts{scenario: "gpus 2\nuser nonroot\ngpu all temp 80\n"}, "reason=\"nvmlDeviceSetFanSpeed_v2: Insufficient Permissions\""},
		{"old driver", opts{scenario: "gpus 2\ngpu all temp 80\n", oldLib: true}, "the driver lacks"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.o.args = []string{"--fan-guard"}
			p, _ := guardRun(t, tc.o)
			p.waitForRows(1, 40, 30*time.Second)
			p.signal(syscall.SIGUSR1)
			p.waitFor("the status line", 10*time.Second, func() bool { return strings.Contains(p.stderr.String(), "msg=status") })
			p.stop()
			errs := p.stderr.String()
			if n := strings.Count(errs, "refuses fan control"); n != 2 || !strings.Contains(errs, tc.reason) {
				t.Errorf("%d refusal lines (want one per GPU, with %q)", n, tc.reason)
			}
			if !strings.Contains(errs, "fan_guard_refusals=2") {
				t.Error("the status line does not count 2 refusals")
			}
			tb := readCSV(t, p.csvFile(1))
			for _, r := range tb.rows {
				if strings.Contains(tb.get(r, "flags"), "FAN_GUARD") {
					t.Fatalf("a refused guard flagged a row: %v", r)
				}
			}
		})
	}
}

// A setter stuck in the driver never stalls sampling: the rows keep their
// cadence, the hang is logged once and counted, the GPU's fans are not
// touched again, and SIGTERM still ends the logger promptly.
func TestFanGuardSetterHangDoesNotStallSampling(t *testing.T) {
	t.Parallel()
	p, _ := guardRun(t, opts{scenario: "gpus 1\ngpu all temp 80\ngpu 0 hang 60s fn fan_setters\n", args: []string{"--fan-guard"}})
	p.waitFor("the hang reported", 30*time.Second, func() bool { return strings.Contains(p.stderr.String(), "fan setter is stuck in the driver") })
	before := rowCount(p.csvFile(0))
	time.Sleep(3 * time.Second)
	if got := rowCount(p.csvFile(0)) - before; got < 25 {
		t.Errorf("%d rows in 3 s while a fan setter hung, want about 30", got)
	}
	p.signal(syscall.SIGUSR1)
	p.waitFor("the status line", 10*time.Second, func() bool { return strings.Contains(p.stderr.String(), "fan_guard_hangs=1") })
	start := time.Now()
	p.signal(syscall.SIGTERM)
	p.wait(15 * time.Second)
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("stopping took %v with a fan setter stuck", d)
	}
	if n := strings.Count(p.stderr.String(), "fan setter is stuck in the driver"); n != 1 {
		t.Errorf("the hang logged %d times, want once", n)
	}
	if !strings.Contains(events(p.dir), "type=FAN_GUARD kind=hung") {
		t.Error("events.log has no kind=hung line")
	}
}

// Issue 1045 on the thermal model (rtxpro6000-broken-fan-500w.scn): the
// firmware holds the fans at 53 % under 500 W, and without the guard the die
// passes 85 C (an inversion) at ~31 s and crashes (Xid 62) at ~62 s. With
// --fan-guard the die settles in the 70s: no inversion, no Xid.
func TestFanGuardPreventsTheCrashOnTheThermalModel(t *testing.T) {
	t.Parallel()
	p, _ := guardRun(t, opts{scenario: "@rtxpro6000-broken-fan-500w", args: []string{"--fan-guard"}})
	p.waitForRows(0, 750, 120*time.Second) // 75 s: past the crash's time
	p.stop()
	tb := readCSV(t, p.csvFile(0))
	peak := 0
	for _, r := range tb.rows {
		if v, err := strconv.Atoi(tb.get(r, "gpu_temp")); err == nil {
			peak = max(peak, v)
		}
		if f := tb.get(r, "flags"); strings.Contains(f, "TEMP_FAN_INV") || strings.Contains(f, "XID") || strings.Contains(f, "GPU_LOST") {
			t.Fatalf("row %v: the guard did not prevent %s", r[0], f)
		}
	}
	if peak < 65 || peak > 80 {
		t.Errorf("peak die temperature %d C with the guard, want the low-to-mid 70s", peak)
	}
	if ev := events(p.dir); strings.Contains(ev, "type=Xid") || !strings.Contains(ev, "kind=engaged") {
		t.Errorf("events.log:\n%s", ev)
	}
	t.Logf("peak %d C with the fan guard", peak)
}

// Where the curve asks for less than the floors, the floors bind: GPU 0's
// firmware wants 80 % at 72 C (the curve: 68 %), GPU 1's fans accept no
// less than 75 % (fan_min; the curve 68 %, the firmware 40 %). No speed
// commanded is below either floor, and each floor is what is commanded.
func TestFanGuardNeverBelowTheFloors(t *testing.T) {
	t.Parallel()
	p, log := guardRun(t, opts{scenario: "gpus 2\ngpu all temp 72\ngpu 0 fan 80\ngpu 0 fan_target 80\ngpu 1 fan 40\ngpu 1 fan_target 40\ngpu 1 fan_min 75\n",
		args: []string{"--fan-guard"}})
	p.waitFor("both GPUs' fans taken", 30*time.Second, func() bool {
		n := map[int]int{}
		for _, c := range setLog(t, log) {
			if c.fn == setSpeed {
				n[c.gpu]++
			}
		}
		return n[0] >= 2 && n[1] >= 2
	})
	p.stop()
	floor := map[int]int{0: 80, 1: 75}
	at := map[int]int{}
	for _, c := range setLog(t, log) {
		if c.fn != setSpeed {
			continue
		}
		if c.ret != 0 || c.speed < floor[c.gpu] {
			t.Errorf("GPU %d fan %d commanded %d %% (ret %d): below its floor %d %%", c.gpu, c.fan, c.speed, c.ret, floor[c.gpu])
		}
		if c.speed == floor[c.gpu] {
			at[c.gpu]++
		}
	}
	if at[0] < 2 || at[1] < 2 {
		t.Errorf("fans commanded at the floor: GPU 0 %d, GPU 1 %d; want both fans of each (the curve's 68 %% is below)\n%+v", at[0], at[1], setLog(t, log))
	}
}
