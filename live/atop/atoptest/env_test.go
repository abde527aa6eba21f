package atoptest

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
)

// exitError returns the error Wait gives for a child that exited through
// sh's script.
func exitError(t *testing.T, script string) error {
	t.Helper()
	err := exec.Command("sh", "-c", script).Run()
	if err == nil {
		t.Fatalf("sh -c %q: no error", script)
	}
	return err
}

// TestOwnNetworkOutcome: every failure to make or set up the namespace
// falls back to the host's loopback (false, one line on stderr); a run in
// the namespace passes its exit status through, a failing test included.
func TestOwnNetworkOutcome(t *testing.T) {
	for _, tc := range []struct {
		name     string
		run      nsRun
		code     int
		done     bool
		stderrIn string // "": nothing on stderr
	}{
		{"no privilege", nsRun{start: &os.SyscallError{Syscall: "clone", Err: syscall.EPERM}}, 0, false, "cannot make one: clone: operation not permitted"},
		{"no namespace support", nsRun{start: syscall.EINVAL}, 0, false, "cannot make one: invalid argument"},
		{"namespaces spent", nsRun{start: &os.SyscallError{Syscall: "clone", Err: syscall.ENOSPC}}, 0, false, "cannot make one: clone: no space left on device"},
		{"child cannot set it up", nsRun{setup: "lo up: operation not permitted", wait: exitError(t, "exit 1")}, 0, false, "cannot set it up: lo up: operation not permitted"},
		{"tests pass", nsRun{}, 0, true, ""},
		{"a test fails", nsRun{wait: exitError(t, "exit 1")}, 1, true, ""},
		{"other exit status", nsRun{wait: exitError(t, "exit 3")}, 3, true, ""},
		{"child killed", nsRun{wait: exitError(t, "kill -9 $$")}, 1, true, "test binary in its own network namespace: signal: killed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stderr strings.Builder
			code, done := ownNetworkOutcome(tc.run, &stderr)
			if code != tc.code || done != tc.done {
				t.Errorf("ownNetworkOutcome = %d, %v; want %d, %v", code, done, tc.code, tc.done)
			}
			out := stderr.String()
			switch {
			case tc.stderrIn == "" && out != "":
				t.Errorf("stderr %q, want nothing", out)
			case tc.stderrIn != "" && (!strings.Contains(out, tc.stderrIn) || strings.Count(out, "\n") != 1 || !strings.HasSuffix(out, "\n")):
				t.Errorf("stderr %q, want one line with %q", out, tc.stderrIn)
			case !tc.done && !strings.Contains(out, "tests share the host's loopback"):
				t.Errorf("stderr %q does not say the tests share the host's loopback", out)
			}
		})
	}
}

// TestSetUpChild: a child that cannot set its namespace up reports why and
// stops before its tests; one that can reports nothing and goes on. Either
// way it closes the report, which ends the parent's read.
func TestSetUpChild(t *testing.T) {
	for _, tc := range []struct {
		name   string
		setUp  error
		code   int
		done   bool
		report string
	}{
		{"set up", nil, 0, false, ""},
		{"cannot set up", errors.New("lo up: operation not permitted"), 1, true, "lo up: operation not permitted"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, w, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			code, done := setUpChild(w, func() error { return tc.setUp })
			if code != tc.code || done != tc.done {
				t.Errorf("setUpChild = %d, %v; want %d, %v", code, done, tc.code, tc.done)
			}
			report, err := io.ReadAll(r) // blocks unless setUpChild closed w
			if err != nil || string(report) != tc.report {
				t.Errorf("report %q, %v; want %q", report, err, tc.report)
			}
		})
	}
}
