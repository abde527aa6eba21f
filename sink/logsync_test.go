package sink

import (
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/internal/counters"
	"github.com/gpu-telemetry/gpu-telemetry/internal/testutil"
)

// syncWatch records what a line log fsyncs: the files (as their FileInfo,
// to compare inodes) and the directories. A sync blocks while hold is set.
type syncWatch struct {
	mu    sync.Mutex
	files []os.FileInfo
	dirs  []string
	err   error         // returned by every sync
	hold  chan struct{} // a sync waits for it to close; nil: none waits
	in    chan struct{} // told (without blocking) when a sync begins
}

func watchSyncs(l *LineLog) *syncWatch {
	w := &syncWatch{in: make(chan struct{}, 16)}
	l.sync.sync = func(f *os.File) error {
		select {
		case w.in <- struct{}{}:
		default:
		}
		w.mu.Lock()
		hold := w.hold
		w.mu.Unlock()
		if hold != nil {
			<-hold
		}
		fi, err := f.Stat()
		w.mu.Lock()
		defer w.mu.Unlock()
		if err == nil {
			w.files = append(w.files, fi)
		}
		if w.err != nil {
			return w.err
		}
		return f.Sync()
	}
	l.sync.syncDir = func(dir string) error {
		w.mu.Lock()
		w.dirs = append(w.dirs, dir)
		err := w.err
		w.mu.Unlock()
		if err != nil {
			return err
		}
		return SyncDir(dir)
	}
	return w
}

// began waits for a sync to begin.
func (w *syncWatch) began(t *testing.T) {
	t.Helper()
	select {
	case <-w.in:
	case <-time.After(10 * time.Second):
		t.Fatal("no fsync began within 10s")
	}
}

// synced reports whether the file at path was fsynced, and the directory.
func (w *syncWatch) synced(t *testing.T, path string) (file, dir bool) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, s := range w.files {
		file = file || os.SameFile(s, fi)
	}
	for _, d := range w.dirs {
		dir = dir || d == filepath.Dir(path)
	}
	return file, dir
}

// armed reports whether a sync timer waits.
func syncArmed(l *LineLog) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.sync.timer != nil
}

// TestLineLogSyncsWithinItsBound: a line reaches the disk (its file is
// fsynced, and the directory, as the file is new) within the bound, with no
// Close; nothing is armed before the first line or after its sync, so a log
// nothing is written to wakes nobody. Before, a line log was never fsynced:
// a host that froze seconds after an Xid 79 lost its events.log lines.
func TestLineLogSyncsWithinItsBound(t *testing.T) {
	for _, name := range lineLogs {
		t.Run(name, func(t *testing.T) {
			l := NewLineLog(t.TempDir(), name, 1, 1, 20*time.Millisecond, nil, counters.New())
			defer l.Close()
			w := watchSyncs(l)
			if syncArmed(l) {
				t.Error("a sync is armed before any line was written")
			}
			if err := l.Line("time=1 type=Xid xid=79"); err != nil {
				t.Fatal(err)
			}
			if !testutil.WaitUntil(10*time.Second, func() bool { f, d := w.synced(t, l.Path()); return f && d }) {
				t.Fatalf("the line's file and directory not fsynced within 10s of a 20ms bound")
			}
			if !testutil.WaitUntil(10*time.Second, func() bool { return !syncArmed(l) }) {
				t.Error("a sync is still armed after the only line was synced")
			}
		})
	}
}

