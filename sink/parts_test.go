package sink

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
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
	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

// checkTable fails unless every line of lines has the field count of its
// header, the first line.
func checkTable(t *testing.T, name string, lines []string) {
	t.Helper()
	if !strings.HasPrefix(lines[0], "timestamp,") {
		t.Fatalf("%s does not start with a header: %q", name, lines[0])
	}
	n := strings.Count(lines[0], ",")
	for i, l := range lines[1:] {
		if strings.Count(l, ",") != n {
			t.Errorf("%s line %d has %d fields under a header of %d: %q", name, i+2, strings.Count(l, ",")+1, n+1, l)
		}
	}
}

// TestCSVSetGPUStartsANewPart: a GPU that was stuck at start (0 fans)
// gets its fan columns from the row after SetGPU, in a new part of the day
// under its own header; the rows before stay in the first part.
func TestCSVSetGPUStartsANewPart(t *testing.T) {
	dir := t.TempDir()
	c := newTestCSV(t, dir, CSVConfig{})
	s := fullSample()
	s.GPU = 1 // configured with 0 fans
	s.NumFans = 0
	c.Write(&s)
	c.SetGPU(GPUColumns{Index: 1, Fans: 2})
	if got := c.Columns(1); len(got) != len(Columns(2)) {
		t.Errorf("columns after SetGPU: %d, want %d", len(got), len(Columns(2)))
	}
	// The ring keeps the row written before (a crash snapshot of the GPU's
	// first answers shows what it wrote while stuck), laid out under the new
	// header, its fan cells empty: those fans were not read.
	hdr, rows := c.Rows(1)
	if hdr+"\n" != string(Header(2)) || len(rows) != 1 {
		t.Fatalf("ring after SetGPU: header %q, %d rows; want the new header and the row written before", hdr, len(rows))
	}
	if cells := strings.Split(rows[0], ","); len(cells) != len(Columns(2)) || !strings.Contains(rows[0], ",,,,,") {
		t.Errorf("ring row after SetGPU: %q, want %d cells with the fan cells empty", rows[0], len(Columns(2)))
	}
	s.NumFans = 2
	for range 2 {
		s.Time = s.Time.Add(time.Second)
		if err := c.Write(&s); err != nil {
			t.Fatal(err)
		}
	}
	c.SetGPU(GPUColumns{Index: 1, Fans: 2}) // unchanged: no new part
	s.Time = s.Time.Add(time.Second)
	c.Write(&s)
	if hdr, rows := c.Rows(1); hdr+"\n" != string(Header(2)) || len(rows) != 4 {
		t.Errorf("ring: header %q, %d rows; want 4 under the new header", hdr, len(rows))
	}
	c.Close()
	p1 := filepath.Join(dir, PartName(1, UnknownBoard, s.Time, 1))
	p2 := filepath.Join(dir, PartName(1, UnknownBoard, s.Time, 2))
	l1, l2 := readLines(t, p1), readLines(t, p2)
	checkTable(t, p1, l1)
	checkTable(t, p2, l2)
	if l1[0]+"\n" != string(Header(0)) || len(l1) != 2 {
		t.Errorf("part 1: %q, want the 0-fan header and 1 row", l1)
	}
	if l2[0]+"\n" != string(Header(2)) || len(l2) != 4 {
		t.Errorf("part 2: %q, want the 2-fan header and 3 rows", l2)
	}
	if !strings.Contains(l2[1], ",30,30,0,31,") {
		t.Errorf("part 2's first row lacks the fan cells: %q", l2[1])
	}
}

// TestCSVClockStepBackAcrossMidnight: the wall clock steps back from just
// after midnight to the evening before. The evening's rows go to that day's
// file, never to the next day's: a new part when the day is compressed
// already or holds later rows (every file stays in time order); once the
// clock is back, rows continue in the next day's file, which was neither
// compressed nor split meanwhile.
func TestCSVClockStepBackAcrossMidnight(t *testing.T) {
	for _, tc := range []struct {
		name     string
		compress bool
		first    time.Time // the day's last row before midnight
		evening  string    // where the stepped-back rows go
		want     []string  // the rows there
	}{
		{"compressed", true, time.Date(2026, 12, 1, 23, 59, 50, 0, cet), "gpu0-unknown-deep-2026-12-01_2.csv",
			[]string{"2026-12-01T18:00", "2026-12-01T20:00", "2026-12-01T22:00"}},
		{"later rows", false, time.Date(2026, 12, 1, 23, 59, 50, 0, cet), "gpu0-unknown-deep-2026-12-01_2.csv",
			[]string{"2026-12-01T18:00", "2026-12-01T20:00", "2026-12-01T22:00"}},
		{"earlier rows", false, time.Date(2026, 12, 1, 17, 0, 0, 0, cet), "gpu0-unknown-deep-2026-12-01.csv",
			[]string{"2026-12-01T17:00", "2026-12-01T18:00", "2026-12-01T20:00", "2026-12-01T22:00"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			c, write := clockedCSV(t, dir, time.Date(2026, 12, 1, 23, 59, 50, 0, cet), CSVConfig{Compress: tc.compress})
			write(tc.first)
			write(time.Date(2026, 12, 2, 0, 0, 10, 0, cet)) // midnight: 12-01 finished
			if tc.compress {
				waitCompressed(t, filepath.Join(dir, "gpu0-unknown-deep-2026-12-01.csv"))
			}
			// The clock steps back six hours.
			write(time.Date(2026, 12, 1, 18, 0, 10, 0, cet))
			write(time.Date(2026, 12, 1, 20, 0, 0, 0, cet))
			write(time.Date(2026, 12, 1, 22, 0, 0, 0, cet))
			// It is set right again; a sample a little late over midnight
			// still joins the day it ends up in.
			write(time.Date(2026, 12, 2, 0, 0, 20, 0, cet))
			write(time.Date(2026, 12, 1, 23, 59, 30, 0, cet))
			write(time.Date(2026, 12, 2, 0, 0, 30, 0, cet))
			c.Close()

			// The evening's part is finished once the clock is back: it may
			// be compressed before Close, or not (the compressor's and
			// the disk's speed decide).
			eveningPath := filepath.Join(dir, tc.evening)
			if !exists(eveningPath) {
				eveningPath += ".gz"
			}
			evening := readLines(t, eveningPath)
			checkTable(t, tc.evening, evening)
			var rows []string
			for _, l := range evening[1:] {
				rows = append(rows, l[:len("2026-12-01T18:00")])
			}
			if strings.Join(rows, " ") != strings.Join(tc.want, " ") {
				t.Errorf("%s rows at %q, want %q", tc.evening, rows, tc.want)
			}
			next := readLines(t, filepath.Join(dir, "gpu0-unknown-deep-2026-12-02.csv"))
			if len(next) != 5 {
				t.Errorf("12-02 has %d lines, want header + 4 rows: %q", len(next), next)
			}
			for _, l := range next[1:] {
				if strings.HasPrefix(l, "2026-12-01T18") || strings.HasPrefix(l, "2026-12-01T20") || strings.HasPrefix(l, "2026-12-01T22") {
					t.Errorf("an evening row landed in the next day's file: %q", l)
				}
			}
			if tc.compress {
				first := readLines(t, filepath.Join(dir, "gpu0-unknown-deep-2026-12-01.csv.gz"))
				if len(first) != 2 || !strings.HasPrefix(first[1], string(AppendTimestamp(nil, tc.first))) {
					t.Errorf("the compressed day changed: %q", first)
				}
			}
		})
	}
}

