package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// probeRun runs `gpu-telemetry probe` on the simulated driver and returns
// stdout and the sim's calls file.
func probeRun(t *testing.T, scenario string, env []string, args ...string) (string, string) {
	t.Helper()
	base, _, _, calls := command(t, opts{scenario: scenario, env: env})
	cmd := exec.Command(binPath, append([]string{"probe"}, args...)...)
	cmd.Env = base.Env
	var stderr lockedBuf
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("probe: %v\nstdout:\n%s\nstderr:\n%s", err, out, stderr.String())
	}
	b, err := os.ReadFile(calls)
	if err != nil {
		t.Fatal(err)
	}
	return string(out), string(b)
}

// TestProbeShowsTheCostProfile: on the simulated driver the probe shows the
// profile back (a lower bound: a loaded machine only adds), sees the driver
// lock, and calls nothing but getters.
func TestProbeShowsTheCostProfile(t *testing.T) {
	t.Parallel()
	out, calls := probeRun(t, "gpus 2\ncost * 0.5ms\ncost DeviceGetTemperature 2ms\ncost DeviceGetClockInfo 1ms\ncost lock on\n", nil,
		"--calls", "20", "--interval", "0.2")
	row := func(name string) []string {
		for _, l := range strings.Split(out, "\n") {
			if strings.HasPrefix(l, name+" ") {
				return strings.Fields(l)
			}
		}
		t.Fatalf("no %s row:\n%s", name, out)
		return nil
	}
	p50 := func(f []string, i int) float64 {
		v, err := strconv.ParseFloat(f[i], 64)
		if err != nil {
			t.Fatalf("%q: %v", f, err)
		}
		return v
	}
	temp := row("nvmlDeviceGetTemperature") // name, per sample, alone p50 "ms", alone p99 "ms", together p50 "ms", ...
	if a, tog := p50(temp, 2), p50(temp, 6); a < 2 || tog < 2*a*0.8 {
		t.Errorf("temperature: alone p50 %.3f ms (profile 2 ms), together %.3f ms (lock: about twice)\n%s", a, tog, out)
	}
	if a := p50(row("nvmlDeviceGetClockInfo(graphics)"), 2); a < 1 {
		t.Errorf("clock alone p50 %.3f ms, profile 1 ms", a)
	}
	for _, want := range []string{"at --interval 200ms with 2 GPU(s):", "driver calls per GPU-sample  15.60", "driver calls per second      156 ", "verdict: fits"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if m := regexp.MustCompile(`driver serialization\s+([0-9.]+)`).FindStringSubmatch(out); m == nil || m[1] < "0.50" {
		t.Errorf("driver lock not seen (serialization %v):\n%s", m, out)
	}
	for _, l := range strings.Split(strings.TrimSpace(calls), "\n") {
		fn := strings.Fields(l)[0]
		if !regexp.MustCompile(`^nvml(Init|Shutdown$|ErrorString$|SystemGet|DeviceGet)`).MatchString(fn) {
			t.Errorf("probe called %s: not a read", fn)
		}
	}
}

// TestProbeHungGPU: a GPU stuck in the driver is reported within the deadline
// and the probe exits 1 without waiting for it.
func TestProbeHungGPU(t *testing.T) {
	t.Parallel()
	base, _, _, _ := command(t, opts{scenario: "gpus 2\nat 0 gpu 1 hang 60 fn DeviceGetPowerManagementLimit\n"})
	cmd := exec.Command(binPath, "probe", "--calls", "10", "--deadline", "300ms")
	cmd.Env = base.Env
	t0 := time.Now()
	out, err := cmd.Output()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
		t.Fatalf("exit %v, want 1\n%s", err, out)
	}
	if el := time.Since(t0); el > 30*time.Second {
		t.Fatalf("probe took %v with a hung GPU", el)
	}
	if !strings.Contains(string(out), "GPU 1: nvmlDeviceGetPowerManagementLimit did not return within 300ms") {
		t.Errorf("hung GPU not reported:\n%s", out)
	}
}

func TestProbeBadArguments(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"--interval", "0"}, {"--calls", "1"}, {"extra"}, {"--bogus"}} {
		cmd := exec.Command(binPath, append([]string{"probe"}, args...)...)
		cmd.Env = append(os.Environ(), "LD_LIBRARY_PATH="+filepath.Join(simDir, "sim"))
		out, err := cmd.CombinedOutput()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || strings.Count(strings.TrimSpace(string(out)), "\n") > 12 {
			t.Errorf("probe %v: %v, want exit 2 and a short message:\n%s", args, err, out)
		}
	}
}