// TestLineLogSyncsAcrossARotation: lumberjack renames the file inside a
// Write; the lines written before it are in the renamed file, which is
// fsynced too, with the directory (its new entries), at Close.
func TestLineLogSyncsAcrossARotation(t *testing.T) {
	dir := t.TempDir()
	l := NewLineLog(dir, "events.log", 1, 1, time.Hour, nil, counters.New()) // only Close syncs
	w := watchSyncs(l)
	line := strings.Repeat("x", 4000)
	for range 300 { // 1.2 MB: one rotation at 1 MB
		if err := l.Line(line); err != nil {
			t.Fatal(err)
		}
	}
	backups, _ := filepath.Glob(filepath.Join(dir, "events-*.log"))
	if len(backups) != 1 {
		t.Fatalf("backups %v, want one rotation", backups)
	}
	if f, _ := w.synced(t, backups[0]); f {
		t.Fatal("synced before Close with an hour's bound")
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{backups[0], l.Path()} {
		if f, d := w.synced(t, p); !f || !d {
			t.Errorf("%s: file synced %v, directory %v; want both at Close", filepath.Base(p), f, d)
		}
	}
}

// TestLineLogWriterNeverWaitsOnTheSync: while an fsync is stuck on the disk,
// lines are still written at once; they are synced once it comes back.
func TestLineLogWriterNeverWaitsOnTheSync(t *testing.T) {
	l := NewLineLog(t.TempDir(), "events.log", 1, 1, 10*time.Millisecond, nil, counters.New())
	defer l.Close()
	w := watchSyncs(l)
	hold := make(chan struct{})
	w.hold = hold
	if err := l.Line("time=1 first"); err != nil {
		t.Fatal(err)
	}
	w.began(t) // the sync is on the "disk"
	done := make(chan error)
	go func() { done <- l.Line("time=2 second") }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute): // not a timing assertion: a minute means Line waits for the sync
		t.Fatal("Line waited for a stuck fsync")
	}
	w.mu.Lock()
	w.hold = nil
	w.mu.Unlock()
	close(hold)
	w.began(t) // the second line's sync, armed once the first came back
}

// TestLineLogSyncFailureCounted: a failed fsync is counted in
// log_sync_errors, and only the first is logged.
func TestLineLogSyncFailureCounted(t *testing.T) {
	var logs testutil.LogBuf
	reg := counters.New()
	l := NewLineLog(t.TempDir(), "summary.log", 1, 1, time.Hour, logs.Logger(), reg)
	w := watchSyncs(l)
	w.err = syscall.EIO
	if err := l.Line("time=1 summary"); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil && !errors.Is(err, os.ErrClosed) {
		t.Fatal(err)
	}
	if n := reg.Load(lineSyncErrors); n != 2 { // the file and its new directory entry
		t.Errorf("log_sync_errors = %d, want 2", n)
	}
	if n := strings.Count(logs.String(), "fsync of a log file failed"); n != 1 {
		t.Errorf("failure logged %d times, want once:\n%s", n, logs.String())
	}
}

// TestLineLogCloseAbandonsAStuckFsync: Close's last fsync is bounded: on a
// disk that never answers, Close returns (the daemon's exit goes on), and
// the abandoned fsync is counted in log_sync_errors, once, and logged.
// Before, Close waited on it for as long as the disk did not answer.
func TestLineLogCloseAbandonsAStuckFsync(t *testing.T) {
	var logs testutil.LogBuf
	reg := counters.New()
	l := NewLineLog(t.TempDir(), "events.log", 1, 1, time.Hour, logs.Logger(), reg) // only Close syncs
	w := watchSyncs(l)
	hold := make(chan struct{})
	defer close(hold)
	w.hold = hold
	if err := l.Line("time=1 type=Xid xid=79"); err != nil {
		t.Fatal(err)
	}
	closeBounded(t, func() error { return l.Close() }, "an fsync that never returns")
	if n := reg.Load(lineSyncErrors); n != 1 {
		t.Errorf("log_sync_errors = %d, want 1 (the abandoned sync)", n)
	}
	if !strings.Contains(logs.String(), "abandoned") {
		t.Errorf("the abandoned fsync is not logged:\n%s", logs.String())
	}
}

// fullThenStuck is a disk that is full (ENOSPC) while full is set, then
// stops answering: its writes block in stuck.
type fullThenStuck struct {
	full  atomic.Bool
	stuck *blockingWriter
}

func (w *fullThenStuck) Write(b []byte) (int, error) {
	if w.full.Load() {
		return 0, syscall.ENOSPC
	}
	return w.stuck.Write(b)
}

func (w *fullThenStuck) Close() error { return nil }

