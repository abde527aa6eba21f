package snapshot

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
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

// runUntilStarted runs script under r, doubling r.Timeout (up to 6.4 s)
// while the run ends before the script has printed the PID of the
// grandchild it starts: on a loaded machine sh may not get that far in
// 100 ms (the kill then takes the unstarted or unprinted grandchild with
// the group), and such a run shows nothing about a started grandchild. It
// returns that PID and the error of the run that printed it.
func runUntilStarted(t *testing.T, r *ExecRunner, script string) (int, error) {
	t.Helper()
	for r.Timeout <= 6400*time.Millisecond {
		out, err := r.Run(context.Background(), "sh", "-c", script)
		if pid, perr := strconv.Atoi(strings.TrimSpace(string(out))); perr == nil {
			return pid, err
		}
		t.Logf("timeout %v: no PID printed before the kill (%v); doubling it", r.Timeout, err)
		r.Timeout *= 2
	}
	t.Fatalf("the script never printed its grandchild's PID before its timeout")
	return 0, nil
}

func TestExecRunnerTimeoutKillsGroup(t *testing.T) {
	requireProgram(t, "sh", "sleep")
	r := &ExecRunner{Timeout: 100 * time.Millisecond}
	start := time.Now()
	// sh starts a grandchild: the whole process group must die. Without the
	// kill, Run would last the 60 s of the sleep.
	pid, err := runUntilStarted(t, r, "sleep 60 & echo $!; wait")
	took := time.Since(start)
	var te *TimeoutError
	if !errors.As(err, &te) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want a *TimeoutError", err)
	}
	if !strings.Contains(err.Error(), "timed out after "+r.Timeout.String()) || te.Stuck {
		t.Errorf("err = %q (timeout %v)", err, r.Timeout)
	}
	if took >= 60*time.Second {
		t.Errorf("Run took %v: it waited for the program instead of killing it", took)
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

func TestExecRunnerMissingProgram(t *testing.T) {
	r := &ExecRunner{}
	_, err := r.Run(context.Background(), "gpu-telemetry-no-such-program")
	if !errors.Is(err, exec.ErrNotFound) {
		t.Fatalf("err = %v, want exec.ErrNotFound", err)
	}
	want := `exec: "gpu-telemetry-no-such-program": executable file not found in $PATH`
	if err.Error() != want {
		t.Errorf("err = %q, want %q", err, want)
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
	r := &ExecRunner{Timeout: time.Minute}
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

func TestExecRunnerStuckNotRestarted(t *testing.T) {
	// A run that cannot be reaped within the grace (here: a grandchild in
	// its own session keeps the output pipe open) is abandoned, and the same
	// program is not started again until it is gone. The grandchild writes
	// its PID to a file once it is in its own session; the script prints it
	// only then, so a printed PID means the grandchild escaped the kill.
	// WaitDelay is long: the run stays stuck until the test kills it.
	requireProgram(t, "sh", "setsid", "sleep")
	dir := t.TempDir()
	var r *ExecRunner
	var pid int
	var err error
	for timeout := 100 * time.Millisecond; pid == 0; timeout *= 2 {
		if timeout > 6400*time.Millisecond {
			t.Fatal("the script never got its grandchild into its own session before the timeout")
		}
		// A fresh runner per try: a try whose grandchild escaped after the
		// script was killed leaves that runner stuck.
		r = &ExecRunner{Timeout: timeout, killGrace: 50 * time.Millisecond, waitDelay: giveUp}
		pidFile := filepath.Join(dir, "pid-"+timeout.String())
		t.Cleanup(func() { killFromFile(pidFile, 2*time.Second) })
		script := "setsid sh -c 'echo $$ >" + pidFile + ".new && mv " + pidFile + ".new " + pidFile + " && exec sleep 60' & " +
			"while [ ! -e " + pidFile + " ]; do sleep 0.01; done; cat " + pidFile + "; exec sleep 60"
		var out []byte
		out, err = r.Run(context.Background(), "sh", "-c", script)
		if p, perr := strconv.Atoi(strings.TrimSpace(string(out))); perr == nil {
			pid = p
		} else {
			t.Logf("timeout %v: killed before the grandchild was in its own session (%v); doubling it", timeout, err)
		}
	}
	var te *TimeoutError
	if !errors.As(err, &te) || !te.Stuck {
		t.Fatalf("err = %v, want a stuck timeout", err)
	}
	r.Timeout = giveUp // the runs below must not time out on a loaded machine
	if _, err := r.Run(context.Background(), "sh", "-c", "true"); !errors.Is(err, ErrStuck) {
		t.Errorf("second run = %v, want ErrStuck", err)
	}
	// The grandchild goes: the pipe closes, the abandoned run is reaped, and
	// the program may run again.
	_ = syscall.Kill(pid, syscall.SIGKILL)
	deadline := time.Now().Add(giveUp)
	for {
		_, err := r.Run(context.Background(), "sh", "-c", "true")
		if err == nil {
			break
		}
		if !errors.Is(err, ErrStuck) || time.Now().After(deadline) {
			t.Fatalf("run after the stuck one was reaped = %v", err)
		}
		time.Sleep(20 * time.Millisecond)
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
