package simnvml_test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// The cost profile's latency is a real wait and the driver lock really
// serializes: both are checked as lower bounds (a slower machine only makes
// the calls take longer), never as upper ones. The sim wakes up to the
// sleep's average overshoot early (learnt, at most half the latency), so the
// bounds allow 10 % below the nominal figure.
const slack = 0.9

// costLine reads one function's line of the calls file: count, wall ns, cpu ns.
func costLine(t *testing.T, path, fn string) (n, wall, cpu int64) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) >= 1 && f[0] == fn {
			if len(f) != 4 {
				t.Fatalf("calls file line %q: want name count wall_ns cpu_ns", l)
			}
			n, _ = strconv.ParseInt(f[1], 10, 64)
			wall, _ = strconv.ParseInt(f[2], 10, 64)
			cpu, _ = strconv.ParseInt(f[3], 10, 64)
			return
		}
	}
	t.Fatalf("no %s in calls file:\n%s", fn, b)
	return
}

func TestCostLatencyAndLock(t *testing.T) {
	const per = 2 * time.Millisecond
	if child(t) {
		l := openLib(t)
		calls := os.Getenv("SIMNVML_CALLS")
		locked := os.Getenv(envWant) == "lock"
		d0, d1 := dev(t, l, 0), dev(t, l, 1)
		// Free: not in the profile.
		t0 := time.Now()
		for i := 0; i < 20; i++ {
			d0.GetPowerUsage()
		}
		free := time.Since(t0)
		// Two GPUs read from two threads at once, 10 calls each.
		t0 = time.Now()
		var wg sync.WaitGroup
		for _, d := range []nvml.Device{d0, d1} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < 10; i++ {
					if _, r := d.GetTemperature(nvml.TEMPERATURE_GPU); r != nvml.SUCCESS {
						t.Errorf("temp: %v", r)
					}
				}
			}()
		}
		wg.Wait()
		both := time.Since(t0)
		t.Logf("free %v, 2 x 10 calls of %v: %v (lock %v)", free, per, both, locked)
		if both < time.Duration(float64(10*per)*slack) {
			t.Fatalf("10 calls of %v each took %v: the latency is not a real wait", per, both)
		}
		if locked && both < time.Duration(float64(20*per)*slack) {
			t.Fatalf("with the driver lock, 2 x 10 calls of %v took %v: not serialized", per, both)
		}
		ok(t, l.Shutdown(), "shutdown") // writes the calls file
		n, wall, _ := costLine(t, calls, "nvmlDeviceGetTemperature")
		if n != 20 || time.Duration(wall) < time.Duration(float64(20*per)*slack) {
			t.Fatalf("calls file: %d calls, %v inside; want 20 and >= %v", n, time.Duration(wall), 20*per)
		}
		if n, wall, _ := costLine(t, calls, "nvmlDeviceGetPowerUsage"); n != 20 || wall != 0 {
			t.Fatalf("free function: %d calls, %d ns inside", n, wall)
		}
		l.Init()
		return
	}
	t.Parallel()
	for _, tc := range []struct{ name, scn, env string }{
		{"scenario", "gpus 2\ncost nvmlDeviceGetTemperature 2ms\n", ""},
		{"scenario-lock", "gpus 2\ncost DeviceGetTemperature 2ms jitter 0us\ncost lock on\n", "lock"},
		{"env-lock", "gpus 2\n", "lock"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			env := []string{envWant + "=" + tc.env, "SIMNVML_CALLS=" + filepath.Join(t.TempDir(), "calls")}
			if tc.name == "env-lock" {
				env = append(env, "SIMNVML_COST=DeviceGetTemperature 2ms; lock on; lock * off; lock DeviceGetTemperature on")
			}
			runChildAs(t, "TestCostLatencyAndLock", opts{scenario: tc.scn, env: env})
		})
	}
}

// TestCostProfiles: the named profiles load, cost what the README says on
// average (checked from below only), and the pessimistic one serializes.
func TestCostProfiles(t *testing.T) {
	if child(t) {
		l := openLib(t)
		d := dev(t, l, 0)
		const n = 40
		t0 := time.Now()
		for i := 0; i < n; i++ {
			d.GetPowerUsage()
		}
		el := time.Since(t0)
		min := map[string]time.Duration{"realistic": 370 * time.Microsecond, "pessimistic": 740 * time.Microsecond}[os.Getenv(envWant)]
		t.Logf("%s: %v per GetPowerUsage", os.Getenv(envWant), el/n)
		if el < time.Duration(float64(n*min)*slack) {
			t.Fatalf("%d calls took %v, want >= %v each", n, el, min)
		}
		return
	}
	t.Parallel()
	for _, p := range []string{"realistic", "pessimistic"} {
		t.Run(p, func(t *testing.T) {
			t.Parallel()
			runChildAs(t, "TestCostProfiles", opts{scenario: "gpus 1\ncost profile " + p + "\n", env: []string{envWant + "=" + p}})
		})
		t.Run(p+"-env", func(t *testing.T) {
			t.Parallel()
			runChildAs(t, "TestCostProfiles", opts{env: []string{envWant + "=" + p, "SIMNVML_COST=" + p}})
		})
	}
}

func TestCostErrors(t *testing.T) {
	if child(t) {
		if r := newLib(t).Init(); r != nvml.ERROR_UNKNOWN {
			t.Fatalf("Init %v, want UNKNOWN", r)
		}
		return
	}
	t.Parallel()
	for _, tc := range []struct{ name, scn, env, stderr string }{
		{"profile", "cost profile fast\n", "", `test.scn:1: unknown cost profile "fast"`},
		{"fn", "cost DeviceGetBogus 1ms\n", "", `unknown or unmodelled NVML function "DeviceGetBogus"`},
		{"latency", "cost * fast\n", "", `bad latency "fast"`},
		{"jitter", "cost * 1ms jitter 2ms\n", "", `bad jitter "2ms"`},
		{"slow", "cost slow * 1000 50ms\n", "", `bad slow-call rate "1000"`},
		{"lock", "cost lock maybe\n", "", `expected: cost profile`},
		{"env", "", "realistic; scale x", `simnvml: SIMNVML_COST: bad cost scale "x"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			o := opts{scenario: tc.scn}
			if tc.env != "" {
				o.env = []string{"SIMNVML_COST=" + tc.env}
			}
			out := runChildAs(t, "TestCostErrors", o)
			if !strings.Contains(out, tc.stderr) || strings.Count(out, "simnvml:") != 1 {
				t.Fatalf("want one simnvml line with %q:\n%s", tc.stderr, out)
			}
		})
	}
}
