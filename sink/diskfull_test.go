package sink

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/internal/testutil"
)

// fullDisk is a file that fails writes with ENOSPC while full is set,
// writing half of the buffer first as a real file system may.
type fullDisk struct {
	*os.File
	full *atomic.Bool
}

func (f *fullDisk) Write(b []byte) (int, error) {
	if f.full.Load() {
		n, _ := f.File.Write(b[:len(b)/2])
		return n, syscall.ENOSPC
	}
	return f.File.Write(b)
}

// TestFullDiskRowsResumeWithinATick: after ENOSPC paused rows, they resume
// within about one fsync tick of space returning, not at the next 10 s disk
// check. While little space is back, rows stay paused.
func TestFullDiskRowsResumeWithinATick(t *testing.T) {
	for _, minFreeMB := range []uint64{0, 1} {
		t.Run("min-free-mb="+strconv.FormatUint(minFreeMB, 10), func(t *testing.T) {
			var full atomic.Bool
			var free atomic.Uint64
			free.Store(1 << 40)
			c := newTestCSV(t, t.TempDir(), CSVConfig{
				FsyncEvery: 20 * time.Millisecond, MinFreeMB: minFreeMB,
				FreeBytes: func(string) (uint64, error) { return free.Load(), nil },
				wrap:      func(f *os.File) file { return &fullDisk{File: f, full: &full} },
			})
			s := fullSample()
			if err := c.Write(&s); err != nil {
				t.Fatal(err)
			}
			full.Store(true)
			free.Store(0)
			s.Time = s.Time.Add(100 * time.Millisecond)
			if err := c.Write(&s); err == nil {
				t.Fatal("write on a full disk did not fail")
			}
			if !c.Stats().Paused {
				t.Fatal("ENOSPC did not pause rows")
			}
			// A few bytes back: still paused (no flapping on a nearly full disk).
			free.Store(4 << 10)
			time.Sleep(100 * time.Millisecond)
			if !c.Stats().Paused {
				t.Fatal("rows resumed with only 4 KiB free")
			}
			full.Store(false)
			free.Store(1 << 30)
			if !testutil.WaitUntil(2*time.Second, func() bool { return !c.Stats().Paused }) {
				t.Fatal("rows still paused 2 s after space returned (the old guard waited for its 10 s check)")
			}
			s.Time = s.Time.Add(100 * time.Millisecond)
			if err := c.Write(&s); err != nil {
				t.Fatal(err)
			}
			if st := c.Stats(); st.Written != 2 || st.Dropped != 1 {
				t.Errorf("stats %+v, want 2 written and 1 dropped", st)
			}
		})
	}
}

// TestFdatasyncFailureIsCountedAndLoggedWithPath: a failed periodic
// fdatasync is counted in the sink's stats and its first occurrence logged
// with the file it concerned.
func TestFdatasyncFailureIsCountedAndLoggedWithPath(t *testing.T) {
	var logs testutil.LogBuf
	dir := t.TempDir()
	c := newTestCSV(t, dir, CSVConfig{FsyncEvery: 10 * time.Millisecond, Logger: logs.Logger()})
	s := fullSample()
	if err := c.Write(&s); err != nil {
		t.Fatal(err)
	}
	// fdatasync fails with EINVAL on a pipe: hand the sync thread one.
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	gf := c.files[0]
	gf.mu.Lock()
	real := gf.osf
	gf.osf = w
	gf.mu.Unlock()
	defer func() {
		gf.mu.Lock()
		gf.osf = real
		gf.mu.Unlock()
	}()
	for i := range 3 {
		s.Time = s.Time.Add(100 * time.Millisecond)
		if err := c.Write(&s); err != nil {
			t.Fatal(err)
		}
		if !testutil.WaitUntil(5*time.Second, func() bool { return c.Stats().SyncErrors > uint64(i) }) {
			t.Fatalf("fdatasync failure %d not counted: %+v", i+1, c.Stats())
		}
	}
	path := filepath.Join(dir, FileName(0, UnknownBoard, s.Time))
	out := logs.String()
	if n := strings.Count(out, "fsync of a CSV failed"); n != 1 {
		t.Errorf("logged %d times, want once:\n%s", n, out)
	}
	if !strings.Contains(out, "path="+path) || !strings.Contains(out, "invalid argument") {
		t.Errorf("log does not name the file and the error:\n%s", out)
	}
}

// flakyWriter fails every write while fail is set, writing part of it first.
type flakyWriter struct {
	mu   sync.Mutex
	fail bool
	buf  bytes.Buffer
}

