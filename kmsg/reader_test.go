package kmsg

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/internal/counters"
	"github.com/gpu-telemetry/gpu-telemetry/internal/testutil"
)

// discard is the logger of Readers whose logs no test reads.
var discard = slog.New(slog.DiscardHandler)

// guard bounds every wait so a broken Reader fails the test instead of
// hanging it. It is a failure guard only: nothing asserts on timing.
const guard = 10 * time.Second

func within[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(guard):
		t.Fatalf("no %s within %v", what, guard)
	}
	panic("unreachable")
}

// stepper replaces Reader.wait so a test decides when the loop polls again,
// after it has looked at what was emitted and changed the file.
type stepper struct {
	idle chan struct{} // the Reader reached the end of the data
	step chan struct{} // let it read again
}

func newStepper() *stepper {
	return &stepper{idle: make(chan struct{}), step: make(chan struct{})}
}

func (s *stepper) wait(ctx context.Context) error {
	select {
	case s.idle <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-s.step:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// run starts r.Run in a goroutine; records arrive on the first channel, and
// Run's result on the second.
func run(t *testing.T, ctx context.Context, r *Reader) (<-chan Record, <-chan error) {
	t.Helper()
	recs := make(chan Record, 100)
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx, func(rec Record) { recs <- rec }) }()
	return recs, done
}

// drain returns the messages of the records already delivered.
func drain(recs <-chan Record) []string {
	var msgs []string
	for {
		select {
		case r := <-recs:
			msgs = append(msgs, r.Message)
		default:
			return msgs
		}
	}
}

// appendFile appends s to the file at path.
func appendFile(t *testing.T, path, s string) {
	t.Helper()
	writeFile(t, path, os.O_APPEND, s)
}

// writeNew creates path, a new file (it must not exist), with content.
func writeNew(t *testing.T, path, content string) {
	t.Helper()
	writeFile(t, path, os.O_CREATE|os.O_EXCL, content)
}

