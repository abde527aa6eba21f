package sink

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/internal/counters"
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

// flakyWriter is a disk that fills mid-line: while fail is set, every write
// puts the first keep(len) bytes of its line into the file through the
// LineLog's own writer (lumberjack, so its size counts them as a real short
// write does) and returns ENOSPC.
type flakyWriter struct {
	w    io.WriteCloser
	path string
	keep func(n int) int
	mu   sync.Mutex
	fail bool
}

func (f *flakyWriter) Write(b []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail {
		n, _ := f.w.Write(b[:f.keep(len(b))])
		return n, syscall.ENOSPC
	}
	return f.w.Write(b)
}

func (f *flakyWriter) Close() error { return f.w.Close() }

func (f *flakyWriter) set(fail bool) {
	f.mu.Lock()
	f.fail = fail
	f.mu.Unlock()
}

// String returns the file's contents.
func (f *flakyWriter) String() string {
	b, err := os.ReadFile(f.path)
	if err != nil && !os.IsNotExist(err) {
		return err.Error()
	}
	return string(b)
}

// aThird is the short write of flakyWriter's disk unless a test says otherwise.
func aThird(n int) int { return n / 3 }

func testLineLog(t *testing.T, name string, logs *testutil.LogBuf) (*LineLog, *flakyWriter) {
	t.Helper()
	l := NewLineLog(t.TempDir(), name, 1, 1, 0, logs.Logger(), counters.New())
	fw := &flakyWriter{w: l.w, path: l.path, keep: aThird}
	l.w, l.retryEvery = fw, 10*time.Millisecond
	t.Cleanup(func() { l.Close() })
	return l, fw
}

// lineLogs are the daemon's line logs (monitor opens them by these names).
var lineLogs = []string{"events.log", "summary.log"}

// TestLineLogCutsBackATornLine: a line that a full disk cut short is cut
// back out of the file at once, and written whole, once, after the disk has
// room; no fragment is left. Lines that could not be written meanwhile are
// counted as delayed, and counted as lost when the log closes before the
// disk has room. Before, the fragment stayed and the whole line followed it.
func TestLineLogCutsBackATornLine(t *testing.T) {
	shapes := []struct {
		name string
		keep func(int) int
	}{
		{"a third of the line", aThird},
		{"all but the newline", func(n int) int { return n - 1 }},
		{"one byte", func(int) int { return 1 }},
		{"nothing", func(int) int { return 0 }},
	}
	lines := []string{
		"time=2026-11-30T10:00:00.000Z gpu=0 type=Xid xid=13 snapshot=/var/log/gpu-telemetry/crashes/crash-1.log",
		"time=2026-11-30T10:00:01.000Z gpu=0 type=Xid xid=79 snapshot=/var/log/gpu-telemetry/crashes/crash-2.log",
		"time=2026-11-30T10:00:02.000Z gpu=1 type=Xid xid=48",
		"time=2026-11-30T10:00:03.000Z gpu=1 type=Xid xid=31",
	}
	for _, name := range lineLogs {
		for _, sh := range shapes {
			t.Run(name+"/"+sh.name, func(t *testing.T) {
				var logs testutil.LogBuf
				l, fw := testLineLog(t, name, &logs)
				fw.keep = sh.keep
				l.retryEvery = time.Hour // the test frees the disk and writes the next line itself
				if err := l.Line(lines[0]); err != nil {
					t.Fatal(err)
				}
				fw.set(true)
				for _, s := range lines[1:3] {
					if err := l.Line(s); err != nil {
						t.Fatalf("Line while the disk is full: %v (the line is kept, not lost)", err)
					}
				}
				if got, want := fw.String(), lines[0]+"\n"; got != want {
					t.Errorf("%s while the disk is full:\n%q\nwant only the line written before:\n%q", name, got, want)
				}
				fw.set(false)
				if err := l.Line(lines[3]); err != nil {
					t.Fatal(err)
				}
				if got, want := fw.String(), strings.Join(lines, "\n")+"\n"; got != want {
					t.Errorf("%s after the disk had room:\n%s\nwant each line whole, once:\n%s", name, got, want)
				}
				if st := statsOf(l); st.Delayed != 2 || st.Pending != 0 || st.Overflowed != 0 || st.LostAtClose != 0 {
					t.Errorf("stats %+v, want 2 delayed, nothing lost", st)
				}
			})
		}
		// Still full at exit: the torn line is not in the file and is counted as lost.
		t.Run(name+"/full at exit", func(t *testing.T) {
			var logs testutil.LogBuf
			l, fw := testLineLog(t, name, &logs)
			if err := l.Line(lines[0]); err != nil {
				t.Fatal(err)
			}
			fw.set(true)
			if err := l.Line(lines[1]); err != nil {
				t.Fatal(err)
			}
			l.Close()
			if got, want := fw.String(), lines[0]+"\n"; got != want {
				t.Errorf("%s after a close on a full disk:\n%q\nwant only the line written before:\n%q", name, got, want)
			}
			if st := statsOf(l); st.LostAtClose != 1 {
				t.Errorf("stats %+v, want the torn line lost at close", st)
			}
		})
	}
}