// TestLineLogCloseAbandonsAStuckWrite: a line kept while the disk was full
// is written before the next line, and that write is stuck in the kernel
// on a disk that stopped answering, holding the log's lock. Close does not
// wait on it past its bound: the abandoned close is counted as an
// abandoned fsync (log_sync_errors) and the kept line, with the next line
// its Line holds, as lost at exit, both logged, and Close returns an
// error. Before, Close took the lock inline
// and waited for as long as the disk did not answer.
func TestLineLogCloseAbandonsAStuckWrite(t *testing.T) {
	var logs testutil.LogBuf
	reg := counters.New()
	l := NewLineLog(t.TempDir(), "events.log", 1, 1, time.Hour, logs.Logger(), reg)
	l.retryEvery = time.Hour // only the next line writes the kept one
	w := &fullThenStuck{stuck: &blockingWriter{entered: make(chan struct{}), release: make(chan struct{})}}
	w.full.Store(true)
	l.w = w
	var releaseOnce sync.Once
	release := func() { releaseOnce.Do(func() { close(w.stuck.release) }) }
	defer release()
	if err := l.Line("time=1 kept"); err != nil {
		t.Fatal(err)
	}
	w.full.Store(false)
	wrote := make(chan error, 1)
	go func() { wrote <- l.Line("time=2 next") }()
	<-w.stuck.entered
	if err := closeBounded(t, func() error { return l.Close() }, "a line's write that never returns"); err == nil {
		t.Error("Close returned no error with a write abandoned")
	}
	if n := reg.Load(lineSyncErrors); n != 1 {
		t.Errorf("log_sync_errors = %d, want 1 (the abandoned close)", n)
	}
	if n := reg.Load(linesLostAtExit); n != 2 {
		t.Errorf("log_lines_lost_at_exit = %d, want 2 (the kept line, and the next line its Line holds)", n)
	}
	testutil.Contains(t, "log", logs.String(), "write to a log file still running at close", "lines=2")
	release()
	if err := <-wrote; err != nil {
		t.Errorf("the stuck line, once the disk answers: %v", err)
	}
	if !testutil.WaitUntil(10*time.Second, func() bool { l.mu.Lock(); defer l.mu.Unlock(); return l.closed }) {
		t.Fatal("the abandoned close did not run 10s after the write returned")
	}
	if err := l.Line("time=3 late"); err == nil {
		t.Error("a line after Close was taken")
	}
}

// TestLineLogCloseWritesLastLines: the lines the stop writes itself
// (summary.log's final line, events.log's burst-limit sums) are handed to
// Close, which writes them after the kept lines, within its bound: on a
// file that works they are in it, in order, after the lines a full disk
// held back; a last line whose write fails (a full disk) is counted lost at
// exit and logged.
func TestLineLogCloseWritesLastLines(t *testing.T) {
	t.Run("written after the kept lines", func(t *testing.T) {
		var logs testutil.LogBuf
		l, fw := testLineLog(t, "summary.log", &logs)
		l.retryEvery = time.Hour // only Close writes the kept line
		if err := l.Line("time=1 first"); err != nil {
			t.Fatal(err)
		}
		fw.set(true)
		if err := l.Line("time=2 kept"); err != nil {
			t.Fatal(err)
		}
		fw.set(false)
		if err := l.Close("time=3 a", "time=4 b"); err != nil {
			t.Fatal(err)
		}
		if got := fw.String(); got != "time=1 first\ntime=2 kept\ntime=3 a\ntime=4 b\n" {
			t.Errorf("summary.log after Close:\n%s", got)
		}
		if n := l.counts.Load(linesLostAtExit); n != 0 {
			t.Errorf("log_lines_lost_at_exit = %d, want 0", n)
		}
	})
	t.Run("the disk is full", func(t *testing.T) {
		var logs testutil.LogBuf
		l, fw := testLineLog(t, "summary.log", &logs)
		if err := l.Line("time=1 first"); err != nil {
			t.Fatal(err)
		}
		fw.set(true)
		l.Close("time=2 final")
		if n := l.counts.Load(linesLostAtExit); n != 1 {
			t.Errorf("log_lines_lost_at_exit = %d, want 1 (the last line)", n)
		}
		testutil.Contains(t, "log", logs.String(), "still not writable at exit", "lines=1", `first="time=2 final"`)
		if got := fw.String(); got != "time=1 first\n" {
			t.Errorf("summary.log after Close:\n%s", got)
		}
	})
}