// writeFile writes s to path opened write-only with flag.
func writeFile(t *testing.T, path string, flag int, s string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|flag, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(s); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestReaderFollowsAppendedFile(t *testing.T) {
	// The second record is still being written: no newline yet.
	f := runFile(t, "6,1,10,-;first\n6,2,20,-;sec")

	f.idleWith(t, "before the newline", "first")

	appendFile(t, f.path, "ond\nnot a record\n SUBSYSTEM=pci\n\n6,3,30,-;third\n")
	f.s.step <- struct{}{}
	f.idleWith(t, "after the newline", "second", "third")
	if got := f.r.counts.Load(malformedRecords); got != 1 {
		t.Errorf("Malformed() = %d, want 1 (dictionary and blank lines are not malformed)", got)
	}
	f.stop(t)
}

func TestReaderStartsOverAfterTruncation(t *testing.T) {
	f := runFile(t, "6,1,10,-;a long first record\n6,2,20,-;a long second record\n")

	within(t, f.s.idle, "first idle")
	if got := drain(f.recs); len(got) != 2 {
		t.Fatalf("got %q, want two records", got)
	}
	if err := os.WriteFile(f.path, []byte("6,3,30,-;after\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	f.s.step <- struct{}{} // notices the truncation
	within(t, f.s.idle, "idle after truncation")
	f.s.step <- struct{}{} // reads from the start
	f.idleWith(t, "after truncation", "after")
	if got := f.r.counts.Load(fileRestarts); got != 1 {
		t.Errorf("Restarts() = %d, want 1", got)
	}
	testutil.Contains(t, "the reader's log", f.logs.String(), "kernel log file truncated", "path="+f.path)
	f.stop(t)
}

func TestReaderDropsOverlongLine(t *testing.T) {
	long := strings.Repeat("x", maxLineLen+chunkSize+5)
	f := runFile(t, "6,1,1,-;before\n"+long+"\n6,2,2,-;after\n")
	f.idleWith(t, "around the overlong line", "before", "after")
	if got := f.r.counts.Load(malformedRecords); got != 1 {
		t.Errorf("Malformed() = %d, want 1", got)
	}
	f.stop(t)
}

// TestReaderLineLimit: a line of a file or FIFO holds at most maxLineLen
// bytes (64 KiB) before its newline: one of exactly that is read, a longer
// one is dropped and counted as malformed, also when its newline arrives in
// the read that takes it past the bound (a 70 KB line was accepted).
func TestReaderLineLimit(t *testing.T) {
	record := func(n int) string { // a record line of n bytes
		const head = "6,3,3,-;"
		return head + strings.Repeat("x", n-len(head))
	}
	for _, tc := range []struct {
		name      string
		line      string
		read      bool
		malformed uint64
	}{
		{"64 KiB", record(maxLineLen), true, 0},
		{"64 KiB and one byte", record(maxLineLen + 1), false, 1},
		{"70 KB", record(70_000), false, 1},
		{"over 64 KiB and a read", record(maxLineLen + chunkSize + 5), false, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := runFile(t, "6,1,1,-;before\n"+tc.line+"\n6,2,2,-;after\n")
			want := []string{"before", "after"}
			if tc.read {
				want = []string{"before", tc.line[len("6,3,3,-;"):], "after"}
			}
			within(t, f.idle, "the reader idle")
			got := drain(f.recs)
			if !slices.Equal(got, want) {
				t.Errorf("read %d records (lengths %v), want %d", len(got), lens(got), len(want))
			}
			if m := f.r.counts.Load(malformedRecords); m != tc.malformed {
				t.Errorf("Malformed() = %d, want %d", m, tc.malformed)
			}
			f.stop(t)
		})
	}
}

// TestReaderFIFOLineLimit: through a FIFO, written in pieces as a writer
// does, a 70 KB line is dropped and counted, and the lines around it read
// (it was handed on whole when its newline came with its last piece).
func TestReaderFIFOLineLimit(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kmsg.fifo")
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	r, err := Open(path, discard, counters.New())
	if err != nil {
		t.Fatal(err)
	}
	recs, done, cancel, w := followFIFO(t, r, path)
	defer cancel()
	long := "6,2,2,-;" + strings.Repeat("x", 70_000)
	// The newline comes in the read that takes the line past the bound.
	for _, s := range []string{"6,1,1,-;before\n", long[:1000], long[1000:40_000], long[40_000:] + "\n6,3,3,-;after\n"} {
		if _, err := w.WriteString(s); err != nil {
			t.Fatal(err)
		}
	}
	w.Close()
	for _, want := range []string{"before", "after"} {
		if got := within(t, recs, "record "+want).Message; got != want {
			t.Fatalf("record of %d bytes, want %q", len(got), want)
		}
	}
	if m := r.counts.Load(malformedRecords); m != 1 {
		t.Errorf("Malformed() = %d, want 1", m)
	}
	cancel()
	if err := within(t, done, "Run to return"); err != nil {
		t.Errorf("Run = %v", err)
	}
}

// followFIFO runs r, the Reader of the FIFO at path, polling every
// millisecond, and opens the FIFO for writing.
func followFIFO(t *testing.T, r *Reader, path string) (recs <-chan Record, done <-chan error, cancel func(), w *os.File) {
	t.Helper()
	r.wait = func(ctx context.Context) error { return sleep(ctx, time.Millisecond) }
	ctx, cancel := context.WithCancel(context.Background())
	recs, done = run(t, ctx, r)
	w, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	return recs, done, cancel, w
}

// lens is the length of each string.
func lens(s []string) []int {
	out := make([]int, len(s))
	for i, x := range s {
		out[i] = len(x)
	}
	return out
}

func TestReaderFIFO(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kmsg.fifo")
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	// Open must not wait for a writer.
	opened := make(chan *Reader, 1)
	go func() {
		r, err := Open(path, discard, counters.New())
		if err != nil {
			t.Error(err)
		}
		opened <- r
	}()
	r := within(t, opened, "Open of a FIFO without a writer")
	if r == nil {
		t.FailNow()
	}
	recs, done, cancel, w := followFIFO(t, r, path)
	defer cancel()
	for _, s := range []string{"6,1,1,-;one\n6,2,2,-;tw", "o\n"} {
		if _, err := w.WriteString(s); err != nil {
			t.Fatal(err)
		}
	}
	if got := within(t, recs, "record one").Message; got != "one" {
		t.Errorf("first record %q, want one", got)
	}
	if got := within(t, recs, "record two").Message; got != "two" {
		t.Errorf("second record %q, want two", got)
	}
	w.Close()

	// A new writer after the first went away is read too.
	w, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if _, err := w.WriteString("6,3,3,-;three\n"); err != nil {
		t.Fatal(err)
	}
	if got := within(t, recs, "record three").Message; got != "three" {
		t.Errorf("third record %q, want three", got)
	}

	// The writer stays open and idle, so Run is blocked in a read: cancelling
	// must still end it.
	cancel()
	if err := within(t, done, "Run to return while a FIFO read is blocked"); err != nil {
		t.Errorf("Run after cancel = %v, want nil", err)
	}
}

func TestReaderCancelAtEndOfFile(t *testing.T) {
	_, r := openFile(t, "6,1,1,-;only\n")
	ctx, cancel := context.WithCancel(context.Background())
	recs, done := run(t, ctx, r) // the real 100 ms poll
	within(t, recs, "the record")
	cancel()
	if err := within(t, done, "Run to return"); err != nil {
		t.Errorf("Run after cancel = %v, want nil", err)
	}
	if err := r.Close(); err != nil {
		t.Errorf("Close after Run = %v, want nil (Close is idempotent)", err)
	}
}

func TestOpenPermissionDenied(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root reads any file")
	}
	path := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(path, []byte("6,1,1,-;x\n"), 0); err != nil {
		t.Fatal(err)
	}
	_, err := Open(path, discard, counters.New())
	if !errors.Is(err, ErrPermission) {
		t.Errorf("Open of an unreadable file = %v, want ErrPermission", err)
	}
}

func TestPermissionErrorsWrapBoth(t *testing.T) {
	tests := []struct {
		name string
		err  error
		wrap func(error) error
		perm bool
	}{
		{"EPERM on open (dmesg_restrict)", &fs.PathError{Op: "open", Path: "/dev/kmsg", Err: syscall.EPERM}, openError, true},
		{"EACCES on open", &fs.PathError{Op: "open", Path: "/dev/kmsg", Err: syscall.EACCES}, openError, true},
		{"EPERM on first read", &fs.PathError{Op: "read", Path: "/dev/kmsg", Err: syscall.EPERM}, readError, true},
		{"missing file", &fs.PathError{Op: "open", Path: "/nope", Err: syscall.ENOENT}, openError, false},
		{"I/O error on read", &fs.PathError{Op: "read", Path: "/dev/kmsg", Err: syscall.EIO}, readError, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.wrap(tt.err)
			if got := errors.Is(err, ErrPermission); got != tt.perm {
				t.Errorf("errors.Is(%v, ErrPermission) = %v, want %v", err, got, tt.perm)
			}
			if !errors.Is(err, tt.err) {
				t.Errorf("%v does not wrap the cause %v", err, tt.err)
			}
			if !strings.HasPrefix(err.Error(), "kmsg: ") || !strings.Contains(err.Error(), "/") {
				t.Errorf("error %q should say it is from kmsg and name the path", err)
			}
		})
	}
}