// TestCSVStepBackToADayLeftWithItsGz: a day left as both .csv and .csv.gz
// (a compression not finished: adoptGz) is compressed already: a row the
// clock steps back to it goes to a new part, not into the .csv, which
// would then differ from its .gz and keep the adoption from ever finishing.
func TestCSVStepBackToADayLeftWithItsGz(t *testing.T) {
	dir := t.TempDir()
	now := time.Date(2026, 12, 1, 22, 0, 0, 0, cet)
	c, write := clockedCSV(t, dir, now, CSVConfig{})
	write(now)
	write(time.Date(2026, 12, 2, 0, 0, 10, 0, cet)) // midnight: 12-01 finished
	day := filepath.Join(dir, "gpu0-unknown-deep-2026-12-01.csv")
	plain, err := os.ReadFile(day)
	if err != nil {
		t.Fatal(err)
	}
	cp := filepath.Join(t.TempDir(), filepath.Base(day))
	os.WriteFile(cp, plain, 0o644)
	if err := CompressFile(cp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(cp+".gz", day+".gz"); err != nil {
		t.Fatal(err)
	}
	write(time.Date(2026, 12, 1, 23, 0, 0, 0, cet)) // the clock steps back
	c.Close()
	if after, _ := os.ReadFile(day); !bytes.Equal(after, plain) {
		t.Errorf("a row was appended to the .csv beside its .gz")
	}
	if l := readLines(t, filepath.Join(dir, "gpu0-unknown-deep-2026-12-01_2.csv")); len(l) != 2 || !strings.HasPrefix(l[1], "2026-12-01T23:00") {
		t.Errorf("part 2: %q, want the stepped-back row", l)
	}
	days, err := ListDays(dir, cet)
	if err != nil || len(days) != 3 || days[0].Path != day || days[1].Part != 2 {
		t.Errorf("ListDays: %+v, %v; want 12-01's .csv, its part 2, then 12-02", days, err)
	}
}

// waitCompressed waits until path was replaced by path.gz (compression
// runs on its own goroutine after the rotation).
func waitCompressed(t *testing.T, path string) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if exists(path+".gz") && !exists(path) {
			return
		}
	}
	t.Fatalf("%s was not compressed", path)
}

// TestCSVClockStepBackWithinADay: a step back of the clock by more than
// lateRowSlack within a day starts a new part, so that each file stays in
// time order (report finds its window by binary search); a smaller one
// (a late sample) stays in the file.
func TestCSVClockStepBackWithinADay(t *testing.T) {
	dir := t.TempDir()
	c := newTestCSV(t, dir, CSVConfig{})
	s := fullSample()
	var want1, want2 []string
	for i, tm := range []time.Time{
		time.Date(2026, 12, 1, 10, 0, 0, 0, cet),
		time.Date(2026, 12, 1, 10, 0, 1, 0, cet),
		time.Date(2026, 12, 1, 9, 59, 30, 0, cet), // 31 s late: stays
		time.Date(2026, 12, 1, 9, 0, 0, 0, cet),   // an hour back: a new part
		time.Date(2026, 12, 1, 9, 0, 1, 0, cet),
	} {
		s.Time = tm
		if err := c.Write(&s); err != nil {
			t.Fatal(err)
		}
		if i < 3 {
			want1 = append(want1, string(AppendTimestamp(nil, tm)))
		} else {
			want2 = append(want2, string(AppendTimestamp(nil, tm)))
		}
	}
	c.Close()
	for _, f := range []struct {
		name string
		want []string
	}{{"gpu0-unknown-deep-2026-12-01.csv", want1}, {"gpu0-unknown-deep-2026-12-01_2.csv", want2}} {
		lines := readLines(t, filepath.Join(dir, f.name))
		checkTable(t, f.name, lines)
		var got []string
		for _, l := range lines[1:] {
			got = append(got, l[:strings.IndexByte(l, ',')])
		}
		if strings.Join(got, " ") != strings.Join(f.want, " ") {
			t.Errorf("%s: rows %q, want %q", f.name, got, f.want)
		}
	}
}