// stalledDisk is a line log's own writer (lumberjack, on the real file) on
// a disk that stops answering while stall is set: a write then tells
// entered and waits for release; once released, it goes through, or fails
// (EIO) when fail is set. writes counts the writes begun. With stallClose
// set, the file's close sticks the same way; with stallAfter set, a write
// goes through (lumberjack may rotate in it) and then sticks.
type stalledDisk struct {
	io.WriteCloser
	stall, fail, stallClose, stallAfter atomic.Bool
	writes                              atomic.Int32
	entered, release                    chan struct{}
}

func (d *stalledDisk) Close() error {
	if d.stallClose.Load() {
		d.wait()
	}
	return d.WriteCloser.Close()
}

func (d *stalledDisk) wait() {
	select {
	case d.entered <- struct{}{}:
	default:
	}
	<-d.release
}

// stalledLog returns summary.log in dir, its writer a stalledDisk (not
// stalled yet) released by release at the latest at the test's end, with
// "time=1 first" written.
func stalledLog(t *testing.T, dir string, log *slog.Logger) (l *LineLog, d *stalledDisk, release func()) {
	t.Helper()
	l = NewLineLog(dir, "summary.log", 1, 1, time.Hour, log, counters.New())
	d = &stalledDisk{WriteCloser: l.w, entered: make(chan struct{}, 1), release: make(chan struct{})}
	l.w = d
	var once sync.Once
	release = func() { once.Do(func() { close(d.release) }) }
	t.Cleanup(release)
	if err := l.Line("time=1 first"); err != nil {
		t.Fatal(err)
	}
	return l, d, release
}

func (d *stalledDisk) Write(b []byte) (int, error) {
	d.writes.Add(1)
	if d.stallAfter.Load() {
		defer d.wait()
		return d.WriteCloser.Write(b)
	}
	if d.stall.Load() {
		d.wait()
	}
	if d.fail.Load() {
		return 0, syscall.EIO
	}
	return d.WriteCloser.Write(b)
}

// TestLineLogCloseGivesUpOnEverythingOnce: when a line's write stuck in the
// kernel holds the log at Close's bound, every line whose fate is not known
// then (the line in that write, the last lines handed to Close) is counted
// once as lost at exit, and logged; and when the stuck write returns at
// last, nothing of it is counted again or lands in the file: the line in
// the write is cut back out when the write went through, not kept for later
// when it failed, and the abandoned close begins no write. Before, the
// line in the write was not counted, and once the write returned both it
// and the last lines landed in the file (or, on a failed write, it was kept
// and counted delayed after Close returned).
func TestLineLogCloseGivesUpOnEverythingOnce(t *testing.T) {
	for _, fails := range []bool{false, true} {
		t.Run(map[bool]string{false: "the write goes through", true: "the write fails"}[fails], func(t *testing.T) {
			var logs testutil.LogBuf
			dir := t.TempDir()
			l, d, release, wrote := stalledLine(t, dir, logs.Logger())
			if err := closeBounded(t, func() error { return l.Close("time=3 final") }, "a line's write that never returns"); err == nil {
				t.Error("Close returned no error with a write abandoned")
			}
			if n := l.counts.Load(linesLostAtExit); n != 2 {
				t.Errorf("log_lines_lost_at_exit = %d, want 2 (the line in the stuck write, the last line)", n)
			}
			testutil.Contains(t, "log", logs.String(), "the kept and the last lines are lost", "lines=2")
			lost, delayed, writes := l.counts.Load(linesLostAtExit), l.counts.Load(linesDelayed), d.writes.Load()
			d.fail.Store(fails)
			release()
			if err := <-wrote; err != nil {
				t.Errorf("the line Close counted lost, once its write returned: %v, want nil (counted already)", err)
			}
			closeEnds(t, l)
			if got := string(testutil.ReadFile(t, filepath.Join(dir, "summary.log"))); got != "time=1 first\n" {
				t.Errorf("summary.log once the stuck write returned:\n%swant only the line written before Close (nothing counted lost lands)", got)
			}
			if n, m := l.counts.Load(linesLostAtExit), l.counts.Load(linesDelayed); n != lost || m != delayed {
				t.Errorf("counted after Close returned: log_lines_lost_at_exit %d -> %d, log_lines_delayed %d -> %d", lost, n, delayed, m)
			}
			if n := l.Waiting(); n != 0 {
				t.Errorf("Waiting() = %d after Close, want 0", n)
			}
			if n := d.writes.Load() - writes; n != 0 {
				t.Errorf("%d writes begun after Close gave up, want none (the abandoned close writes nothing more)", n)
			}
			if strings.Contains(logs.String(), "keeping its lines in memory") {
				t.Errorf("the line Close counted lost is logged as kept once its write failed:\n%s", logs.String())
			}
		})
	}
}