func TestOpenRefusesOtherKinds(t *testing.T) {
	tests := []struct {
		name string
		path string
		want string
	}{
		{"directory", t.TempDir(), "want /dev/kmsg, a regular file or a FIFO"},
		{"missing", filepath.Join(t.TempDir(), "nope"), "no such file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := Open(tt.path, discard, counters.New())
			if err == nil {
				r.Close()
				t.Fatalf("Open(%q) succeeded, want an error", tt.path)
			}
			if !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), tt.path) {
				t.Errorf("Open(%q) = %v, want it to name the path and contain %q", tt.path, err, tt.want)
			}
			if errors.Is(err, ErrPermission) {
				t.Errorf("Open(%q) = %v, must not be a permission error", tt.path, err)
			}
		})
	}
}

func TestRunNilCallback(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kmsg.log")
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := Open(path, discard, counters.New())
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Run(context.Background(), nil); err == nil {
		t.Error("Run with a nil callback succeeded, want an error")
	}
}

// fileRun is a Reader over a file the test wrote, run with a stepper
// (runFile) or woken by inotify alone (runWatched).
type fileRun struct {
	path   string
	r      *Reader
	logs   *testutil.LogBuf // what the Reader logged
	s      *stepper         // nil: woken by inotify
	idle   <-chan struct{}  // a value each time the Reader reached the end of the data
	recs   <-chan Record
	done   <-chan error
	cancel context.CancelFunc
}

