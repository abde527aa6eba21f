package sink

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/internal/counters"
	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

// CSVConfig configures the per-GPU CSV files.
type CSVConfig struct {
	Dir string
	// RetentionDays: files of days older than this are deleted. Default 14.
	RetentionDays int
	// FsyncEvery bounds how many rows a power loss can take: dirty files are
	// fsync'ed this often. Default 1 s.
	FsyncEvery time.Duration
	// MinFreeMB: below this much free space rows are not written (and
	// counted as dropped) until space returns. Default 500.
	MinFreeMB uint64
	// DiskCheckEvery is how often free space is checked while rows are
	// written. Default 10 s. While rows are paused, space is checked on
	// every FsyncEvery tick, so rows resume within a tick of space returning.
	DiskCheckEvery time.Duration
	// RingRows is how many recent rows per GPU are kept in memory for
	// snapshots (the file may be behind or unreadable). Default 50.
	RingRows int
	// Compress gzips finished days in the background.
	Compress bool
	// Now is the clock for retention. Default time.Now.
	Now func() time.Time
	// FreeBytes reports free space for the directory. Default statfs.
	FreeBytes func(dir string) (uint64, error)
	// Tick, when set, paces the periodic round (the sync of dirty files and
	// the disk check): it runs once per value received, and the sender
	// keeps to FsyncEvery. The logger sends from its poll loop, so the
	// round runs while the process is awake for a tick instead of waking it
	// on a timer of its own. Nil: a ticker every FsyncEvery.
	Tick   <-chan time.Time
	Logger *slog.Logger
	// Counters is the registry the writer counts in (counters.go). Required.
	Counters *counters.Registry

	// wrap lets tests put a failing writer around the opened file.
	wrap func(*os.File) file
	// syncDir fsyncs the directory (SyncDir); tests stall it.
	syncDir func(string) error
	// gzOps are the compressor's file calls; tests stall its writes.
	gzOps FileOps
	// leaveDone, when set, is called as each leave's goroutine ends (tests
	// wait on it for a file let go of after Close).
	leaveDone func()
	// hold, when set, is called at each step of withLock's hand-off
	// (handStep), so that tests pause a goroutine there.
	hold func(handStep)
}

// handStep names a step of withLock's hand-off of work to whoever holds a
// file's lock (CSVConfig.hold).
type handStep int

const (
	handBusy   handStep = iota // withLock queued work and found mu held, before it decides who runs it
	handTaken                  // a holder of mu took a batch of queued work, before running it
	handWaiter                 // withLock's goroutine, before it waits for mu
)

// step calls the tests' hold, if set.
func (c *CSV) step(at handStep) {
	if c.cfg.hold != nil {
		c.cfg.hold(at)
	}
}

// file is what the CSV writer needs of an open file.
type file interface {
	Write([]byte) (int, error)
	Sync() error
	Close() error
	Truncate(int64) error
}