// TestLineLogRepairsAPartialLastLine: a file that an earlier run left ending
// in part of a line (it died mid-write) is cut back to its last whole line
// before the first write, and the cut is logged; before, the new line glued
// onto the fragment.
func TestLineLogRepairsAPartialLastLine(t *testing.T) {
	for _, name := range lineLogs {
		t.Run(name, func(t *testing.T) {
			var logs testutil.LogBuf
			dir := t.TempDir()
			path := filepath.Join(dir, name)
			if err := os.WriteFile(path, []byte("time=1 whole\ntime=2 to"), 0o644); err != nil {
				t.Fatal(err)
			}
			l := NewLineLog(dir, name, 1, 1, 0, logs.Logger(), counters.New())
			if err := l.Line("time=3 next"); err != nil {
				t.Fatal(err)
			}
			l.Close()
			if got, want := string(testutil.ReadFile(t, path)), "time=1 whole\ntime=3 next\n"; got != want {
				t.Errorf("%s:\n%q\nwant\n%q", name, got, want)
			}
			testutil.Contains(t, "log", logs.String(), "cut back to the last whole line", "removed_bytes=9")
		})
	}
}

// TestLineLogOnAFullTmpfs: a real file system that fills mid-line (a tmpfs
// with no page left: the write that crosses into a new page is short, then
// ENOSPC). Each line log holds each line whole, once, after space returns.
// Needs root to mount; skips elsewhere (not in CI).
func TestLineLogOnAFullTmpfs(t *testing.T) {
	for _, name := range lineLogs {
		t.Run(name, func(t *testing.T) {
			dir := testutil.SmallDisk(t, "64k")
			var logs testutil.LogBuf
			l := NewLineLog(dir, name, 1, 1, 0, logs.Logger(), counters.New())
			l.retryEvery = 10 * time.Millisecond
			sw := &shortWrites{w: l.w}
			l.w = sw
			defer l.Close()
			// 100 bytes with the newline: 40 lines fill 4000 bytes of a
			// 4096-byte page, the 41st is cut short at the page's end.
			line := func(i int) string { return fmt.Sprintf("time=%04d %s", i, strings.Repeat("x", 89)) }
			var want []string
			add := func(i int) {
				t.Helper()
				if err := l.Line(line(i)); err != nil {
					t.Fatalf("line %d: %v", i, err)
				}
				want = append(want, line(i))
			}
			add(0)
			filler := filepath.Join(dir, "filler")
			testutil.FillDisk(t, filler)
			for i := 1; statsOf(l).Delayed == 0; i++ {
				if i > 100 {
					t.Fatal("the log's page never filled")
				}
				add(i)
			}
			add(len(want))
			if sw.short() == 0 {
				t.Fatal("no write was cut short; the test proves nothing")
			}
			if got := string(testutil.ReadFile(t, l.Path())); got != strings.Join(want[:len(want)-2], "\n")+"\n" {
				t.Errorf("%s while the disk is full ends %q, want the whole lines written before", name, got[max(len(got)-120, 0):])
			}
			if err := os.Remove(filler); err != nil {
				t.Fatal(err)
			}
			if !testutil.WaitUntil(5*time.Second, func() bool { return statsOf(l).Pending == 0 }) {
				t.Fatal("kept lines not written after the disk had room")
			}
			add(len(want))
			if got := string(testutil.ReadFile(t, l.Path())); got != strings.Join(want, "\n")+"\n" {
				t.Errorf("%s after the disk had room:\n%s\nwant each of %d lines whole, once", name, got, len(want))
			}
			if st := statsOf(l); st.Delayed != 2 || st.Overflowed != 0 {
				t.Errorf("stats %+v, want 2 delayed, none lost", st)
			}
		})
	}
}