// openFile writes content to a new file and opens a Reader on it.
func openFile(t *testing.T, content string) (path string, r *Reader) {
	t.Helper()
	path = filepath.Join(t.TempDir(), "kmsg.log")
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := Open(path, discard, counters.New())
	if err != nil {
		t.Fatal(err)
	}
	return path, r
}

// idleWith waits until the Reader is idle at the end of the data and fails
// t (saying when: what) unless the records delivered since the last look
// are want.
func (f *fileRun) idleWith(t *testing.T, what string, want ...string) {
	t.Helper()
	within(t, f.idle, "the reader idle "+what)
	if got := drain(f.recs); !slices.Equal(got, want) {
		t.Fatalf("%s: got %q, want %q", what, got, want)
	}
}

// stop cancels the Reader and requires Run to return nil.
func (f *fileRun) stop(t *testing.T) {
	t.Helper()
	f.cancel()
	if err := within(t, f.done, "Run to return"); err != nil {
		t.Errorf("Run after cancel = %v, want nil", err)
	}
}

// runFile writes content to a new file and runs a Reader over it, stepped
// by the test; it is cancelled when the test ends at the latest.
func runFile(t *testing.T, content string) *fileRun {
	t.Helper()
	f := &fileRun{s: newStepper()}
	f.path, f.r = openFile(t, content)
	f.r.wait, f.idle = f.s.wait, f.s.idle
	f.start(t)
	return f
}

// runWatched writes content to a new file and runs a Reader over it that
// only inotify can wake: the fallback poll is an hour away. It is cancelled
// when the test ends at the latest.
func runWatched(t *testing.T, content string) *fileRun {
	t.Helper()
	f := &fileRun{}
	f.path, f.r = openFile(t, content)
	if f.r.notify == nil {
		t.Fatal("a regular file is not watched with inotify")
	}
	idle := make(chan struct{}, 100)
	f.r.wait = func(ctx context.Context) error {
		select {
		case idle <- struct{}{}:
		default:
		}
		return f.r.notify.wait(ctx, time.Hour)
	}
	f.idle = idle
	f.start(t)
	return f
}

// start runs the Reader, logging into f.logs, until f.cancel.
func (f *fileRun) start(t *testing.T) {
	t.Helper()
	f.logs = &testutil.LogBuf{}
	f.r.log = f.logs.Logger()
	var ctx context.Context
	ctx, f.cancel = context.WithCancel(context.Background())
	t.Cleanup(f.cancel)
	f.recs, f.done = run(t, ctx, f.r)
}

// runBeforeReplacement runs a stepped Reader over a file holding one record
// ("first"), waits until it has read it, and returns it with a writer of that
// file that stays open past the file's replacement (closed when the test ends).
func runBeforeReplacement(t *testing.T) (f *fileRun, old *os.File) {
	t.Helper()
	f = runFile(t, "6,1,10,-;first\n")
	f.idleWith(t, "before the replacement", "first")
	old, err := os.OpenFile(f.path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { old.Close() })
	return f, old
}