// syncFailFile is a file whose fsync fails, as on a disk gone bad.
type syncFailFile struct{ *os.File }

func (f syncFailFile) Sync() error { return syscall.EIO }

// TestReopenCountsSyncErrors: the fsync of a file closed by SIGHUP is
// counted like every other (sync_errors), not dropped, once it has run (on
// a goroutine of its own): the count is read before Close, whose own leave
// of a file still open would fail the same fsync and count it too.
func TestReopenCountsSyncErrors(t *testing.T) {
	dir := t.TempDir()
	c := newTestCSV(t, dir, CSVConfig{wrap: func(f *os.File) file { return syncFailFile{f} }})
	s := fullSample()
	if err := c.Write(&s); err != nil {
		t.Fatal(err)
	}
	c.Reopen()
	if n := c.leaving.wait(10 * time.Second); n > 0 {
		t.Fatalf("the reopen's fsync still running after 10s")
	}
	if got := c.Stats().SyncErrors; got != 1 {
		t.Errorf("sync_errors after a failed fsync at reopen: %d, want 1", got)
	}
}

// TestReopenDoesNotWaitOnAStuckFsync: SIGHUP lets the files go as midnight
// does (leave): on a disk that stopped answering, Reopen returns at once
// (it runs on the signals goroutine, which also answers SIGUSR1), and
// Close waits for that fsync within its bound, then counts it as abandoned.
// Before, Reopen synced inline: it waited for as long as the disk did not
// answer, and Close neither waited for nor counted that fsync.
func TestReopenDoesNotWaitOnAStuckFsync(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	c := newTestCSV(t, t.TempDir(), CSVConfig{
		wrap: func(f *os.File) file { return stuckSyncFile{File: f, release: release} }})
	s := fullSample()
	if err := c.Write(&s); err != nil {
		t.Fatal(err)
	}
	reopened := make(chan struct{})
	go func() { c.Reopen(); close(reopened) }()
	select {
	case <-reopened:
	case <-time.After(30 * time.Second):
		t.Fatal("Reopen still waits on an fsync that never returns after 30s")
	}
	if err := c.Close(); err == nil {
		t.Error("Close returned no error with the reopen's fsync abandoned")
	}
	if got := c.Stats().SyncErrors; got != 1 {
		t.Errorf("sync_errors after Close abandoned the reopen's fsync: %d, want 1", got)
	}
}

// TestCSVCloseAbandonsAStuckDirectoryFsync: a file created in the last tick
// (midnight, a new column set, a late GPU) leaves a directory fsync to do,
// in the background goroutine's round or in Close. On a disk that never
// answers, Close still returns within its bound, and the abandoned fsync is
// counted and returned. Before, Close waited for the background goroutine
// and ran its own directory fsync without a bound.
func TestCSVCloseAbandonsAStuckDirectoryFsync(t *testing.T) {
	for _, tc := range []struct {
		name string
		tick bool // the background goroutine's round takes the directory fsync
	}{
		{"in the background round", true},
		{"in Close", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			release, entered := make(chan struct{}), make(chan struct{}, 1)
			defer close(release)
			tick := make(chan time.Time)
			c := newTestCSV(t, t.TempDir(), CSVConfig{Tick: tick, syncDir: func(string) error {
				select {
				case entered <- struct{}{}:
				default:
				}
				<-release
				return nil
			}})
			s := fullSample()
			if err := c.Write(&s); err != nil { // creates the file: a new directory entry
				t.Fatal(err)
			}
			if tc.tick {
				tick <- time.Now()
				<-entered
			}
			closeAbandonsOne(t, c, "a directory fsync that never returns")
		})
	}
}

// TestCSVCloseWaitsForAFinishedDayQueued: a day finished at midnight is
// released and queued for compression before its sync counts as done, so
// Close, which waits for it, does not close the compressor while the part
// is still to be handed over. Before, the sync was reported done first, and
// Close could return while the part was still held.
func TestCSVCloseWaitsForAFinishedDayQueued(t *testing.T) {
	release := make(chan struct{})
	dir := t.TempDir()
	c := newTestCSV(t, dir, CSVConfig{Compress: true,
		Now:  func() time.Time { return time.Date(2026, 11, 30, 1, 0, 0, 0, cet) },
		wrap: func(f *os.File) file { return stuckSyncFile{File: f, release: release} }})
	s := fullSample()
	if err := c.Write(&s); err != nil {
		t.Fatal(err)
	}
	s.Time = time.Date(2026, 11, 30, 0, 0, 1, 0, cet)
	if err := c.Write(&s); err != nil { // midnight: the first day is let go of, its fsync stuck
		t.Fatal(err)
	}
	c.gz.mu.Lock() // holds up the parts' release, after their fsyncs
	closed := make(chan error, 1)
	go func() { closed <- c.Close() }()
	close(release)
	select {
	case <-closed:
		c.gz.mu.Unlock()
		t.Fatal("Close returned while a part it let go of was still to be released and queued for compression")
	case <-time.After(200 * time.Millisecond):
	}
	c.gz.mu.Unlock()
	if err := <-closed; err != nil {
		t.Fatalf("Close: %v", err)
	}
	c.gz.mu.Lock()
	defer c.gz.mu.Unlock()
	if len(c.gz.held) > 0 {
		t.Errorf("parts still held after Close: %v", c.gz.held)
	}
}