// closeEnds waits until Close's goroutine, abandoned by Close, has done
// all it does: what it counts or logs is in by then.
func closeEnds(t *testing.T, l *LineLog) {
	t.Helper()
	select {
	case <-l.closeEnded:
	case <-time.After(10 * time.Second):
		t.Fatal("the abandoned close did not end 10s after the write returned")
	}
}

// stalledLine opens a stalled log in dir and writes the line "time=2 stuck"
// to it, returning once the write is stuck on the disk: release frees it,
// and wrote gets what the write returned.
func stalledLine(t *testing.T, dir string, log *slog.Logger) (l *LineLog, d *stalledDisk, release func(), wrote <-chan error) {
	t.Helper()
	l, d, release = stalledLog(t, dir, log)
	d.stall.Store(true)
	w := make(chan error, 1)
	go func() { w <- l.Line("time=2 stuck") }()
	<-d.entered
	return l, d, release, w
}

// closeGivingUpOnStuckLine closes l while a line's write is stuck: Close
// gives up on the line, counting it lost at exit; then the write is
// released, returns nil (the line counted already) on wrote, and Close's
// abandoned goroutine ends.
func closeGivingUpOnStuckLine(t *testing.T, l *LineLog, release func(), wrote <-chan error) {
	t.Helper()
	closeBounded(t, func() error { return l.Close() }, "a line's write that never returns")
	if n := l.counts.Load(linesLostAtExit); n != 1 {
		t.Errorf("log_lines_lost_at_exit = %d, want 1 (the line in the stuck write)", n)
	}
	release()
	if err := <-wrote; err != nil {
		t.Errorf("the line Close counted lost: %v, want nil (counted already)", err)
	}
	closeEnds(t, l)
}

// TestLineLogNoWriteBeginsAfterCloseGaveUp: a line's write is about to
// begin when the file's close before it (a SIGHUP that found the log's
// lock held) sticks on the disk, and Close gives up on the line at its
// bound, counting it lost at exit. Once the close returns, the line's
// write is not begun. Before, writeLocked checked for the give-up only on
// entry, and the write began after Close had counted the line lost.
func TestLineLogNoWriteBeginsAfterCloseGaveUp(t *testing.T) {
	dir := t.TempDir()
	l, d, release := stalledLog(t, dir, nil)
	l.reopen.Store(true) // a SIGHUP found the lock held: the next line's write closes the file first
	d.stallClose.Store(true)
	wrote := make(chan error, 1)
	go func() { wrote <- l.Line("time=2 stuck") }()
	<-d.entered
	if err := closeBounded(t, func() error { return l.Close() }, "a file close that never returns"); err == nil {
		t.Error("Close returned no error with a close abandoned")
	}
	if n := l.counts.Load(linesLostAtExit); n != 1 {
		t.Errorf("log_lines_lost_at_exit = %d, want 1 (the line about to be written)", n)
	}
	writes := d.writes.Load()
	release()
	if err := <-wrote; err != nil {
		t.Errorf("the line Close counted lost: %v, want nil (counted already)", err)
	}
	closeEnds(t, l)
	if n := d.writes.Load() - writes; n != 0 {
		t.Errorf("%d writes begun after Close gave up, want none", n)
	}
	if got := string(testutil.ReadFile(t, filepath.Join(dir, "summary.log"))); got != "time=1 first\n" {
		t.Errorf("summary.log:\n%swant only the line written before Close", got)
	}
}