// A --kmsg file replaced under the reader (renamed away by a log rotation,
// deleted and created again by a restarted simulator, or renamed over) is
// followed by its path: what the old file got before the new one has data is
// read, then the new file from its start, and later appends to it. The
// switch is counted and logged; the old file's last line, never finished, is
// counted as malformed.
func TestReaderReopensReplacedFile(t *testing.T) {
	const xid = "NVRM: Xid (PCI:0000:01:00): 79, pid=1, GPU has fallen off the bus."
	tests := []struct {
		name    string
		replace func(t *testing.T, path, content string)
	}{
		{"renamed away and created again (logrotate)", func(t *testing.T, path, content string) {
			if err := os.Rename(path, path+".1"); err != nil {
				t.Fatal(err)
			}
			writeNew(t, path, content)
		}},
		{"deleted and created again (the simulator restarting)", func(t *testing.T, path, content string) {
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
			writeNew(t, path, content)
		}},
		{"renamed over", func(t *testing.T, path, content string) {
			tmp := path + ".tmp"
			writeNew(t, tmp, content)
			if err := os.Rename(tmp, path); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, old := runBeforeReplacement(t)
			tt.replace(t, f.path, "3,1,30,-;"+xid+"\n")
			// The writer of the old file had one more line in it, and the
			// start of another.
			if _, err := old.WriteString("6,2,20,-;last old line\n6,3,21,-;cut"); err != nil {
				t.Fatal(err)
			}
			f.s.step <- struct{}{}
			f.idleWith(t, "after the replacement", "last old line", xid)
			if got := f.r.counts.Load(fileRestarts); got != 1 {
				t.Errorf("Restarts() = %d, want 1", got)
			}
			if got := f.r.counts.Load(malformedRecords); got != 1 {
				t.Errorf("Malformed() = %d, want 1 (the old file's unfinished line)", got)
			}
			testutil.Contains(t, "the reader's log", f.logs.String(), "kernel log file replaced", "path="+f.path)

			appendFile(t, f.path, "6,2,40,-;later\n")
			f.s.step <- struct{}{}
			f.idleWith(t, "after an append to the new file", "later")
			f.stop(t)
		})
	}
}

// A line the old file's writer adds after the reader's last read of it hit
// the end, but before the reader saw the path name a new file, is still read
// from the old file (drained once more) before the switch to the new one.
func TestReaderDrainsOldFileBeforeSwitching(t *testing.T) {
	const xid = "NVRM: Xid (PCI:0000:01:00): 79, pid=1, GPU has fallen off the bus."
	f, old := runBeforeReplacement(t)
	if err := os.Rename(f.path, f.path+".1"); err != nil {
		t.Fatal(err)
	}
	writeNew(t, f.path, "3,1,30,-;"+xid+"\n")
	// Run waits in the stepper: the hook is in place before its next read.
	read, wrote := f.r.read, false
	f.r.read = func(b []byte) (int, error) {
		n, err := read(b)
		if errors.Is(err, io.EOF) && !wrote {
			wrote = true
			if _, err := old.WriteString("6,2,20,-;after the old file's end\n"); err != nil {
				t.Error(err)
			}
		}
		return n, err
	}
	f.s.step <- struct{}{}
	f.idleWith(t, "after the replacement", "after the old file's end", xid)
	if !wrote {
		t.Error("the reader never hit the old file's end")
	}
	f.stop(t)
}

// TestFileReadErrorReopensWhereItWas: a read error on a followed file does
// not stop the reader: it is counted and logged, the file is opened again
// after the back-off, and, the path still naming the same file, read on
// from where it was: no record is handed on twice or skipped.
func TestFileReadErrorReopensWhereItWas(t *testing.T) {
	f := &fileRun{s: newStepper()}
	f.path, f.r = openFile(t, "6,1,10,-;one\n")
	f.r.wait, f.idle = f.s.wait, f.s.idle
	calls := 0
	f.r.read = func(b []byte) (int, error) {
		calls++
		if calls == 2 {
			return 0, &fs.PathError{Op: "read", Path: f.path, Err: syscall.EIO}
		}
		return f.r.readFile(b)
	}
	var pauses []time.Duration
	f.r.pause = func(ctx context.Context, d time.Duration) error {
		pauses = append(pauses, d)
		return ctx.Err()
	}
	f.start(t)
	f.idleWith(t, "after the error and the reopen", "one")
	appendFile(t, f.path, "6,2,20,-;two\n")
	f.s.step <- struct{}{}
	f.idleWith(t, "after an append", "two")
	f.stop(t)
	if f.r.counts.Load(readReopens) != 1 || len(pauses) != 1 || pauses[0] != reopenFirst {
		t.Errorf("Reopens() = %d after waits %v, want 1 after [%v]", f.r.counts.Load(readReopens), pauses, reopenFirst)
	}
	if f.r.counts.Load(fileRestarts) != 0 || f.r.counts.Load(malformedRecords) != 0 {
		t.Errorf("Restarts() %d Malformed() %d, want 0 and 0: the same file goes on where it was", f.r.counts.Load(fileRestarts), f.r.counts.Load(malformedRecords))
	}
	testutil.Contains(t, "the reader's log", f.logs.String(), "kernel log read failed", "input/output error", "same_file=true")
}