// slowSyncFile is a file whose fsync takes a while and then fails, as on a
// slow disk going bad; synced is closed when the fsync has returned.
type slowSyncFile struct {
	*os.File
	synced chan struct{}
	once   *sync.Once
}

func (f slowSyncFile) Sync() error {
	time.Sleep(50 * time.Millisecond)
	f.once.Do(func() { close(f.synced) })
	return syscall.EIO
}

// TestCSVCloseWaitsForALeftPart: a part let go of before Close (a new
// column set) is synced on a goroutine of its own; Close returns only once
// that fsync is done, so its outcome is in Stats (sync_errors) when the
// final summary reads them and no row of it is still only in the page
// cache when the process exits.
func TestCSVCloseWaitsForALeftPart(t *testing.T) {
	dir := t.TempDir()
	synced := make(chan struct{})
	var once sync.Once
	c, err := NewCSV(CSVConfig{Counters: counters.New(), Dir: dir, FreeBytes: func(string) (uint64, error) { return 1 << 40, nil },
		wrap: func(f *os.File) file { return slowSyncFile{File: f, synced: synced, once: &once} }},
		[]GPUColumns{{Index: 1, Fans: 0}})
	if err != nil {
		t.Fatal(err)
	}
	s := fullSample()
	s.GPU, s.NumFans = 1, 0
	if err := c.Write(&s); err != nil {
		t.Fatal(err)
	}
	c.SetGPU(GPUColumns{Index: 1, Fans: 2}) // the part is let go of, synced on its own goroutine
	c.Close()                               // no file open: nothing of its own to sync
	select {
	case <-synced:
	default:
		t.Fatal("Close returned before the fsync of the part it let go of")
	}
	if got := c.Stats().SyncErrors; got != 1 {
		t.Errorf("sync_errors after Close: %d, want 1 (the left part's failed fsync)", got)
	}
}

// stuckSyncFile is a file on a disk that stopped answering: its fsync
// returns only once release is closed.
type stuckSyncFile struct {
	*os.File
	release chan struct{}
}

func (f stuckSyncFile) Sync() error {
	<-f.release
	return f.File.Sync()
}

// TestCSVCloseAbandonsAStuckFsync: Close's last fsync of an open file is
// bounded: on a disk that never answers, Close returns (the daemon's exit
// goes on: the summary, nvmlShutdown), and the abandoned fsync is counted
// in sync_errors, logged, and returned. Before, Close waited on it for as
// long as the disk did not answer, until systemd killed the daemon.
func TestCSVCloseAbandonsAStuckFsync(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	var logs testutil.LogBuf
	c := newTestCSV(t, t.TempDir(), CSVConfig{Logger: logs.Logger(),
		wrap: func(f *os.File) file { return stuckSyncFile{File: f, release: release} }})
	s := fullSample()
	if err := c.Write(&s); err != nil {
		t.Fatal(err)
	}
	closeAbandonsOne(t, c, "an fsync that never returns")
	if !strings.Contains(logs.String(), "abandoned") {
		t.Errorf("the abandoned fsync is not logged:\n%s", logs.String())
	}
}

// TestCSVCloseAbandonsAStuckCompression: a compression stuck on a disk that
// stopped answering (here its write; its fsync or the directory's alike)
// does not hold up Close past its bound: it is abandoned, logged and
// returned (not counted: its .csv stays), and the next start removes its
// temp file and compresses the day again. Before, Close waited for it
// without a bound, and the daemon's final summary line and clean-stop
// marker waited behind it until systemd killed the daemon.
func TestCSVCloseAbandonsAStuckCompression(t *testing.T) {
	dir := t.TempDir()
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.Local)
	name := FileName(0, UnknownBoard, now.AddDate(0, 0, -1))
	day := filepath.Join(dir, name)
	if err := os.WriteFile(day, []byte("timestamp\nrow\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	release, entered := make(chan struct{}), make(chan struct{})
	var once sync.Once
	c := newTestCSV(t, dir, CSVConfig{Compress: true, Now: func() time.Time { return now },
		gzOps: FileOps{Write: func(f *os.File, p []byte) (int, error) {
			once.Do(func() { close(entered) })
			<-release
			return f.Write(p)
		}}})
	gz := c.gz
	t.Cleanup(func() { // before the directory is removed
		close(release)
		<-gz.done
	})
	select {
	case <-entered:
	case <-time.After(30 * time.Second):
		t.Fatal("the compression did not start")
	}
	err := closeBounded(t, c.Close, "a compression stuck on the disk")
	if err == nil {
		t.Error("Close returned no error with the compression abandoned")
	}
	if got := c.Stats().SyncErrors; got != 0 {
		t.Errorf("sync_errors after Close abandoned the compression: %d, want 0 (nothing is lost: the .csv stays)", got)
	}
	if _, err := os.Stat(day); err != nil {
		t.Errorf("the day being compressed is gone after the compression was abandoned: %v", err)
	}
	tmps, _ := filepath.Glob(filepath.Join(dir, "."+name+".gz.tmp*"))
	if len(tmps) != 1 {
		t.Fatalf("temp files of the stuck compression: %v, want 1", tmps)
	}
	next := newTestCSV(t, dir, CSVConfig{Compress: true, Now: func() time.Time { return now }})
	if _, err := os.Stat(tmps[0]); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the next start left the abandoned compression's temp file %s: %v", tmps[0], err)
	}
	if !next.gz.wait(10 * time.Second) {
		t.Fatal("the next start's compression did not finish")
	}
	if _, err := os.Stat(day + ".gz"); err != nil {
		t.Errorf("the next start did not compress the day again: %v", err)
	}
}

