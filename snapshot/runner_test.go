package snapshot

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
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

func TestExecRunnerTimeoutKillsGroup(t *testing.T) {
	requireProgram(t, "sh", "sleep")
	r := &ExecRunner{Timeout: 100 * time.Millisecond}
	start := time.Now()
	// sh starts a grandchild: the whole process group must die.
	out, err := r.Run(context.Background(), "sh", "-c", "sleep 10 & echo $!; wait")
	took := time.Since(start)
	var te *TimeoutError
	if !errors.As(err, &te) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want a *TimeoutError", err)
	}
	if !strings.Contains(err.Error(), "timed out after 100ms") || te.Stuck {
		t.Errorf("err = %q", err)
	}
	if took > 3*time.Second {
		t.Errorf("Run took %v after a 100ms timeout", took)
	}
	pid, perr := strconv.Atoi(strings.TrimSpace(string(out)))
	if perr != nil {
		t.Fatalf("output %q: %v", out, perr)
	}
	deadline := time.Now().Add(5 * time.Second)
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
	// program is not started again until it is gone.
	requireProgram(t, "sh", "setsid", "sleep")
	r := &ExecRunner{Timeout: 100 * time.Millisecond, killGrace: 50 * time.Millisecond, waitDelay: time.Second}
	out, err := r.Run(context.Background(), "sh", "-c", "setsid sleep 30 & echo $!; exec sleep 10")
	if pid, perr := strconv.Atoi(strings.TrimSpace(string(out))); perr == nil {
		defer syscall.Kill(pid, syscall.SIGKILL) // the escaped grandchild we started
	}
	var te *TimeoutError
	if !errors.As(err, &te) || !te.Stuck {
		t.Fatalf("err = %v, want a stuck timeout", err)
	}
	if _, err := r.Run(context.Background(), "sh", "-c", "true"); !errors.Is(err, ErrStuck) {
		t.Errorf("second run = %v, want ErrStuck", err)
	}
	deadline := time.Now().Add(10 * time.Second)
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
