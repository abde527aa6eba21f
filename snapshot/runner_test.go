package snapshot

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/reading"
	"github.com/gpu-telemetry/gpu-telemetry/runstate"
)

// requireProgram skips a test when a program it runs is not installed.
func requireProgram(t *testing.T, names ...string) {
	t.Helper()
	for _, n := range names {
		if _, err := exec.LookPath(n); err != nil {
			t.Skipf("%s not installed", n)
		}
	}
}

// gone reports whether pid has exited (absent, or a zombie not yet reaped).
func gone(pid int) bool {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	// The state follows the ")" that closes the command name.
	i := bytes.LastIndexByte(stat, ')')
	return i >= 0 && i+2 < len(stat) && stat[i+2] == 'Z'
}

// giveUp bounds the waits of these tests on processes: a deadline for
// giving up on one that never goes, not a measure of how fast it goes (a
// loaded machine can take seconds to start a shell).
const giveUp = 60 * time.Second

// runWithin runs name under r with a context that ends after timeout, as
// runJob bounds every diagnostic.
func runWithin(r *ExecRunner, timeout time.Duration, name string, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return r.Run(ctx, name, args...)
}

// runUntilStarted runs script under r, doubling its timeout from 100 ms (up
// to 6.4 s) while the run ends before the script has printed the PID of the
// grandchild it starts: on a loaded machine sh may not get that far in
// 100 ms (the kill then takes the unstarted or unprinted grandchild with
// the group), and such a run shows nothing about a started grandchild. It
// returns that PID, the timeout and the error of the run that printed it.
func runUntilStarted(t *testing.T, r *ExecRunner, script string) (int, time.Duration, error) {
	t.Helper()
	for timeout := 100 * time.Millisecond; timeout <= 6400*time.Millisecond; timeout *= 2 {
		out, err := runWithin(r, timeout, "sh", "-c", script)
		if pid, perr := strconv.Atoi(strings.TrimSpace(string(out))); perr == nil {
			return pid, timeout, err
		}
		t.Logf("timeout %v: no PID printed before the kill (%v); doubling it", timeout, err)
	}
	t.Fatalf("the script never printed its grandchild's PID before its timeout")
	return 0, 0, nil
}