// TestCSVCloseBoundFromItsStart: Close's bound runs from its start, not
// from when it has let every file go: here a row's write holds a GPU's
// lock for most of the bound (the leave waits for it) while the background
// goroutine is stuck in its free-space check on a disk that stopped
// answering. Before, the wait for the background goroutine began after the
// files were let go of and Close took that long plus the whole bound.
func TestCSVCloseBoundFromItsStart(t *testing.T) {
	release, entered := make(chan struct{}), make(chan struct{})
	var stall atomic.Bool
	tick := make(chan time.Time)
	c := newTestCSV(t, t.TempDir(), CSVConfig{Tick: tick, MinFreeMB: 1, DiskCheckEvery: time.Nanosecond,
		FreeBytes: func(string) (uint64, error) {
			if stall.Load() {
				close(entered)
				<-release
			}
			return 1 << 40, nil
		}})
	t.Cleanup(func() { close(release) })
	stall.Store(true)
	tick <- time.Now()
	<-entered
	gf := c.files[0]
	gf.mu.Lock() // a row's write in progress
	hold := closeSyncBound * 8 / 10
	started, closed := make(chan time.Time, 1), make(chan error, 1)
	go func() {
		started <- time.Now() // Close's own start: a goroutine scheduled late on a busy machine is not Close's time
		closed <- c.Close()
	}()
	start := <-started
	time.Sleep(hold)
	gf.mu.Unlock()
	select {
	case <-closed:
	case <-time.After(30 * time.Second):
		t.Fatal("Close still waits on a background goroutine stuck in its free-space check after 30s")
	}
	if d, max := time.Since(start), closeSyncBound+closeSyncBound*4/10; d > max {
		t.Errorf("Close returned %v after its start, want within its bound %v (and a margin: %v)", d, closeSyncBound, max)
	}
}

// stuckWriteFile is a file on a disk that stopped answering writes: once
// stall is set, a Write tells entered and returns only once release is
// closed, and a Sync fails (the disk lost what it held).
type stuckWriteFile struct {
	*os.File
	stall   *atomic.Bool
	entered chan struct{}
	release chan struct{}
}

func (f stuckWriteFile) Sync() error {
	if f.stall.Load() {
		return syscall.EIO
	}
	return f.File.Sync()
}

func (f stuckWriteFile) Write(b []byte) (int, error) {
	if f.stall.Load() {
		select {
		case f.entered <- struct{}{}:
		default:
		}
		<-f.release
	}
	return f.File.Write(b)
}

// TestCSVCloseAbandonsAFileWithAStuckWrite: a row write stuck on a stalled
// disk holds its file's lock; Close does not wait on that lock past its
// bound: the file is abandoned like a stuck fsync (counted in sync_errors
// once, logged, returned), and when the write returns at last its row is
// refused (Close counted it: TestCSVRowStuckAtCloseIsCountedByClose) and
// the file is let go of without a second count (its late fsync fails: Close counted
// it already), and later rows are refused. Before,
// Close took every file's lock inline and waited on it for as long as the
// disk did not answer, until systemd killed the daemon.
func TestCSVCloseAbandonsAFileWithAStuckWrite(t *testing.T) {
	var logs testutil.LogBuf
	left := make(chan struct{}, 8)
	c, s, _, wrote, unstick := stuckRow(t, t.TempDir(), CSVConfig{Logger: logs.Logger(),
		leaveDone: func() { left <- struct{}{} }})
	closeAbandonsOne(t, c, "a file whose row write never returns")
	if !strings.Contains(logs.String(), "row write to a CSV still running at close") {
		t.Errorf("the abandoned file is not logged:\n%s", logs.String())
	}
	unstick()
	if err := <-wrote; !errors.Is(err, errClosed) {
		t.Errorf("the stuck write, once the disk answers: %v, want errClosed (Close gave up on its row)", err)
	}
	gf := c.files[s.GPU]
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		gf.mu.Lock()
		open := gf.f != nil
		gf.mu.Unlock()
		if !open {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the abandoned file is still open 10s after its write returned")
		}
	}
	if err := c.Write(&s); !errors.Is(err, errClosed) {
		t.Errorf("a row after Close: %v, want errClosed", err)
	}
	select {
	case <-left: // the late leave's sync (it fails) and close are done
	case <-time.After(10 * time.Second):
		t.Fatal("the abandoned file's leave did not end 10s after its write returned")
	}
	if got := c.Stats().SyncErrors; got != 1 {
		t.Errorf("sync_errors once the abandoned file was let go of: %d, want 1 (counted once, by Close)", got)
	}
}

// TestCSVRowStuckAtCloseIsCountedByClose: a row whose write is stuck on a
// stalled disk when Close gives up on its file is counted by Close, in
// rows_dropped, before Close returns (the final summary.log line follows
// it); when the write returns at last the row is refused: nothing more is
// counted, and it is cut back out of the file, which holds what the counts
// say. Before, it was counted in rows_written when its write returned,
// after the final summary: the summary's counts and the logger's
// disagreed, silently.
func TestCSVRowStuckAtCloseIsCountedByClose(t *testing.T) {
	dir := t.TempDir()
	c, s, stall, wrote, unstick := stuckRow(t, dir, CSVConfig{})
	closeAbandonsOne(t, c, "a file whose row write never returns")
	atClose := c.Stats()
	if atClose.Written != 1 || atClose.Dropped != 1 {
		t.Errorf("when Close returned: rows_written %d, rows_dropped %d; want 1 (the row before) and 1 (the stuck row Close gave up on)",
			atClose.Written, atClose.Dropped)
	}
	stall.Store(false) // the disk answers: the write goes through
	unstick()
	if err := <-wrote; !errors.Is(err, errClosed) {
		t.Errorf("the row whose write returned after Close gave up on it: %v, want errClosed", err)
	}
	if st := c.Stats(); st.Written != atClose.Written || st.Dropped != atClose.Dropped {
		t.Errorf("counted after Close returned: rows_written %d -> %d, rows_dropped %d -> %d",
			atClose.Written, st.Written, atClose.Dropped, st.Dropped)
	}
	if got := readLines(t, filepath.Join(dir, FileName(0, UnknownBoard, s.Time))); len(got) != 2 {
		t.Errorf("the file has %d lines, want header + the row before (the refused row cut back out)", len(got))
	}
}