// shortWrites counts the writes that put part of their line in the file.
type shortWrites struct {
	w io.WriteCloser
	n atomic.Int64
}

func (s *shortWrites) Write(b []byte) (int, error) {
	n, err := s.w.Write(b)
	if n > 0 && n < len(b) {
		s.n.Add(1)
	}
	return n, err
}

func (s *shortWrites) Close() error { return s.w.Close() }

func (s *shortWrites) short() int64 { return s.n.Load() }

// TestLineLogKeepsLinesWhileDiskFull: lines that cannot be written are kept,
// in order, and written with their own text (timestamps included) once
// writing works, without waiting for a new line.
func TestLineLogKeepsLinesWhileDiskFull(t *testing.T) {
	var logs testutil.LogBuf
	l, fw := testLineLog(t, "events.log", &logs)
	lines := []string{
		"2026-11-30T10:00:00.000Z gpu=0 type=XID xid=13",
		"2026-11-30T10:00:01.000Z gpu=0 type=XID xid=79",
		"2026-11-30T10:00:02.000Z gpu=1 type=XID xid=48",
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
	if st := statsOf(l); st.Pending != 2 || st.Delayed != 2 || st.Overflowed != 0 {
		t.Errorf("stats while full: %+v", st)
	}
	fw.set(false)
	if !testutil.WaitUntil(2*time.Second, func() bool { return statsOf(l).Pending == 0 }) {
		t.Fatal("kept lines not written after the disk had space again")
	}
	if got, want := fw.String(), strings.Join(lines, "\n")+"\n"; got != want {
		t.Errorf("file has %q, want each line whole, once: %q", got, want)
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
	l, fw := testLineLog(t, "events.log", &logs)
	l.retryEvery = time.Hour
	fw.set(true)
	for i := range maxPendingLines + 3 {
		err := l.Line("line " + strconv.Itoa(i))
		if (i >= maxPendingLines) != (err != nil) {
			t.Fatalf("line %d: %v", i, err)
		}
	}
	if st := statsOf(l); st.Pending != maxPendingLines || st.Overflowed != 3 {
		t.Errorf("stats %+v", st)
	}
	out := logs.String()
	if strings.Count(out, "dropping new ones") != 1 || !strings.Contains(out, `line="line `+strconv.Itoa(maxPendingLines)+`"`) {
		t.Errorf("overflow not logged once with the first lost line:\n%s", out)
	}
	// Still full at exit: the waiting lines are lost, counted and logged.
	l.Close()
	if st := statsOf(l); st.LostAtClose != maxPendingLines || st.Overflowed != 3 || st.Pending != 0 {
		t.Errorf("stats after Close: %+v", st)
	}
	if !strings.Contains(logs.String(), "still not writable at exit") {
		t.Errorf("loss at exit not logged:\n%s", logs.String())
	}
}

// TestFullDiskLeavesNoEmptyCSV: a CSV the disk has no room for is not left
// behind empty (without its board line and header): openAppend removes the
// file it created when its first lines cannot be written.
func TestFullDiskLeavesNoEmptyCSV(t *testing.T) {
	dir := testutil.SmallDisk(t, "64k")
	testutil.FillDisk(t, filepath.Join(dir, "filler"))
	path := filepath.Join(dir, "gpu0-abcdef01-deep-2026-01-01.csv")
	f, _, _, err := openAppend(path, []byte("# gpu=0 uuid=GPU-abcdef01\ntimestamp,gpu_temp\n"), slog.New(slog.DiscardHandler))
	if err == nil {
		f.Close()
		t.Fatal("the first lines were written to a full disk")
	}
	if _, err := os.Lstat(path); !os.IsNotExist(err) {
		t.Errorf("the CSV is left behind (%v)", err)
	}
}