func (f *flakyWriter) Write(b []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail {
		n := len(b) / 3
		f.buf.Write(b[:n])
		return n, syscall.ENOSPC
	}
	return f.buf.Write(b)
}

func (f *flakyWriter) Close() error { return nil }

func (f *flakyWriter) set(fail bool) {
	f.mu.Lock()
	f.fail = fail
	f.mu.Unlock()
}

func (f *flakyWriter) String() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.buf.String()
}

// wholeLines returns the lines of s that are one of want, in order; torn
// fragments are lines of their own and are skipped.
func wholeLines(s string, want map[string]bool) []string {
	var got []string
	for _, l := range strings.Split(s, "\n") {
		if want[l] {
			got = append(got, l)
		}
	}
	return got
}

func testLineLog(t *testing.T, logs *testutil.LogBuf) (*LineLog, *flakyWriter) {
	t.Helper()
	l := NewLineLog(t.TempDir(), "events.log", 1, 1, logs.Logger())
	fw := &flakyWriter{}
	l.w, l.retryEvery = fw, 10*time.Millisecond
	t.Cleanup(func() { l.Close() })
	return l, fw
}

// TestLineLogKeepsLinesWhileDiskFull: lines that cannot be written are kept,
// in order, and written with their own text (timestamps included) once
// writing works, without waiting for a new line.
func TestLineLogKeepsLinesWhileDiskFull(t *testing.T) {
	var logs testutil.LogBuf
	l, fw := testLineLog(t, &logs)
	lines := []string{
		"2026-11-30T10:00:00.000Z gpu=0 type=XID xid=13",
		"2026-11-30T10:00:01.000Z gpu=0 type=XID xid=79",
		"2026-11-30T10:00:02.000Z gpu=1 type=XID xid=48",
	}
	want := map[string]bool{}
	for _, s := range lines {
		want[s] = true
	}
	if err := l.Line(lines[0]); err != nil {
		t.Fatal(err)
	}
	fw.set(true)
	for _, s := range lines[1:] {
		if err := l.Line(s); err != nil {
			t.Fatalf("Line while the disk is full: %v (the line is kept, not lost)", err)
		}
	}
	if st := l.Stats(); st.Pending != 2 || st.Delayed != 2 || st.Overflowed != 0 {
		t.Errorf("stats while full: %+v", st)
	}
	fw.set(false)
	if !testutil.WaitUntil(2*time.Second, func() bool { return l.Stats().Pending == 0 }) {
		t.Fatal("kept lines not written after the disk had space again")
	}
	if got := wholeLines(fw.String(), want); strings.Join(got, "|") != strings.Join(lines, "|") {
		t.Errorf("file has %q, want %q", got, lines)
	}
	if !strings.HasSuffix(fw.String(), lines[2]+"\n") {
		t.Errorf("file does not end with the last line: %q", fw.String())
	}
	out := logs.String()
	if strings.Count(out, "cannot write a log file") != 1 || !strings.Contains(out, "log file writable again") {
		t.Errorf("log:\n%s", out)
	}
}

// TestLineLogOverflowIsCountedAndLogged: the queue is bounded; what does not
// fit is counted as lost and the first such line logged.
func TestLineLogOverflowIsCountedAndLogged(t *testing.T) {
	var logs testutil.LogBuf
	l, fw := testLineLog(t, &logs)
	l.retryEvery = time.Hour
	fw.set(true)
	for i := range maxPendingLines + 3 {
		err := l.Line("line " + strconv.Itoa(i))
		if (i >= maxPendingLines) != (err != nil) {
			t.Fatalf("line %d: %v", i, err)
		}
	}
	if st := l.Stats(); st.Pending != maxPendingLines || st.Overflowed != 3 {
		t.Errorf("stats %+v", st)
	}
	out := logs.String()
	if strings.Count(out, "dropping new ones") != 1 || !strings.Contains(out, `line="line `+strconv.Itoa(maxPendingLines)+`"`) {
		t.Errorf("overflow not logged once with the first lost line:\n%s", out)
	}
	// Still full at exit: the waiting lines are lost, counted and logged.
	l.Close()
	if st := l.Stats(); st.LostAtClose != maxPendingLines || st.Overflowed != 3 || st.Pending != 0 {
		t.Errorf("stats after Close: %+v", st)
	}
	if !strings.Contains(logs.String(), "still not writable at exit") {
		t.Errorf("loss at exit not logged:\n%s", logs.String())
	}
}