// holdingHandler is a log handler that holds up the record whose message
// holds msg (a record to a stderr nobody reads) until release is closed,
// telling entered; the others go to out.
type holdingHandler struct {
	slog.Handler
	msg              string
	entered, release chan struct{}
}

func (h holdingHandler) Handle(ctx context.Context, r slog.Record) error {
	if strings.Contains(r.Message, h.msg) {
		close(h.entered)
		<-h.release
	}
	return h.Handler.Handle(ctx, r)
}

// failingFile is a CSV file on a disk whose writes fail (EIO) while fail
// is set, and whose truncates fail when truncFails is set.
type failingFile struct {
	*os.File
	fail, truncFails *atomic.Bool
}

func (f failingFile) Write(b []byte) (int, error) {
	if f.fail.Load() {
		return 0, syscall.EIO
	}
	return f.File.Write(b)
}

func (f failingFile) Truncate(n int64) error {
	if f.truncFails.Load() {
		return syscall.EIO
	}
	return f.File.Truncate(n)
}

// TestCSVRowWrittenAsCloseGivesUpIsCounted: a row whose write went through
// is counted in rows_written before its Write does anything that may block
// (its "writes work again" record, to a stderr that may not be read): a
// Close that gives up meanwhile finds it counted, and the final summary
// holds it. Before, the row was counted written only after that record:
// Close's count of the rows it gave up on missed it (its write had ended),
// the summary went out without it, and rows_written rose after.
func TestCSVRowWrittenAsCloseGivesUpIsCounted(t *testing.T) {
	var logs testutil.LogBuf
	out := holdingHandler{Handler: slog.NewTextHandler(&logs, nil), msg: "CSV writes work again",
		entered: make(chan struct{}), release: make(chan struct{})}
	var fail, never atomic.Bool
	c := newTestCSV(t, t.TempDir(), CSVConfig{Logger: slog.New(out),
		wrap: func(f *os.File) file { return failingFile{File: f, fail: &fail, truncFails: &never} }})
	var once sync.Once
	release := func() { once.Do(func() { close(out.release) }) }
	t.Cleanup(release) // before Close's (cleanups run last first)
	s := fullSample()
	fail.Store(true)
	if err := c.Write(&s); err == nil {
		t.Fatal("a row written to a disk that fails")
	}
	fail.Store(false)
	wrote := make(chan error, 1)
	go func() { s := s; wrote <- c.Write(&s) }()
	<-out.entered // the row is in the file; its Write holds the file's lock
	closeAbandonsOne(t, c, "a file whose row write has not ended")
	atClose := c.Stats()
	if atClose.Written != 1 || atClose.Dropped != 1 {
		t.Errorf("when Close returned: rows_written %d, rows_dropped %d; want 1 (the row in the file) and 1 (the failed one)",
			atClose.Written, atClose.Dropped)
	}
	release()
	if err := <-wrote; err != nil {
		t.Errorf("the row: %v", err)
	}
	if st := c.Stats(); st.Written != atClose.Written || st.Dropped != atClose.Dropped {
		t.Errorf("counted after Close returned: rows_written %d -> %d, rows_dropped %d -> %d",
			atClose.Written, st.Written, atClose.Dropped, st.Dropped)
	}
}

// TestCSVCutBackFailureLogged: a file that cannot be cut back after a
// failed write (its truncate fails too: a disk in trouble) is closed and
// reopened (and repaired) at the next row; that is logged, the first time
// only. Before, nothing was logged: a row refused at Close, cut back this
// way, stayed in the file while counted dropped, silently.
func TestCSVCutBackFailureLogged(t *testing.T) {
	var logs testutil.LogBuf
	var fail, truncFails atomic.Bool
	dir := t.TempDir()
	c := newTestCSV(t, dir, CSVConfig{Logger: logs.Logger(),
		wrap: func(f *os.File) file { return failingFile{File: f, fail: &fail, truncFails: &truncFails} }})
	s := fullSample()
	if err := c.Write(&s); err != nil {
		t.Fatal(err)
	}
	fail.Store(true)
	truncFails.Store(true)
	for range 2 {
		if err := c.Write(&s); err == nil {
			t.Fatal("a row written to a disk that fails")
		}
	}
	path := filepath.Join(dir, FileName(0, UnknownBoard, s.Time))
	if n := strings.Count(logs.String(), "cannot cut a CSV back"); n != 1 {
		t.Errorf("the failed cut back logged %d times, want once:\n%s", n, logs.String())
	}
	testutil.Contains(t, "log", logs.String(), "path="+path, "input/output error")
}

