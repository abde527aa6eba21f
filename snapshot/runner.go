package snapshot

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Runner runs one program without a shell and returns its combined output,
// even with an error (a command that times out or fails often printed
// something useful first).
type Runner interface {
	Run(ctx context.Context, name string, args ...string) ([]byte, error)
}

const (
	// DefaultCommandTimeout bounds one diagnostic command: gpu-telemetry-deep.py's
	// run_cmd timeout, long enough for lspci -vv on a large box, short enough
	// that a hung nvidia-smi does not hold the snapshot for long.
	DefaultCommandTimeout = 5 * time.Second
	// DefaultMaxOutput caps one command's output: a kernel log ring buffer is
	// 128 KiB to a few MiB; the other commands print a few KiB.
	DefaultMaxOutput = 1 << 20
	// defaultKillGrace is how long Run waits for a killed process to be
	// reaped. A process blocked in the kernel (D state: nvidia-smi on a GPU
	// that fell off the bus) ignores SIGKILL.
	defaultKillGrace = 2 * time.Second
)

// Program is a program the snapshots or the boot log run, and where an
// operator gets it.
type Program struct {
	Name    string // as run: looked up in PATH
	Package string // the Debian package that provides it; "" when no Debian package of ours can
	Source  string // where it comes from when Package is ""
}

// Programs is every program this package runs, each with what provides it,
// named when it is missing. deploy/deb/control recommends or suggests each
// package that is not Essential (test/deb checks it against this table).
var Programs = []Program{
	{Name: "dmesg", Package: "util-linux"}, // Essential: on every Debian system
	{Name: "journalctl", Package: "systemd"},
	{Name: "lspci", Package: "pciutils"},
	{Name: "setpci", Package: "pciutils"},
	{Name: "free", Package: "procps"},
	{Name: "uptime", Package: "procps"},
	// Installed with NVIDIA's driver (its packages or its .run installer);
	// no dependency of ours could name the right one.
	{Name: "nvidia-smi", Source: "NVIDIA's driver"},
}

// NotInstalledError is returned, by ExecRunner, for a program that is not in
// PATH. It matches exec.ErrNotFound with errors.Is.
type NotInstalledError struct {
	Name string // the program
}

// Error names the program and what provides it: "lspci: not installed
// (Debian package pciutils)".
func (e *NotInstalledError) Error() string {
	i := slices.IndexFunc(Programs, func(p Program) bool { return p.Name == e.Name })
	switch {
	case i < 0:
		return e.Name + ": not installed"
	case Programs[i].Package != "":
		return e.Name + ": not installed (Debian package " + Programs[i].Package + ")"
	}
	return e.Name + ": not installed (it comes with " + Programs[i].Source + ")"
}

// Unwrap makes errors.Is(err, exec.ErrNotFound) true.
func (e *NotInstalledError) Unwrap() error { return exec.ErrNotFound }

// ErrStuck is returned, wrapped, when a program is not started because an
// earlier run of it survived SIGKILL and has not exited yet: more
// nvidia-smi processes blocked in the driver only make things worse.
var ErrStuck = errors.New("an earlier run is still stuck after SIGKILL")

// TimeoutError is returned by ExecRunner when a program ran past its
// context's deadline and was killed. It matches context.DeadlineExceeded
// with errors.Is.
type TimeoutError struct {
	Name  string        // program
	After time.Duration // the time it was given: from its start to the deadline, to the millisecond
	Stuck bool          // the process had not exited SIGKILL's grace later; it was abandoned
}

func (e *TimeoutError) Error() string {
	s := e.Name + ": timed out after " + e.After.String()
	if e.Stuck {
		s += " (still running after SIGKILL; abandoned)"
	}
	return s
}

// Unwrap makes errors.Is(err, context.DeadlineExceeded) true.
func (e *TimeoutError) Unwrap() error { return context.DeadlineExceeded }

// ExecRunner runs programs with os/exec, each in its own process group so
// that the end of its context (the Manager's command timeout, runJob) kills
// the program and anything it started, with LC_ALL=C so that the output
// does not depend on the host's locale. A missing program is logged the
// first time it is asked for. The zero value is ready to use through a
// pointer.
type ExecRunner struct {
	MaxOutput int          // bytes of combined output kept (the last ones); 0 means DefaultMaxOutput
	Logger    *slog.Logger // told of each missing program once; nil logs nothing

	killGrace time.Duration // 0 means defaultKillGrace; tests shorten it
	waitDelay time.Duration // os/exec WaitDelay; 0 means killGrace; tests lengthen it

	// By program name, an *atomic.Int32: its runs abandoned after SIGKILL
	// (blocked in the kernel), not yet reaped. A program with some is not
	// started again, so a wedged GPU costs no more blocked processes with
	// every snapshot. A name at 0 stays: the names are few.
	stuck   sync.Map
	missing sync.Map // programs found missing (and logged)
}