func (c *CSVConfig) defaults() {
	if c.RetentionDays <= 0 {
		c.RetentionDays = 14
	}
	if c.FsyncEvery <= 0 {
		c.FsyncEvery = time.Second
	}
	if c.DiskCheckEvery <= 0 {
		c.DiskCheckEvery = 10 * time.Second
	}
	if c.RingRows <= 0 {
		c.RingRows = 50
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.FreeBytes == nil {
		c.FreeBytes = statfsFree
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.syncDir == nil {
		c.syncDir = SyncDir
	}
}

// CSV writes one CSV per board per local day:
// gpu<index>-<board>-deep-<YYYY-MM-DD>.csv, named by the GPU's index and its
// UUID (BoardID), so a file never holds two boards' rows (indices move when
// a board drops out), and continued in ..._<n>.csv when the GPU's column set
// changes (see PartName): every file is one table under one header, after
// the line naming its board (Board.Line).
// Each row goes to the kernel in one write(2) as soon as it is formatted;
// files are fsync'ed every FsyncEvery and on Sync and Close. A write that
// fails half-way is cut back to the last whole line, so a file never holds a
// torn line.
type CSV struct {
	cfg    CSVConfig
	log    *slog.Logger
	files  map[int]*gpuFile
	order  []int
	paused atomic.Uint32 // disk guard: 0 writing, else why rows are paused (pauseLowSpace, pauseENOSPC)
	gz     *compressor

	// inflight is the periodic sync batch on the sync thread and the files
	// it holds, in submission order; only the background goroutine uses it.
	inflight struct {
		seq   uint64
		files []syncedFile
	}
	syncErrLogged, cutErrLogged atomic.Bool
	// newEntry: a file was created since the directory was last fsynced.
	// The background goroutine syncs it within a tick, off the row path: at
	// midnight every GPU creates a file, and eight directory fsyncs in the
	// poll loop would cost ticks.
	newEntry     atomic.Bool
	dirErrLogged atomic.Bool

	// leaving counts the fsyncs Close waits for, within a bound: of the
	// files let go of (leave: a part, every file at SIGHUP or at Close),
	// which run on goroutines of their own, and of the directory
	// (syncNewEntries).
	leaving closeSyncs

	stop    chan struct{}
	done    chan struct{}
	closeMu sync.Mutex
	closed  bool
	shut    atomic.Bool        // set by Close: later rows are dropped
	counts  *counters.Registry // CSVConfig.Counters
}

type gpuFile struct {
	mu       sync.Mutex
	index    int
	fans     int // fan column pairs; changed by SetGPU under mu
	board    Board
	mine     map[string]bool // the files this run opened: only these are continued while the board is not known
	header   []byte          // the column header
	preamble []byte          // what a file starts with: the board line, then the header
	f        file
	osf      *os.File // f's os.File, for the sync thread
	path     string
	day      time.Time // local midnight starting the file's day (kept while closed)
	last     time.Time // the latest row time in the open file (zero: none)
	next     time.Time // local midnight ending it
	size     int64     // bytes in the file, all whole lines
	dirty    atomic.Bool
	buf      []byte
	ring     []reading.Sample // the last rows, as samples: Rows lays them out under the current header
	ringNext int
	ringLen  int
	failing  bool        // last write failed (logged once)
	writing  atomic.Bool // a row's Write holds mu: Write counts the row, or a Close that gave up first (dropRow)

	// waiting is the work for this file that found mu held (withLock),
	// in order, until one who holds mu runs it; waiter: a goroutine waits
	// for mu to run it.
	qmu     sync.Mutex
	waiting []func()
	waiter  bool
}

var errClosed = errors.New("csv: closed")

// GPUColumns describes one GPU's files: its index, fan count and board
// (Board.Index is Index). A board with no UUID yet (a GPU that did not
// answer at start) writes to files named UnknownBoard until SetGPU names it.
type GPUColumns struct {
	Index int
	Fans  int
	Board Board
}

// NewCSV prepares the files for gpus (nothing is opened until the first row),
// removes expired days and queues unfinished compressions from earlier runs.
// It starts the background fsync and disk-guard goroutine.
func NewCSV(cfg CSVConfig, gpus []GPUColumns) (*CSV, error) {
	counts := counters.Need(cfg.Counters, "sink.CSVConfig.Counters")
	cfg.defaults()
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("create log dir: %w", err)
	}
	c := &CSV{cfg: cfg, log: cfg.Logger, files: map[int]*gpuFile{}, stop: make(chan struct{}), done: make(chan struct{}),
		counts: counts}
	counters.Observe(counts, asyncSyncBatches, counters.Field[uint64]{Def: syncBatches, Get: func(n uint64) uint64 { return n }})
	for _, g := range gpus {
		gf := &gpuFile{index: g.Index, ring: make([]reading.Sample, cfg.RingRows), mine: map[string]bool{}}
		gf.set(g)
		c.files[g.Index] = gf
		c.order = append(c.order, g.Index)
	}
	if cfg.Compress {
		c.gz = newCompressor(c.log, cfg.gzOps)
		// Temp files of a compression killed half-way, or abandoned at a
		// Close, are an earlier run's: swept here, before this run queues
		// one of its own (a sweep at a later pass could remove a live one).
		RemoveTemps(cfg.Dir, func(name string) bool {
			f, ok := ParseFileName(name, cfg.Now().Location())
			return ok && f.GZ
		})
	}
	c.checkDisk()
	c.housekeeping(cfg.Now())
	go c.background()
	return c, nil
}

// lateRowSlack is how far before the open file's day, or before the latest
// row in the file, a row may be stamped and still go into that file: a
// sample that was stuck in the driver over midnight (an NVML call can block
// 45 s), or a small step of the clock. Its own day may be finished and
// compressed by then. A row further back (the wall clock stepped back) goes
// to its own day's file, to a new part of it when that file holds later
// rows: every file stays in time order to within this slack, which readers
// that search a file by time (report) rely on.
const lateRowSlack = 2 * time.Minute

// Write formats s and appends it to its GPU's file for the sample's day. It
// also keeps the row in the GPU's in-memory ring. Errors are logged, counted
// and returned; they never stop the caller.
func (c *CSV) Write(s *reading.Sample) error {
	gf := c.files[s.GPU]
	if gf == nil {
		return fmt.Errorf("csv: GPU %d is not configured", s.GPU)
	}
	c.lock(gf) // a SIGHUP, a new column set, Close: before this row
	defer gf.mu.Unlock()
	gf.writing.Store(true)
	if c.shut.Load() {
		// A sample that was stuck in the driver until after shutdown.
		c.dropRow(gf)
		return errClosed
	}
	gf.buf = AppendRow(gf.buf[:0], s, gf.fans)
	gf.remember(s)
	if c.paused.Load() != 0 {
		c.dropRow(gf)
		return nil
	}
	if err := c.ensureOpen(gf, s.Time); err != nil {
		c.dropRow(gf)
		if !gf.failing {
			gf.failing = true
			c.log.Error("cannot open CSV; rows are dropped until it works", "gpu", gf.index, "error", err)
		}
		return err
	}
	n, err := gf.f.Write(gf.buf)
	if err != nil || n != len(gf.buf) {
		c.dropRow(gf)
		c.cutBack(gf)
		if errors.Is(err, syscall.ENOSPC) {
			c.pause(pauseENOSPC, "disk full (ENOSPC)")
		}
		if !gf.failing {
			gf.failing = true
			c.log.Error("CSV write failed; the file was cut back to its last whole line", "gpu", gf.index, "path", gf.path, "error", err)
		}
		if err == nil {
			err = io.ErrShortWrite
		}
		return fmt.Errorf("write csv for gpu %d: %w", gf.index, err)
	}
	if !gf.writing.CompareAndSwap(true, false) {
		c.cutBack(gf) // Close gave up on it (stuck on the disk) and counted it dropped: refused
		return errClosed
	}
	c.counts.Inc(rowsWritten) // at once: a Close giving up from now on finds it written (abandonRows)
	if gf.failing {
		gf.failing = false
		c.log.Info("CSV writes work again", "gpu", gf.index, "path", gf.path)
	}
	gf.size += int64(n)
	if s.Time.After(gf.last) {
		gf.last = s.Time
	}
	gf.dirty.Store(true)
	return nil
}

// Columns returns the column names of GPU index's file.
func (c *CSV) Columns(index int) []string {
	gf := c.files[index]
	if gf == nil {
		return nil
	}
	c.lock(gf)
	defer gf.mu.Unlock()
	return Columns(gf.fans)
}

// SetGPU changes the column set (fans) and the board of GPU g.Index from
// its next row on: a GPU that did not answer at start (no UUID, 0 fans
// known) gets its board's name and its fan columns once its facts arrive.
// The open file is closed; the next row opens the board's file, or a new
// part of the day when only the columns changed (PartName), so every file
// stays one board's, under one header. The in-memory ring keeps its rows:
// Rows lays them out under the new header. Nothing happens when neither
// changed. It does not wait on a row write stuck on the disk (withLock):
// it runs on the GPU's worker, and the GPU's queued rows are written on
// another goroutine.
func (c *CSV) SetGPU(g GPUColumns) {
	gf := c.files[g.Index]
	if gf == nil {
		return
	}
	c.withLock(gf, func() {
		fans, board := gf.fans, gf.board
		if !gf.set(g) {
			return
		}
		c.log.Info("CSV column set or board changes: the next row starts a new file", "gpu", g.Index,
			"fans_before", fans, "fans", gf.fans, "board_before", board.ID(), "board", gf.board.ID())
		c.letGo(gf)
	})
}

// set takes g's fan count and board, and reports whether either changed.
// Called with gf.mu held, or before gf is shared.
func (gf *gpuFile) set(g GPUColumns) bool {
	fans := min(max(g.Fans, 0), reading.MaxFans)
	g.Board.Index = g.Index
	if gf.header != nil && fans == gf.fans && g.Board == gf.board {
		return false
	}
	gf.fans, gf.board, gf.header = fans, g.Board, Header(fans)
	gf.preamble = append(g.Board.Line(), gf.header...)
	return true
}

// Reopen closes every file so that the next row reopens it by name (SIGHUP:
// an external tool moved the files away). Each is let go of as at midnight
// or on a new column set (leave): synced and closed on a goroutine of its
// own, so a stalled disk holds up neither rows nor the signal that asked,
// and Close waits for it within its bound; a failure counts in sync_errors,
// the first logged. A file whose lock a row write stuck on the disk holds
// is let go of once that write returns, before the file's next row
// (withLock): Reopen runs on the signals goroutine, which also answers
// SIGUSR1.
func (c *CSV) Reopen() {
	for _, i := range c.order {
		gf := c.files[i]
		c.withLock(gf, func() { c.letGo(gf) })
	}
}

// letGo lets gf's open file go (leave), if one is open. Called with gf.mu
// held.
func (c *CSV) letGo(gf *gpuFile) {
	if gf.f != nil {
		c.leave(gf, false)
	}
}

// withLock runs f with gf.mu held: at once when mu is free, else once the
// row write that holds it returns, before the file's next row, in the order
// asked, on a goroutine of its own that waits for mu; the caller never
// waits on a write stuck on a stalled disk. That goroutine counts in
// leaving, as an fsync does: Close waits for it within its bound, then
// abandons it, counted in sync_errors and logged with its GPU (stuck). One
// such goroutine waits per file: work asked meanwhile joins it, so a file
// is counted once.
func (c *CSV) withLock(gf *gpuFile, f func()) {
	gf.qmu.Lock()
	gf.waiting = append(gf.waiting, f)
	gf.qmu.Unlock()
	if gf.mu.TryLock() {
		c.runWaiting(gf, false)
		gf.mu.Unlock()
		return
	}
	c.step(handBusy)
	gf.qmu.Lock()
	start := !gf.waiter && len(gf.waiting) > 0 // else the waiter, or a row that holds mu, runs f
	gf.waiter = gf.waiter || start
	gf.qmu.Unlock()
	if !start {
		return
	}
	c.leaving.begin()
	go func() {
		c.step(handWaiter)
		gf.mu.Lock()
		c.runWaiting(gf, true)
		gf.mu.Unlock()
		c.leaving.end(func() {})
	}()
}

// lock takes gf.mu and runs the work withLock queued for the file first:
// whoever holds mu next (a row, a read of the columns or the recent rows,
// a sync) sees every SetGPU, Reopen and Close that returned before it,
// even when withLock's goroutine has not had mu yet.
func (c *CSV) lock(gf *gpuFile) {
	gf.mu.Lock()
	c.runWaiting(gf, false)
}

// runWaiting runs the work queued by withLock until none is left; the
// waiter (withLock's goroutine) is done once it finds none. Another holder
// of mu counts each batch it takes in leaving, from the take (under qmu)
// to its end: a Close whose work it took finds the queue empty and no
// waiter, and its wait must still cover the file's leave, which begins
// only when the batch runs. (The waiter counts in leaving already.)
// Called with gf.mu held.
func (c *CSV) runWaiting(gf *gpuFile, waiter bool) {
	for {
		gf.qmu.Lock()
		fs := gf.waiting
		gf.waiting = nil
		if len(fs) == 0 && waiter {
			gf.waiter = false
		}
		if len(fs) > 0 && !waiter {
			c.leaving.begin()
		}
		gf.qmu.Unlock()
		if len(fs) == 0 {
			return
		}
		c.step(handTaken)
		for _, f := range fs {
			f()
		}
		if !waiter {
			c.leaving.end(func() {})
		}
	}
}

// stuck reports whether withLock's goroutine still waits for gf.mu, which
// a row write holds.
func (gf *gpuFile) stuck() bool {
	gf.qmu.Lock()
	defer gf.qmu.Unlock()
	return gf.waiter
}

// Stats are the sink's counters.
type Stats struct {
	Written, Dropped uint64
	SyncBatches      uint64 // periodic sync rounds completed (process-wide)
	SyncErrors       uint64 // failed fsync/fdatasync (or close) of a CSV; the first is logged with its path
	SyncSkips        uint64 // periodic rounds skipped: the previous one was still on the disk; the first is logged
	Paused           bool
}

// Stats returns the counters.
func (c *CSV) Stats() Stats {
	return Stats{Written: c.counts.Load(rowsWritten), Dropped: c.counts.Load(rowsDropped), SyncBatches: asyncSyncBatches(),
		SyncErrors: c.counts.Load(syncErrors), SyncSkips: c.counts.Load(syncSkips), Paused: c.paused.Load() != 0}
}

// Close stops the background work, fsyncs and closes every file and the
// directory when it gained one, and waits for that, for the fsync and close
// of the parts let go of before (leave), for the background goroutine (held
// up by a stalled disk in its directory fsync or its free-space check) and
// for the compression in progress to stop, all within closeSyncBound of its
// start. An fsync still running then is abandoned, counted in sync_errors,
// logged here, and returned as the error; so is a file whose lock a row
// write stuck on the disk still holds. A compression still running is
// abandoned, logged and returned, not counted: its .csv stays. Queued
// compressions are abandoned too (they are picked up at the next start).
func (c *CSV) Close() error {
	deadline := time.Now().Add(closeSyncBound)
	c.closeMu.Lock()
	if c.closed {
		c.closeMu.Unlock()
		return nil
	}
	c.closed = true
	c.shut.Store(true)
	c.closeMu.Unlock()
	close(c.stop)
	if c.gz != nil {
		c.gz.halt()
	}
	// Every open file is synced and closed on a goroutine of its own, as a
	// part let go of before is (a new column set, midnight), and so is the
	// directory when it gained a file: the rows and the new files are on
	// the disk, and the fsyncs' outcomes in sync_errors, before Close
	// returns, unless the disk does not answer by the deadline. A file
	// whose lock a row write stuck on a stalled disk holds is not waited
	// on (withLock): it is abandoned with the fsyncs (counted by
	// leaving.wait), its leave done whenever the write returns; rows after
	// that are refused under the lock (shut).
	for _, i := range c.order {
		gf := c.files[i]
		c.withLock(gf, func() { c.letGo(gf) }) // begins its sync before its wait for the lock ends
	}
	bg := time.NewTimer(time.Until(deadline))
	defer bg.Stop()
	select {
	case <-c.done:
		// The last periodic batch's failures still count: wait a little for
		// its outcome, never past the deadline (a hung disk must not hold up
		// shutdown; the fsyncs of the files then report what they can).
		for range closeSyncWaits {
			if c.collectSync(); c.inflight.seq == 0 || !time.Now().Before(deadline) {
				break
			}
			time.Sleep(time.Millisecond)
		}
	case <-bg.C:
		// The background goroutine is held up by the disk (its directory
		// fsync, one of the syncs abandoned below, or its free-space check):
		// c.inflight stays its.
	}
	c.syncNewEntries(false)
	var err error
	if n := c.leaving.wait(time.Until(deadline)); n > 0 {
		var stuck []int
		for _, i := range c.order {
			if c.files[i].stuck() {
				stuck = append(stuck, i)
			}
		}
		rows := c.abandonRows()
		if len(stuck) > 0 || rows > 0 {
			c.log.Error("a row write to a CSV still running at close (a stalled disk); its file is abandoned so that the exit goes on, unsynced (counted in sync_errors), and its row is counted in rows_dropped now (cut back out if its write returns later)",
				"gpus", stuck, "rows", rows, "waited", closeSyncBound)
		}
		c.counts.Add(syncErrors, uint64(n))
		err = fmt.Errorf("%d fsyncs of CSV files or their directory still running %v after close began (a stalled disk): abandoned, counted in sync_errors", n, closeSyncBound)
		c.log.Error("fsync of CSV files or their directory still running at close (a stalled disk); abandoned so that the exit goes on: their last rows may not survive a power loss (counted in sync_errors)",
			"syncs", n, "waited", closeSyncBound)
	}
	if c.gz != nil && !c.gz.halted(deadline) {
		// Nothing is lost (the day's .csv stays until its .gz is whole), so
		// it is logged, as a failed compression is, and not counted.
		err = errors.Join(err, fmt.Errorf("compression of a finished CSV still running %v after close began (a stalled disk): abandoned", closeSyncBound))
		c.log.Warn("compression of a finished CSV still running at close (a stalled disk); abandoned so that the exit goes on: its day stays uncompressed and is compressed at the next start",
			"waited", closeSyncBound)
	}
	return err
}

// background hands dirty files to the sync thread every FsyncEvery (or at
// each value from cfg.Tick) and checks
// free space every DiskCheckEvery, or on every tick while rows are paused (a
// full disk is probed each tick, so rows resume within a tick of space
// returning). Syncing runs outside the GPU locks and off the Go scheduler, so
// a slow disk never holds up a row.
func (c *CSV) background() {
	defer close(c.done)
	tick := c.cfg.Tick
	if tick == nil {
		t := time.NewTicker(c.cfg.FsyncEvery)
		defer t.Stop()
		tick = t.C
	}
	lastDisk := time.Now()
	for {
		select {
		case <-c.stop:
			return
		case <-tick:
		}
		c.syncDirty()
		c.syncNewEntries(true)
		if c.paused.Load() != 0 || time.Since(lastDisk) >= c.cfg.DiskCheckEvery {
			lastDisk = time.Now()
			c.checkDisk()
		}
	}
}