// stuckRow opens the CSVs in dir and writes a row of GPU 0 (s), then
// another whose write is stuck on a disk that stopped answering
// (stuckWriteFile), holding the file's lock; stall is that disk's state.
// unstick lets the write return, its error on wrote.
func stuckRow(t *testing.T, dir string, cfg CSVConfig) (c *CSV, s reading.Sample, stall *atomic.Bool, wrote chan error, unstick func()) {
	t.Helper()
	stall = new(atomic.Bool)
	entered, release := make(chan struct{}, 1), make(chan struct{})
	var releaseOnce sync.Once
	unstick = func() { releaseOnce.Do(func() { close(release) }) }
	t.Cleanup(unstick) // before Close's (cleanups run last first)
	cfg.wrap = func(f *os.File) file {
		return stuckWriteFile{File: f, stall: stall, entered: entered, release: release}
	}
	c = newTestCSV(t, dir, cfg)
	s = fullSample()
	if err := c.Write(&s); err != nil {
		t.Fatal(err)
	}
	stall.Store(true)
	wrote = make(chan error, 1)
	go func() { s := s; wrote <- c.Write(&s) }()
	<-entered
	return c, s, stall, wrote, unstick
}

// returnsSoon fails t unless f returns within a generous deadline.
func returnsSoon(t *testing.T, f func(), what string) {
	t.Helper()
	done := make(chan struct{})
	go func() { f(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatalf("%s still waits on a row write stuck on the disk after 30s", what)
	}
}

// TestReopenDoesNotWaitOnAStuckWrite: SIGHUP's Reopen runs on the signals
// goroutine, which also answers SIGUSR1; a row write stuck on a stalled
// disk holds its file's lock, and Reopen returns without it. The file is
// let go of once that write returns, before the next row, which goes to
// the file by its name (logrotate moved the old one), whether that row or
// the goroutine waiting to let it go takes the lock first (handOrders).
// Before, Reopen took each file's lock inline and waited for as long as
// the disk did not answer.
func TestReopenDoesNotWaitOnAStuckWrite(t *testing.T) {
	for _, order := range handOrders {
		t.Run(order, func(t *testing.T) {
			dir := t.TempDir()
			cfg := CSVConfig{Tick: make(chan time.Time)} // no background round takes the lock
			release := holdWaiter(&cfg)
			c, s, stall, wrote, unstick := stuckRow(t, dir, cfg)
			t.Cleanup(release)
			path := filepath.Join(dir, FileName(0, UnknownBoard, s.Time))
			if err := os.Rename(path, path+".moved"); err != nil {
				t.Fatal(err)
			}
			returnsSoon(t, c.Reopen, "Reopen")
			stuckThenNextRow(t, c, &s, stall, wrote, unstick, order, release)
			if got := readLines(t, path); len(got) != 2 {
				t.Errorf("the file reopened by name has %d lines, want header + the row after the reopen", len(got))
			}
			if got := readLines(t, path+".moved"); len(got) != 3 {
				t.Errorf("the moved file has %d lines, want header + the row before + the stuck row", len(got))
			}
			if got := c.Stats().SyncErrors; got != 0 {
				t.Errorf("sync_errors: %d, want 0", got)
			}
		})
	}
}

// stuckThenNextRow lets stuckRow's write return, writes the next row a
// second later in order (nextRow) and closes c.
func stuckThenNextRow(t *testing.T, c *CSV, s *reading.Sample, stall *atomic.Bool, wrote chan error, unstick func(), order string, release func()) {
	t.Helper()
	stall.Store(false)
	unstick()
	if err := <-wrote; err != nil {
		t.Fatalf("the stuck write, once the disk answers: %v", err)
	}
	s.Time = s.Time.Add(time.Second)
	nextRow(t, c, order, release, func() error { return c.Write(s) })
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
}

// handOrders are the orders in which the work withLock queued behind a
// row write stuck on the disk can run once that write returns: the next
// row takes the lock first and runs it before its own write (withLock's
// goroutine held back until then), or that goroutine does, before the row.
var handOrders = []string{"next row first", "waiting goroutine first"}

// nextRow writes the next row (row) after a stuck row write returned, in
// order (handOrders); release lets withLock's goroutine go (holdWaiter).
func nextRow(t *testing.T, c *CSV, order string, release func(), row func() error) {
	t.Helper()
	if order == handOrders[1] {
		release()
		if !testutil.WaitUntil(30*time.Second, func() bool { return !c.files[0].stuck() }) {
			t.Fatal("the goroutine waiting for the lock has not run its work 30s after the stuck write returned")
		}
	}
	if err := row(); err != nil {
		t.Fatal(err)
	}
	release()
}

// TestCloseCountsAFileAReopenWaitsOnOnce: a SIGHUP's Reopen left a file
// whose row write is stuck, and Close abandons it at its bound as it does
// without the SIGHUP: counted in sync_errors once (the reopen's wait and
// Close's are the same), logged with its GPU, returned.
func TestCloseCountsAFileAReopenWaitsOnOnce(t *testing.T) {
	var logs testutil.LogBuf
	c, _, _, wrote, unstick := stuckRow(t, t.TempDir(), CSVConfig{Logger: logs.Logger()})
	returnsSoon(t, c.Reopen, "Reopen")
	returnsSoon(t, c.Reopen, "a second Reopen")
	closeAbandonsOne(t, c, "a file whose row write never returns, after a SIGHUP")
	if !strings.Contains(logs.String(), `row write to a CSV still running at close`) || !strings.Contains(logs.String(), "gpus=[0]") {
		t.Errorf("the abandoned file is not logged with its GPU:\n%s", logs.String())
	}
	unstick()
	<-wrote
}

// TestSetGPUDoesNotWaitOnAStuckWrite: SetGPU runs on the GPU's worker,
// while the GPU's queued rows (a hang's) are written on another goroutine;
// a row write stuck on a stalled disk holds the file's lock, and SetGPU
// returns without it. The new board and columns apply once that write
// returns, from the next row on, whether that row or the goroutine waiting
// to apply them takes the lock first (handOrders). Before, SetGPU waited
// on the lock for as long as the disk did not answer, and the GPU was
// sampled no more.
func TestSetGPUDoesNotWaitOnAStuckWrite(t *testing.T) {
	for _, order := range handOrders {
		t.Run(order, func(t *testing.T) {
			dir := t.TempDir()
			cfg := CSVConfig{Tick: make(chan time.Time)} // no background round takes the lock
			release := holdWaiter(&cfg)
			c, s, stall, wrote, unstick := stuckRow(t, dir, cfg)
			t.Cleanup(release)
			board := Board{UUID: "GPU-5e1f0c2a-0000-4000-8000-000000000001"}
			returnsSoon(t, func() { c.SetGPU(GPUColumns{Index: 0, Fans: 1, Board: board}) }, "SetGPU")
			stuckThenNextRow(t, c, &s, stall, wrote, unstick, order, release)
			if got := readLines(t, filepath.Join(dir, FileName(0, UnknownBoard, s.Time))); len(got) != 3 {
				t.Errorf("the file before SetGPU has %d lines, want header + 2 rows", len(got))
			}
			got := readLines(t, filepath.Join(dir, FileName(0, board.ID(), s.Time)))
			if len(got) != 2 || got[0]+"\n" != string(Header(1)) {
				t.Errorf("the board's file: %q, want the 1-fan header and the row after SetGPU", got)
			}
		})
	}
}

// TestHaltedCompressorStartsNoNewFile: a compression queued when Close
// halts the compressor is not started (the disk may have stalled; the day
// is compressed at the next start), even when the queue and the halt are
// both ready at once, where select picks either at random.
func TestHaltedCompressorStartsNoNewFile(t *testing.T) {
	for i := range 20 {
		dir := t.TempDir()
		day := filepath.Join(dir, FileName(0, UnknownBoard, time.Date(2026, 11, 28, 0, 0, 0, 0, time.Local)))
		if err := os.WriteFile(day, []byte("timestamp\nrow\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		var logs testutil.LogBuf
		z := &compressor{log: logs.Logger(), queued: map[string]bool{}, held: map[string]int{}, kept: map[string]bool{},
			work: make(chan string, 1), stop: make(chan struct{}), done: make(chan struct{})}
		z.add(day)
		z.halt()
		z.run() // returns at once: halted
		if _, err := os.Stat(day + ".gz"); err == nil || strings.Contains(logs.String(), "compress") {
			t.Fatalf("round %d: a compression queued before the halt was started after it: %s", i, logs.String())
		}
	}
}

// TestLiveCompressionTempNotSwept: the temp files of compressions left by
// an earlier run are swept when the CSVs open, not at a later pass, where
// one of this run's compressions (queued by another GPU's midnight between
// the check and the sweep) could be writing its own.
func TestLiveCompressionTempNotSwept(t *testing.T) {
	dir := t.TempDir()
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.Local)
	tmp := func(day time.Time) string {
		return filepath.Join(dir, "."+FileName(0, UnknownBoard, day)+".gz.tmp-1")
	}
	earlier := tmp(now.AddDate(0, 0, -2))
	if err := os.WriteFile(earlier, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	c := newTestCSV(t, dir, CSVConfig{Compress: true, Now: func() time.Time { return now }})
	if _, err := os.Stat(earlier); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("an earlier run's temp file is still there after the CSVs opened: %v", err)
	}
	live := tmp(now.AddDate(0, 0, -1))
	if err := os.WriteFile(live, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	c.housekeeping(now)
	if _, err := os.Stat(live); err != nil {
		t.Errorf("a later housekeeping pass removed a compression's temp file: %v", err)
	}
}

// closeBounded runs close, failing the test when it has not returned after
// 30 s (a deadline for the test, far above closeSyncBound): Close is still
// waiting on what (a stuck fsync, write or compression).
func closeBounded(t *testing.T, close func() error, what string) error {
	t.Helper()
	closed := make(chan error, 1)
	go func() { closed <- close() }()
	select {
	case err := <-closed:
		return err
	case <-time.After(30 * time.Second):
		t.Fatalf("Close still waits on %s after 30s (bound %v)", what, closeSyncBound)
		return nil
	}
}

// closeAbandonsOne closes c (closeBounded) and checks that it gave up on
// what (one fsync or file): returned an error and counted it once in
// sync_errors.
func closeAbandonsOne(t *testing.T, c *CSV, what string) {
	t.Helper()
	if err := closeBounded(t, c.Close, what); err == nil {
		t.Errorf("Close returned no error with %s abandoned", what)
	}
	if got := c.Stats().SyncErrors; got != 1 {
		t.Errorf("sync_errors after Close abandoned %s: %d, want 1", what, got)
	}
}

// clockedCSV opens the CSVs in dir on a clock that starts at start; write
// sets the clock to tm and writes a full row stamped tm.
func clockedCSV(t *testing.T, dir string, start time.Time, cfg CSVConfig) (*CSV, func(tm time.Time)) {
	var mu sync.Mutex
	now := start
	cfg.Now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	c := newTestCSV(t, dir, cfg)
	s := fullSample()
	return c, func(tm time.Time) {
		t.Helper()
		mu.Lock()
		now = tm
		mu.Unlock()
		s.Time = tm
		if err := c.Write(&s); err != nil {
			t.Fatal(err)
		}
	}
}
