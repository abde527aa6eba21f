package e2e

import (
	"encoding/json"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// checkTool runs the shipped build's `gpu-telemetry check` (as a health
// check runs it: a fresh process each time) and returns its exit status,
// stdout and how long it took, start to exit.
func checkTool(t *testing.T, args ...string) (code int, out string, took time.Duration) {
	t.Helper()
	cmd := exec.Command(plainPath, append([]string{"check"}, args...)...)
	var stdout strings.Builder
	cmd.Stdout = &stdout
	begin := time.Now()
	err := cmd.Run()
	took = time.Since(begin)
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		t.Fatalf("gpu-telemetry check: %v", err)
	}
	return code, stdout.String(), took
}

// TestCheckAnswersWithAGPUHung: with GPU 1 stuck in an NVML call, check
// answers in every format within a second (from the daemon's memory: it
// never waits on NVML), and names the hung GPU; with no daemon it says so,
// in each format's "unknown".
func TestCheckAnswersWithAGPUHung(t *testing.T) {
	t.Parallel()
	p := start(t, opts{scenario: "@hang"})
	sock := p.socketPath()
	// hang.scn: GPU 1 stuck from 3 s to 23 s; the deadline is 1 s.
	// The JSON answer first: the others must agree with it. The daemon
	// judges a GPU's action once a second too, so a GPU just shown hung may
	// not have its action yet.
	var (
		code int
		out  string
		took time.Duration
		d    struct {
			Healthy bool `json:"healthy"`
			Status  int  `json:"status"`
			GPUs    []struct {
				Index  int    `json:"index"`
				Action string `json:"action"`
			} `json:"gpus"`
		}
	)
	p.waitFor("GPU 1 hung, with an action", 20*time.Second, func() bool {
		st, ok := rawStatus(sock)
		if !ok || len(st.GPUs) < 2 || st.GPUs[1].State != "hung" {
			return false
		}
		code, out, took = checkTool(t, "--socket", sock, "--format", "json")
		return json.Unmarshal([]byte(out), &d) == nil && len(d.GPUs) == 2 && d.GPUs[1].Action != "none"
	})
	if took > time.Second || d.Status != 2 || d.GPUs[0].Action != "none" {
		t.Errorf("--format json (exit %d, %v): %+v; want status 2 within 1s, GPU 0 with no action:\n%s", code, took, d, out)
	}
	act := 1 // nhc's and npd's status for a node a GPU's action takes out
	if d.Healthy {
		act = 0
	}
	for _, tc := range []struct {
		format string
		code   int
		has    string
	}{
		{"json", act, `"index": 1`},
		{"nagios", 2, "CRITICAL: GPU 1 hung"},
		{"nhc", act, ""},
		{"npd", act, ""},
	} {
		code, out, took = checkTool(t, "--socket", sock, "--format", tc.format)
		// The bound is the issue's: a health check that waits on a hung
		// GPU would be killed by its caller's timeout and read as unknown.
		if took > time.Second {
			t.Errorf("--format %s took %v with GPU 1 hung, want under 1s", tc.format, took)
		}
		if code != tc.code || !strings.Contains(out, tc.has) {
			t.Errorf("--format %s: exit %d, %q; want %d and %q", tc.format, code, out, tc.code, tc.has)
		}
		if (tc.format == "nhc" || tc.format == "npd") && (code == 1 && !strings.Contains(out, " GPU 1 ") || strings.Count(out, "\n") > 1) {
			t.Errorf("--format %s: exit %d, %q; want one line, naming GPU 1 when it needs an action", tc.format, code, out)
		}
	}
	p.stop()

	gone := filepath.Join(t.TempDir(), "control.sock")
	for format, want := range map[string]int{"nagios": 3, "nhc": 3, "npd": 2, "json": 3} {
		if code, out, _ := checkTool(t, "--socket", gone, "--format", format); code != want || !strings.Contains(out, "cannot ask the daemon") {
			t.Errorf("no daemon, --format %s: exit %d, %q; want %d and why", format, code, out, want)
		}
	}
}