func TestExecRunnerTimeoutKillsGroup(t *testing.T) {
	requireProgram(t, "sh", "sleep")
	// sh starts a grandchild that holds the output pipe for 600 s: the
	// whole process group must die at the timeout. Wait returns only once
	// the grandchild has closed the pipe (WaitDelay never comes first), so
	// a run that is not stuck after a grace of giveUp shows, by state, that
	// the kill took the grandchild with the group.
	r := &ExecRunner{killGrace: giveUp, waitDelay: time.Hour}
	pid, timeout, err := runUntilStarted(t, r, "sleep 600 & echo $!; wait")
	var te *TimeoutError
	if !errors.As(err, &te) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want a *TimeoutError", err)
	}
	// The time it was given, from its start to the deadline: a moment less
	// than the context's timeout.
	if te.After > timeout || te.After < timeout/2 {
		t.Errorf("err = %q (timeout %v)", err, timeout)
	}
	if te.Stuck {
		_ = syscall.Kill(pid, syscall.SIGKILL) // our own child's child
		t.Fatalf("the output pipe stayed open %v after the timeout's kill: grandchild %d survived it", giveUp, pid)
	}
	deadline := time.Now().Add(giveUp)
	for !gone(pid) {
		if time.Now().After(deadline) {
			_ = syscall.Kill(pid, syscall.SIGKILL) // our own child's child
			t.Fatalf("grandchild %d survived the timeout", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestExecRunnerDefaultTimeoutMessage(t *testing.T) {
	e := &TimeoutError{Name: "lspci", After: DefaultCommandTimeout}
	if got := e.Error(); got != "lspci: timed out after 5s" {
		t.Errorf("got %q", got)
	}
}

// TestExecRunnerMissingProgram: a program that is not installed is named
// with the Debian package that provides it (Programs), in the error each
// run returns and in the log once, however often it is asked for.
func TestExecRunnerMissingProgram(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	var logs bytes.Buffer
	r := &ExecRunner{Logger: slog.New(slog.NewTextHandler(&logs, nil))}
	for _, c := range []struct{ name, want string }{
		{"lspci", "lspci: not installed (Debian package pciutils)"},
		{"lspci", "lspci: not installed (Debian package pciutils)"},
		{"setpci", "setpci: not installed (Debian package pciutils)"},
		{"nvidia-smi", "nvidia-smi: not installed (it comes with NVIDIA's driver)"},
		{"gpu-telemetry-no-such-program", "gpu-telemetry-no-such-program: not installed"},
	} {
		_, err := r.Run(context.Background(), c.name)
		if !errors.Is(err, exec.ErrNotFound) {
			t.Fatalf("%s: err = %v, want exec.ErrNotFound", c.name, err)
		}
		if err.Error() != c.want {
			t.Errorf("%s: err = %q, want %q", c.name, err, c.want)
		}
	}
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	if len(lines) != 4 || strings.Count(logs.String(), "lspci: not installed (Debian package pciutils)") != 1 {
		t.Errorf("want each missing program logged once (4 lines), got:\n%s", logs.String())
	}
}

// TestProgramsNamesEveryProgramRun: every program a crash snapshot, a
// follow-up and a boot log run has its row in Programs, so that its
// absence is named with what provides it.
func TestProgramsNamesEveryProgramRun(t *testing.T) {
	known := map[string]bool{}
	for _, p := range Programs {
		if known[p.Name] || (p.Package == "") == (p.Source == "") {
			t.Errorf("Programs: %+v: a second row, or not exactly one of Package and Source", p)
		}
		known[p.Name] = true
	}
	runner := &fakeRunner{results: map[string]fakeResult{}} // every program missing
	m, _ := newTestManager(t, func(c *Config) { c.Runner = runner })
	s := runJob(context.Background(), m.cfg.CommandTimeout, m.kernelLogJob(kernelFilter{}).run).status
	for _, j := range append(m.jobs("0000:4b:00.0", false), m.jobs("0000:4b:00.0", true)...) {
		if j.run != nil {
			j.run(context.Background())
		}
	}
	dir, now := bootFixture(t)
	prev := runstate.Previous{Found: true, State: runstate.State{BootID: "a", Started: now.Add(-time.Hour)}}
	boot, _ := newTestManager(t, func(c *Config) { c.Dir, c.Runner = dir, runner })
	if _, err := boot.WriteBootLog(context.Background(), BootConfig{Now: now, Prev: prev, Host: reading.Identity{BootID: "b"}, PstoreDirs: []string{}}); err != nil {
		t.Fatal(err)
	}
	for _, c := range runner.Calls() {
		name, _, _ := strings.Cut(c, " ")
		if !known[name] {
			t.Errorf("%q runs %s, which Programs does not name", c, name)
		}
	}
	if want := "(dmesg: not installed (Debian package util-linux) (and journalctl -k -b 0 instead: journalctl: not installed (Debian package systemd)))"; s != want {
		t.Errorf("kernel log section with neither program: %q, want %q", s, want)
	}
}

func TestExecRunnerOutput(t *testing.T) {
	requireProgram(t, "sh", "seq")
	tests := []struct {
		name     string
		r        *ExecRunner
		args     []string
		want     func(string) bool
		wantErr  string
		describe string
	}{
		{
			name: "combined stdout and stderr, locale C",
			r:    &ExecRunner{},
			args: []string{"sh", "-c", "echo out; echo err >&2; echo LC_ALL=$LC_ALL"},
			want: func(s string) bool {
				return strings.Contains(s, "out\n") && strings.Contains(s, "err\n") && strings.Contains(s, "LC_ALL=C\n")
			},
		},
		{
			name:    "exit status with output",
			r:       &ExecRunner{},
			args:    []string{"sh", "-c", "echo partial; exit 3"},
			want:    func(s string) bool { return s == "partial\n" },
			wantErr: "sh: exit status 3",
		},
		{
			name: "capped to the last bytes, whole lines",
			r:    &ExecRunner{MaxOutput: 1000},
			args: []string{"seq", "1", "100000"},
			want: func(s string) bool {
				lines := strings.Split(strings.TrimSuffix(s, "\n"), "\n")
				return len(s) <= 1100 && strings.HasPrefix(lines[0], "(output truncated: first ") &&
					lines[len(lines)-1] == "100000" && lines[1] == strconv.Itoa(100000-len(lines)+2)
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := tt.r.Run(context.Background(), tt.args[0], tt.args[1:]...)
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || err.Error() != tt.wantErr) {
				t.Errorf("err = %v, want %q", err, tt.wantErr)
			}
			if !tt.want(string(out)) {
				t.Errorf("unexpected output (%d bytes):\n%s", len(out), out)
			}
		})
	}
}

func TestExecRunnerContextCanceled(t *testing.T) {
	requireProgram(t, "sleep")
	ctx, cancel := context.WithCancel(context.Background())
	r := &ExecRunner{}
	go func() { time.Sleep(50 * time.Millisecond); cancel() }()
	start := time.Now()
	_, err := r.Run(ctx, "sleep", "10")
	if !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
	if time.Since(start) > 3*time.Second {
		t.Errorf("took %v", time.Since(start))
	}
	if _, err := r.Run(ctx, "sleep", "10"); !errors.Is(err, context.Canceled) {
		t.Errorf("Run on a cancelled context = %v", err)
	}
}

// runEscaping runs, under a runner from mk and a timeout, a script whose
// grandchild escapes into its own session (so the group kill misses it)
// and keeps the output pipe open for 600 s. The grandchild writes its PID
// to a file once it is in its own session; the script prints it only then,
// so a printed PID means the grandchild escaped the kill. The timeout doubles (up to
// 6.4 s, a fresh runner each time: a try whose grandchild escaped after
// the script was killed leaves its runner stuck) while a loaded machine
// kills the script before that. It returns the runner, the grandchild's PID
// (killed when the test ends) and the error of that run.
func runEscaping(t *testing.T, mk func() *ExecRunner) (*ExecRunner, int, error) {
	t.Helper()
	dir := t.TempDir()
	for timeout := 100 * time.Millisecond; timeout <= 6400*time.Millisecond; timeout *= 2 {
		r := mk()
		pidFile := filepath.Join(dir, "pid-"+timeout.String())
		t.Cleanup(func() { killFromFile(pidFile, 2*time.Second) })
		script := "setsid sh -c 'echo $$ >" + pidFile + ".new && mv " + pidFile + ".new " + pidFile + " && exec sleep 600' & " +
			"while [ ! -e " + pidFile + " ]; do sleep 0.01; done; cat " + pidFile + "; exec sleep 600"
		out, err := runWithin(r, timeout, "sh", "-c", script)
		if pid, perr := strconv.Atoi(strings.TrimSpace(string(out))); perr == nil {
			return r, pid, err
		}
		t.Logf("timeout %v: killed before the grandchild was in its own session (%v); doubling it", timeout, err)
	}
	t.Fatal("the script never got its grandchild into its own session before the timeout")
	return nil, 0, nil
}

// runAgain runs "sh -c true" under r until it succeeds, and fails the test
// if a run fails other than with ErrStuck or none succeeds within giveUp.
func runAgain(t *testing.T, r *ExecRunner) {
	t.Helper()
	deadline := time.Now().Add(giveUp)
	for {
		_, err := r.Run(context.Background(), "sh", "-c", "true")
		if err == nil {
			return
		}
		if !errors.Is(err, ErrStuck) || time.Now().After(deadline) {
			t.Fatalf("run after the stuck one = %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestExecRunnerStuckNotRestarted(t *testing.T) {
	// A run that cannot be reaped within the grace (an escaped grandchild
	// keeps the output pipe open) is abandoned, and the same program is not
	// started again until it is reaped. WaitDelay is long: the run stays
	// stuck until the test kills the grandchild.
	requireProgram(t, "sh", "setsid", "sleep")
	r, pid, err := runEscaping(t, func() *ExecRunner {
		return &ExecRunner{killGrace: 50 * time.Millisecond, waitDelay: time.Hour}
	})
	var te *TimeoutError
	if !errors.As(err, &te) || !te.Stuck {
		t.Fatalf("err = %v, want a stuck timeout", err)
	}
	if _, err := r.Run(context.Background(), "sh", "-c", "true"); !errors.Is(err, ErrStuck) {
		t.Errorf("second run = %v, want ErrStuck", err)
	}
	// The grandchild goes: the pipe closes, the abandoned run is reaped, and
	// the program may run again.
	_ = syscall.Kill(pid, syscall.SIGKILL)
	runAgain(t, r)
}

func TestExecRunnerRecoversAfterWaitDelay(t *testing.T) {
	// The production path: an escaped grandchild (an nvidia-smi child in D
	// state, say) keeps the output pipe open and never goes. WaitDelay
	// closes the runner's pipe ends after it, the abandoned run is reaped,
	// and the program may run again while the grandchild still lives.
	requireProgram(t, "sh", "setsid", "sleep")
	const waitDelay = 3 * time.Second // well past the 50 ms grace, even on a loaded machine
	r, pid, err := runEscaping(t, func() *ExecRunner {
		return &ExecRunner{killGrace: 50 * time.Millisecond, waitDelay: waitDelay}
	})
	var te *TimeoutError
	if !errors.As(err, &te) || !te.Stuck {
		t.Fatalf("err = %v, want a stuck timeout (the grace is shorter than WaitDelay)", err)
	}
	runAgain(t, r)
	if gone(pid) {
		t.Fatalf("grandchild %d went: the run recovered by its exit, not by WaitDelay", pid)
	}
}

// killFromFile kills the process whose PID a test's script wrote to path,
// waiting up to wait for the file (a grandchild that escaped a killed script
// may write it a moment later; none is written when it never started).
func killFromFile(path string, wait time.Duration) {
	for end := time.Now().Add(wait); ; time.Sleep(10 * time.Millisecond) {
		b, err := os.ReadFile(path)
		if err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
			return
		}
		if time.Now().After(end) {
			return
		}
	}
}

func TestTailBuffer(t *testing.T) {
	b := &tailBuffer{max: 10}
	for _, s := range []string{"abc\n", "defgh\n", "ijklmnop\n"} {
		_, _ = b.Write([]byte(s))
	}
	// 19 bytes written, the last 10 kept ("\nijklmnop\n"); the partial first
	// line (empty here) goes too, so 10 bytes are reported dropped.
	got := string(b.Bytes())
	want := "(output truncated: first 10 bytes dropped)\nijklmnop\n"
	if got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	small := &tailBuffer{max: 100}
	_, _ = small.Write([]byte("x\n"))
	if got := string(small.Bytes()); got != "x\n" {
		t.Errorf("got %q", got)
	}
}