// Run runs name with args and returns the last MaxOutput bytes of its
// combined stdout and stderr; it is bounded by ctx alone. Errors: a missing
// program returns a *NotInstalledError; a non-zero exit "<name>: exit
// status N"; ctx's deadline a *TimeoutError; a cancelled ctx its error
// wrapped with the name.
func (r *ExecRunner) Run(ctx context.Context, name string, args ...string) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("%s: not started: %w", name, err)
	}
	n, _ := r.stuck.LoadOrStore(name, new(atomic.Int32))
	stuck := n.(*atomic.Int32)
	if stuck.Load() > 0 {
		return nil, fmt.Errorf("%s: not started: %w", name, ErrStuck)
	}
	var given time.Duration
	if deadline, ok := ctx.Deadline(); ok {
		given = time.Until(deadline).Round(time.Millisecond)
	}
	grace := cmp.Or(max(r.killGrace, 0), defaultKillGrace)
	out := &tailBuffer{max: cmp.Or(max(r.MaxOutput, 0), DefaultMaxOutput)}

	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), "LC_ALL=C") // the last value of a key wins
	cmd.Stdout = out                           // the same pointer for both: one copier at a time
	cmd.Stderr = out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// Close our pipe ends this long after the process exits even if a
	// grandchild that escaped the process group still holds them.
	cmd.WaitDelay = cmp.Or(max(r.waitDelay, 0), grace)
	if err := cmd.Start(); err != nil {
		switch _, named := errors.AsType[*exec.Error](err); {
		case errors.Is(err, exec.ErrNotFound):
			err := &NotInstalledError{Name: name}
			if _, seen := r.missing.LoadOrStore(name, true); !seen && r.Logger != nil {
				r.Logger.Warn("a program the snapshots run is missing; they go without its output", "error", err.Error())
			}
			return nil, err
		case named:
			return nil, err // already names the program: exec: "lspci": permission denied
		}
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	// Wait runs on its own goroutine so that Run can return even when the
	// process cannot be reaped (blocked in the kernel).
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()

	select {
	case err := <-done:
		if err != nil {
			return out.Bytes(), fmt.Errorf("%s: %w", name, err)
		}
		return out.Bytes(), nil
	case <-ctx.Done():
	}

	// Negative pid: the whole process group, which Setpgid made ours.
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	abandoned := false
	select {
	case <-done:
	case <-time.After(grace):
		abandoned = true
		stuck.Add(1)
		go func() { // counted until its Wait returns
			<-done
			stuck.Add(-1)
		}()
	}
	if err := ctx.Err(); !errors.Is(err, context.DeadlineExceeded) {
		return out.Bytes(), fmt.Errorf("%s: killed: %w", name, err)
	}
	return out.Bytes(), &TimeoutError{Name: name, After: given, Stuck: abandoned}
}

// tailBuffer keeps the last max bytes written to it: the newest kernel
// messages are at the end of dmesg.
type tailBuffer struct {
	mu      sync.Mutex
	max     int
	buf     []byte
	dropped int64
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if over := len(b.buf) - b.max; over > 0 {
		b.dropped += int64(over)
		// Re-slicing forward: append reallocates with only the live bytes
		// once capacity runs out, so memory stays within a few times max.
		b.buf = b.buf[over:]
	}
	return len(p), nil
}

// Bytes returns a copy of what was kept. When output was dropped, the first
// (partial) line is dropped too and a note says how much is missing.
func (b *tailBuffer) Bytes() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.dropped == 0 {
		return bytes.Clone(b.buf)
	}
	kept, dropped := b.buf, b.dropped
	if i := bytes.IndexByte(kept, '\n'); i >= 0 {
		dropped += int64(i + 1)
		kept = kept[i+1:]
	}
	return append([]byte("(output truncated: first "+strconv.FormatInt(dropped, 10)+" bytes dropped)\n"), kept...)
}