// TestLineLogRefusedLineCutFromTheRenamedFile: logrotate renames
// summary.log while a line's write is stuck; Close gives up on the line
// (counted lost at exit), and then the write goes through, to the renamed
// file lumberjack holds. The line is cut back out of that file; when it
// was moved out of the directory, where it cannot be found, that is
// logged. Before, the cut ran on the file at the path (missing, or a new
// empty one), cut nothing and logged nothing: summary.log.1 kept the line
// counted lost.
func TestLineLogRefusedLineCutFromTheRenamedFile(t *testing.T) {
	for _, tc := range []struct {
		name       string
		create     bool // logrotate creates a new file at the path
		elsewhere  bool // the file is renamed into another directory
		wantLogged bool
	}{
		{name: "renamed"},
		{name: "renamed and created", create: true},
		{name: "moved out of the directory", elsewhere: true, wantLogged: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs testutil.LogBuf
			dir := t.TempDir()
			l, _, release, wrote := stalledLine(t, dir, logs.Logger())
			old := filepath.Join(dir, "summary.log.1")
			if tc.elsewhere {
				old = filepath.Join(t.TempDir(), "summary.log.1")
			}
			if err := os.Rename(l.Path(), old); err != nil {
				t.Fatal(err)
			}
			if tc.create {
				if err := os.WriteFile(l.Path(), nil, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			closeGivingUpOnStuckLine(t, l, release, wrote)
			logged := strings.Contains(logs.String(), "cannot be cut back out of the file")
			if logged != tc.wantLogged {
				t.Errorf("the failed cut back logged: %v, want %v:\n%s", logged, tc.wantLogged, logs.String())
			}
			want := "time=1 first\n"
			if tc.elsewhere {
				want += "time=2 stuck\n" // not found: it stays, logged
			}
			if got := string(testutil.ReadFile(t, old)); got != want {
				t.Errorf("the renamed file once the stuck write returned:\n%swant:\n%s", got, want)
			}
			if b, err := os.ReadFile(l.Path()); err == nil && len(b) > 0 {
				t.Errorf("summary.log holds %q, want it empty or missing", b)
			}
		})
	}
}

// TestLineLogRefusedLineCutAfterLumberjackRotated: a line's write makes
// lumberjack rotate summary.log by size (the old file becomes its backup,
// a new file at the path gets the line), then sticks; Close gives up on the
// line (counted lost at exit) and the write returns. The line is cut from
// the new file and the backup is left whole. When logrotate also renamed
// the new file while the write was stuck (and created an empty one), the
// file the line went to is neither the one at the path nor the one it was
// when the write began: the line stays, and that is logged. Before, the
// cut back took the backup (the file at the path when the write began) and
// removed its last real lines by the refused line's length, logging nothing.
func TestLineLogRefusedLineCutAfterLumberjackRotated(t *testing.T) {
	for _, tc := range []struct {
		name      string
		logrotate bool // logrotate renames the new file to summary.log.1 and creates an empty one
	}{
		{name: "rotated in the write"},
		{name: "rotated in the write, then renamed by logrotate", logrotate: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs testutil.LogBuf
			dir := t.TempDir()
			// Whole lines up to just under stalledLog's 1 MB, so that the
			// stuck line makes lumberjack rotate.
			before := strings.Repeat("time=0 legit "+strings.Repeat("x", 86)+"\n", 10485)
			if err := os.WriteFile(filepath.Join(dir, "summary.log"), []byte(before), 0o644); err != nil {
				t.Fatal(err)
			}
			before += "time=1 first\n"
			l, d, release := stalledLog(t, dir, logs.Logger())
			d.stallAfter.Store(true)
			stuck := "time=2 stuck " + strings.Repeat("y", 100)
			wrote := make(chan error, 1)
			go func() { wrote <- l.Line(stuck) }()
			<-d.entered
			backups, _ := filepath.Glob(filepath.Join(dir, "summary-*.log"))
			if len(backups) != 1 {
				t.Fatalf("lumberjack's backups %v, want one (the line's write rotated the file)", backups)
			}
			renamed := filepath.Join(dir, "summary.log.1")
			if tc.logrotate {
				if err := os.Rename(l.Path(), renamed); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(l.Path(), nil, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			closeGivingUpOnStuckLine(t, l, release, wrote)
			if got := string(testutil.ReadFile(t, backups[0])); got != before {
				t.Errorf("lumberjack's backup once the stuck write returned: %d bytes ending %q, want its %d bytes whole, ending %q",
					len(got), got[max(len(got)-40, 0):], len(before), before[len(before)-40:])
			}
			if b, err := os.ReadFile(l.Path()); err == nil && len(b) > 0 {
				t.Errorf("summary.log holds %q, want it empty or missing", b)
			}
			logged := strings.Contains(logs.String(), "cannot be cut back out of the file")
			if logged != tc.logrotate {
				t.Errorf("the failed cut back logged: %v, want %v:\n%s", logged, tc.logrotate, logs.String())
			}
			if tc.logrotate {
				if got := string(testutil.ReadFile(t, renamed)); got != stuck+"\n" {
					t.Errorf("summary.log.1 holds %q, want the line (it cannot be found: it stays, logged)", got)
				}
			}
		})
	}
}

// stuckLine writes a line to l whose write is stuck in w (l's writer)
// until release; the line's error comes on wrote.
func stuckLine(t *testing.T, l *LineLog, w *blockingWriter) (wrote chan error, release func()) {
	t.Helper()
	var once sync.Once
	release = func() { once.Do(func() { close(w.release) }) }
	t.Cleanup(release)
	wrote = make(chan error, 1)
	go func() { wrote <- l.Line("time=1 stuck") }()
	<-w.entered
	return wrote, release
}

// closeCounter is a blockingWriter that counts its closes.
type closeCounter struct {
	*blockingWriter
	closes atomic.Int32
}

func (w *closeCounter) Close() error { w.closes.Add(1); return nil }

// TestLineLogReopenDoesNotWaitOnAStuckWrite: SIGHUP's Reopen runs on the
// signals goroutine, which also answers SIGUSR1; a line's write stuck on a
// stalled disk holds the log's lock, and Reopen returns without it. The
// file is closed once that write returns, before the next line's write,
// which reopens it by name. Before, Reopen waited on the lock for as long
// as the disk did not answer.
func TestLineLogReopenDoesNotWaitOnAStuckWrite(t *testing.T) {
	l := NewLineLog(t.TempDir(), "events.log", 1, 1, time.Hour, nil, counters.New())
	w := &closeCounter{blockingWriter: &blockingWriter{entered: make(chan struct{}), release: make(chan struct{})}}
	l.w = w
	wrote, release := stuckLine(t, l, w.blockingWriter)
	w.closes.Store(0) // the first write's check for a partial last line closes the file first
	returnsSoon(t, func() { l.Reopen() }, "the line log's Reopen")
	release()
	if err := <-wrote; err != nil {
		t.Fatal(err)
	}
	if n := w.closes.Load(); n != 0 {
		t.Fatalf("file closed %d times before the next line", n)
	}
	if err := l.Line("time=2 next"); err != nil {
		t.Fatal(err)
	}
	if n := w.closes.Load(); n != 1 {
		t.Errorf("file closed %d times by the line after the reopen, want once (the next line goes to the file by its name)", n)
	}
	if got := w.buf.String(); got != "time=1 stuck\ntime=2 next\n" {
		t.Errorf("lines written: %q", got)
	}
}

// TestLineLogRenamedBeforeSIGHUP: logrotate renames events.log (and may
// create a new one) before it sends SIGHUP. The lines written in between
// are each in one of the two files, whole and once, and every file
// holding one of them is fsynced; no failed sync is counted. Before,
// lumberjack kept writing the renamed file while the sync opened the path:
// no file there was a false log_sync_errors, a new one was synced instead,
// and the renamed file's new lines were never fsynced.
func TestLineLogRenamedBeforeSIGHUP(t *testing.T) {
	for _, create := range []bool{false, true} {
		t.Run(map[bool]string{false: "renamed", true: "renamed and created"}[create], func(t *testing.T) {
			dir := t.TempDir()
			reg := counters.New()
			l := NewLineLog(dir, "events.log", 1, 1, 10*time.Millisecond, nil, reg)
			w := watchSyncs(l)
			if err := l.Line("time=1 before"); err != nil {
				t.Fatal(err)
			}
			if !testutil.WaitUntil(10*time.Second, func() bool { f, _ := w.synced(t, l.Path()); return f && !syncArmed(l) }) {
				t.Fatal("the first line not fsynced within 10s of a 10ms bound")
			}
			w.mu.Lock()
			w.files, w.dirs = nil, nil // from here on
			w.mu.Unlock()
			old := l.Path() + ".1"
			if err := os.Rename(l.Path(), old); err != nil {
				t.Fatal(err)
			}
			if create {
				if err := os.WriteFile(l.Path(), nil, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			lines := []string{"time=2 renamed", "time=3 renamed"}
			for _, s := range lines {
				if err := l.Line(s); err != nil {
					t.Fatal(err)
				}
			}
			if err := l.Reopen(); err != nil { // the SIGHUP
				t.Fatal(err)
			}
			lines = append(lines, "time=4 reopened")
			if err := l.Line(lines[2]); err != nil {
				t.Fatal(err)
			}
			if err := l.Close(); err != nil && !errors.Is(err, os.ErrClosed) {
				t.Fatal(err)
			}
			var both string
			for _, p := range []string{old, l.Path()} {
				b, err := os.ReadFile(p)
				if err != nil {
					t.Fatal(err)
				}
				both += string(b)
				if f, _ := w.synced(t, p); strings.Contains(string(b), "time=2") || strings.Contains(string(b), "time=4") {
					if !f {
						t.Errorf("%s holds lines written after the rename but was not fsynced:\n%s", filepath.Base(p), b)
					}
				}
			}
			for _, s := range append(lines, "time=1 before") {
				if n := strings.Count(both, s+"\n"); n != 1 {
					t.Errorf("line %q is %d times in the two files, want once:\n%s", s, n, both)
				}
			}
			if n := reg.Load(lineSyncErrors); n != 0 {
				t.Errorf("log_sync_errors = %d, want 0 (no sync failed)", n)
			}
		})
	}
}

// fullStuckClose is a full disk (every write fails with ENOSPC) whose
// file's close, once stick is set, is stuck until release is closed (an
// NFS close flushing to a server that stopped answering).
type fullStuckClose struct {
	stick   atomic.Bool
	release chan struct{}
}

func (w *fullStuckClose) Write([]byte) (int, error) { return 0, syscall.ENOSPC }

func (w *fullStuckClose) Close() error {
	if w.stick.Load() {
		<-w.release
	}
	return nil
}

// TestLineLogCloseCountsKeptLinesWhenItsFileCloseSticks: lines kept while
// the disk is full are still unwritten at Close, and the file's close then
// sticks. Close abandons it at its bound (log_sync_errors) and the kept
// lines are counted as lost at exit, and logged. Before, Close's goroutine
// had taken them off the queue before the close: abandoned there, they
// were neither counted nor logged.
func TestLineLogCloseCountsKeptLinesWhenItsFileCloseSticks(t *testing.T) {
	var logs testutil.LogBuf
	reg := counters.New()
	l := NewLineLog(t.TempDir(), "events.log", 1, 1, time.Hour, logs.Logger(), reg)
	l.retryEvery = time.Hour // the kept lines wait for Close
	w := &fullStuckClose{release: make(chan struct{})}
	l.w = w
	defer close(w.release)
	for _, s := range []string{"time=1 kept", "time=2 kept"} {
		if err := l.Line(s); err != nil {
			t.Fatal(err)
		}
	}
	w.stick.Store(true)
	if err := closeBounded(t, func() error { return l.Close() }, "a file close that never returns"); err == nil {
		t.Error("Close returned no error with its file's close abandoned")
	}
	if n := reg.Load(lineSyncErrors); n != 1 {
		t.Errorf("log_sync_errors = %d, want 1 (the abandoned close)", n)
	}
	if n := reg.Load(linesLostAtExit); n != 2 {
		t.Errorf("log_lines_lost_at_exit = %d, want 2 (the kept lines)", n)
	}
	testutil.Contains(t, "log", logs.String(), "lines=2")
}
