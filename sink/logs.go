package sink

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"gopkg.in/natefinch/lumberjack.v2"

	"github.com/gpu-telemetry/gpu-telemetry/internal/counters"
)

// Bounds of the lines a LineLog keeps while its file cannot be written.
// Events are rare and small: a day of a bad GPU's events fits many times.
const (
	maxPendingLines = 2000
	maxPendingBytes = 1 << 20
)

// lineRetryEvery is how often kept lines are retried while no new line comes.
const lineRetryEvery = time.Second

// LineLog is an append-only text log rotated by size (events.log,
// summary.log). Lines are written whole, one write per line: a line is in
// the file whole and once, or not at all. A write that fails part-way (a
// full disk: a short write, then ENOSPC) is cut back out of the file (see
// writeLocked), so the line's later retry does not follow a torn copy.
//
// A line that cannot be written (a full disk) is not lost: it is kept in a
// bounded queue, in order, and written as it was (with the timestamp it was
// given) before any newer line once writing works again, at the next line or
// at the latest within a second. What overflows the queue, or is still in it
// at Close, is counted and logged.
type LineLog struct {
	mu         sync.Mutex
	w          io.WriteCloser // the lumberjack.Logger; tests put a failing writer here
	path       string
	log        *slog.Logger
	buf        []byte
	closed     bool        // under mu: lines are refused
	closing    atomic.Bool // Close was called (it may not hold mu yet)
	reopen     atomic.Bool // a SIGHUP found mu held: the next write reopens the file
	pending    [][]byte    // lines not yet written, oldest first, each with its newline
	pendBytes  int
	unchecked  bool // the file has not been checked for a partial last line since NewLineLog
	torn       bool // a failed write may have left part of a line in the file, not yet cut back
	retryEvery time.Duration
	retrying   bool // the retry goroutine runs
	stop       chan struct{}
	closeEnded chan struct{} // closed when Close's goroutine has done all it does, also after Close gave up on it (tests wait on it)
	wg         sync.WaitGroup
	overflowed bool   // this outage's first overflow was logged
	overflowN  uint64 // lines dropped because the queue was full (Line returned an error), for the log
	delayedN   uint64 // lines kept for a later write (log_lines_delayed, this log's own), for the log

	// counts (log_lines_delayed, log_lines_lost_at_exit: the registry it
	// was given) and unsettled are read without mu: status requests,
	// scrapes and Close's count of what it gives up on must not wait
	// behind a write(2) or a rotation stuck on a stalled disk.
	//
	// unsettled holds the lines whose fate is not known yet, in one word,
	// so that each line is settled once, written or lost at exit, by a
	// compare-and-swap (settle) of its write's end or Close's give-up:
	// keptLine for each line kept (len(pending), and the last lines handed
	// to Close not written yet: Waiting), plus ownLine while a Line writes
	// its own line; gaveUp once Close gave up on them (a write stuck on
	// the disk) and counted them lost at exit: from then on no line's
	// write is begun, and one whose write was in the kernel then is cut
	// back out of the file when it returns (refuseLocked).
	counts    *counters.Registry
	unsettled atomic.Int64

	sync          lineSync // what waits for its fsync (logsync.go)
	syncErrLogged atomic.Bool
}

// NewLineLog returns a log at dir/name rotated at maxMB megabytes, keeping
// backups rotated copies, its lines fsynced within syncEvery of their write
// (0: a second), counting in reg (required). Write and sync failures are
// logged to log (nil: discarded).
func NewLineLog(dir, name string, maxMB, backups int, syncEvery time.Duration, log *slog.Logger, reg *counters.Registry) *LineLog {
	counters.Need(reg, "sink.NewLineLog's registry")
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	path := filepath.Join(dir, name)
	return &LineLog{w: &lumberjack.Logger{
		Filename:   path,
		MaxSize:    maxMB,
		MaxBackups: backups,
		LocalTime:  true,
	}, path: path, log: log, retryEvery: lineRetryEvery, stop: make(chan struct{}), closeEnded: make(chan struct{}), unchecked: true,
		counts: reg, sync: lineSync{every: cmp.Or(max(syncEvery, 0), defaultLineSyncEvery), sync: (*os.File).Sync, syncDir: SyncDir}}
}

// What unsettled counts of each line (see LineLog.unsettled).
const (
	ownLine  = 1  // a Line's own line, in its write
	keptLine = 2  // a line kept for a later write
	gaveUp   = -1 // Close gave up: every line was counted lost at exit
)

// errGaveUp refuses a line's write once Close gave up (counted it lost).
var errGaveUp = errors.New("close gave up on the log (a stalled disk): counted lost at exit")

// settle moves the lines not settled yet by delta unless Close gave up
// on them, and reports whether it did.
func (l *LineLog) settle(delta int64) bool {
	for {
		n := l.unsettled.Load()
		if n == gaveUp {
			return false
		}
		if l.unsettled.CompareAndSwap(n, n+delta) {
			return true
		}
	}
}

// Line appends one line; a trailing newline is added. When the file cannot
// be written the line is kept for later and Line returns nil; it returns an
// error only when the line is lost and not counted (the queue is full, or
// the log is closed): one that Close gave up on while Line held it is
// counted by Close (log_lines_lost_at_exit).
func (l *LineLog) Line(s string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed || !l.settle(ownLine) {
		// lumberjack would reopen the file: a late writer (a call that
		// came back from the driver after shutdown) must not.
		return fmt.Errorf("write %s: closed", l.path)
	}
	if len(l.pending) > 0 {
		l.flushLocked()
	}
	if len(l.pending) == 0 {
		l.buf = append(append(l.buf[:0], s...), '\n')
		err := l.writeLocked(l.buf, ownLine)
		if err == nil || errors.Is(err, errGaveUp) {
			return nil
		}
		l.log.Warn("cannot write a log file; keeping its lines in memory until it works",
			"path", l.path, "error", err, "keep_up_to_lines", maxPendingLines)
	}
	return l.keepLocked(s)
}

// keepLocked queues s, Line's own line, for a later write, or reports it
// lost when the queue is full; nothing, when Close gave up on it.
func (l *LineLog) keepLocked(s string) error {
	if len(l.pending) >= maxPendingLines || l.pendBytes+len(s)+1 > maxPendingBytes {
		if !l.settle(-ownLine) {
			return nil
		}
		l.overflowN++
		if !l.overflowed {
			l.overflowed = true
			l.log.Error("too many lines waiting for a log file; dropping new ones (counted as lost)",
				"path", l.path, "waiting", len(l.pending), "line", s)
		}
		return fmt.Errorf("write %s: %d lines already wait for the file; line lost", l.path, len(l.pending))
	}
	if !l.settle(keptLine - ownLine) {
		return nil
	}
	l.pending = append(l.pending, append([]byte(s), '\n'))
	l.pendBytes += len(s) + 1
	l.delayedN++
	l.counts.Inc(linesDelayed)
	if !l.retrying {
		l.retrying = true
		l.wg.Add(1)
		go l.retry()
	}
	return nil
}

// writeLocked writes b, one whole line counted as unit in unsettled, to
// the file, and settles it. A write that failed
// part-way (a short write, then ENOSPC) is cut back out of the file at once;
// until that has worked, no line is written (each is kept, as on a failed
// write), so a line never follows, or glues onto, a torn part of itself or
// of another line. Once Close gave up, b is refused (errGaveUp).
func (l *LineLog) writeLocked(b []byte, unit int64) error {
	if l.unsettled.Load() == gaveUp {
		return errGaveUp
	}
	if l.unchecked || l.torn {
		if err := l.cutBackLocked(); err != nil {
			return err
		}
	}
	to := l.followPathLocked()
	if l.unsettled.Load() == gaveUp {
		return errGaveUp // Close gave up while the cut back or the close above was stuck on the disk
	}
	n, err := l.w.Write(b)
	if err == nil && n < len(b) {
		err = io.ErrShortWrite
	}
	if err != nil {
		if n > 0 {
			l.torn = true
			l.cutBackLocked() // failing, it is tried again before the next write
		}
		if l.unsettled.Load() == gaveUp {
			return errGaveUp // counted lost by Close: not kept
		}
		return fmt.Errorf("write %s: %w", l.path, err)
	}
	if !l.settle(-unit) {
		l.refuseLocked(b, to)
		return errGaveUp
	}
	l.wroteLocked()
	return nil
}

// refuseLocked cuts b, a line whose write returned after Close gave up on
// it and counted it lost, back out of the file the write went to: the file
// at the path (lumberjack rotated in the write, or created the file), or
// else to, the file at the path just before the write (followPathLocked
// made lumberjack write it), found by its identity in the directory when
// logrotate renamed it while the write was stuck. Only a file that ends in
// b is cut: when both were renamed (lumberjack rotated in the write, then
// logrotate renamed the new file), neither is the one. What cannot be cut
// is logged, once per log: no other write is begun after the give-up.
func (l *LineLog) refuseLocked(b []byte, to os.FileInfo) {
	l.w.Close() // lumberjack reopens the path, taking its size from the file again
	removed, err := cutPathToWholeLine(l.path, b)
	if err == nil && removed == 0 && to != nil {
		var path string
		if path, err = findFile(filepath.Dir(l.path), to); err == nil {
			removed, err = cutPathToWholeLine(path, b)
		}
	}
	if err == nil && removed == 0 {
		err = errors.New("neither the file at the path nor the one written to before ends in the line")
	}
	if err != nil {
		l.log.Error("a line written after its log's close gave up on it cannot be cut back out of the file: it stays in it, counted in log_lines_lost_at_exit",
			"path", l.path, "error", err, "line", string(b[:len(b)-1]))
	}
}

// findFile returns the path in dir of the file fi is, renamed since.
func findFile(dir string, fi os.FileInfo) (string, error) {
	entries, err := os.ReadDir(dir)
	for _, e := range entries {
		if efi, ierr := e.Info(); ierr == nil && os.SameFile(efi, fi) {
			return filepath.Join(dir, e.Name()), nil
		}
	}
	return "", fmt.Errorf("%s was renamed out of %s while the write was stuck: %w", fi.Name(), dir, cmp.Or(err, fs.ErrNotExist))
}

// cutBackLocked cuts the file back to its last whole line: the part of a
// line a failed write left, or one an earlier run left when it died
// mid-write (checked once, before the first write). Lines are written one
// per write and each ends in its only newline (events.log's are logfmt,
// which escapes newlines), so the last whole line ends exactly where the
// failed write began.
//
// lumberjack, which writes the file, neither exposes it nor takes back a
// short write (its size already counts the torn bytes): the file is closed
// through it and cut by its path, and lumberjack reopens it at the next
// write, taking its size from the file again. Nothing else writes the path
// (one logger per directory holds its lock), and lumberjack only renames it
// inside a Write, under l.mu like this.
func (l *LineLog) cutBackLocked() error {
	l.w.Close() // lumberjack buffers nothing; a close error adds nothing to the write's
	removed, err := cutPathToWholeLine(l.path, nil)
	if err != nil {
		return fmt.Errorf("write %s: cut back a partial line: %w", l.path, err)
	}
	if l.unchecked && !l.torn && removed > 0 {
		l.log.Warn("log file ended in a partial line (the last run stopped mid-write); cut back to the last whole line",
			"path", l.path, "removed_bytes", removed)
	}
	l.unchecked, l.torn = false, false
	return nil
}

// flushLocked writes the kept lines, oldest first, until one fails.
func (l *LineLog) flushLocked() {
	done := 0
	for _, p := range l.pending {
		if l.writeLocked(p, keptLine) != nil {
			break
		}
		done++
		l.pendBytes -= len(p)
	}
	if done == 0 {
		return
	}
	l.pending = l.pending[done:]
	if len(l.pending) == 0 {
		l.pending = nil
		l.log.Info("log file writable again; wrote the lines kept meanwhile", "path", l.path,
			"delayed_total", l.delayedN, "overflowed_total", l.overflowN)
		l.overflowed = false
	}
}

// retry writes the kept lines every retryEvery until none is left or the log
// is closed: an Xid kept while the disk was full reaches the file soon after
// space returns, even when no later line comes.
func (l *LineLog) retry() {
	defer l.wg.Done()
	t := time.NewTicker(l.retryEvery)
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-t.C:
		}
		l.mu.Lock()
		l.flushLocked()
		if len(l.pending) == 0 {
			l.retrying = false
			l.mu.Unlock()
			return
		}
		l.mu.Unlock()
	}
}

// Waiting returns how many lines are kept, not yet written. It never waits
// for the file: a line stuck in a write to a stalled disk does not hold it
// up.
func (l *LineLog) Waiting() int { return int(max(l.unsettled.Load(), 0) / keptLine) }

// Reopen closes the file; the next line reopens it by name (SIGHUP). It
// does not wait on a line's write stuck on a stalled disk, which holds the
// lock (Reopen runs on the signals goroutine, which also answers SIGUSR1):
// the file is then closed before the next line's write (followPathLocked).
func (l *LineLog) Reopen() error {
	l.reopen.Store(true)
	if !l.mu.TryLock() {
		return nil
	}
	defer l.mu.Unlock()
	l.reopen.Store(false)
	return l.w.Close()
}

// Close writes what it can of the kept lines, then last (the lines the
// stop writes itself: events.log's burst-limit sums, summary.log's final
// line), fsyncs the lines written, and closes the file for good; later
// lines are refused. Lines that still cannot be written are counted as
// lost and logged. All of it runs on a goroutine of its own, waited for
// within closeSyncBound with its last fsync and a sync already on the
// disk: a line's write stuck in the kernel on a stalled disk holds the
// log's lock, and a kept or last line's write can stick too. What is
// abandoned then is counted as an abandoned fsync (log_sync_errors) and
// logged, and every line not written yet (the line in that write, the kept
// and last lines) as lost at exit, once, so that the exit goes on: no
// write of them is begun later, none is counted later (unsettled), and the
// one in that write, if it returns before the exit, is cut back out
// (refuseLocked).
func (l *LineLog) Close(last ...string) error {
	if !l.closing.CompareAndSwap(false, true) {
		if len(last) > 0 {
			l.counts.Add(linesLostAtExit, uint64(len(last)))
			l.log.Error("lines handed to a log file's second close are lost", "path", l.path, "lines", len(last), "first", last[0])
			return fmt.Errorf("close %s: closed already: %d last lines lost", l.path, len(last))
		}
		return nil
	}
	l.unsettled.Add(keptLine * int64(len(last))) // counted with the kept lines until written (Close gives up once, below)
	var err error
	ended := false // the lines are written or counted; read once wait has returned
	l.sync.syncs.begin()
	go func() {
		defer close(l.closeEnded)
		l.mu.Lock()
		l.closed = true
		close(l.stop)
		l.flushLocked()
		for _, s := range last {
			b := append([]byte(s), '\n')
			if len(l.pending) == 0 && l.writeLocked(b, keptLine) == nil {
				continue
			}
			l.pending = append(l.pending, b) // in unsettled already; lost with the kept lines
		}
		// The lines still kept stay in unsettled until they are counted
		// here, at the end: a close stuck on the disk (an NFS flush)
		// leaves them to Close's count of the kept lines.
		lost := l.pending
		l.pending, l.pendBytes = nil, 0
		werr := l.w.Close()
		if l.sync.timer != nil {
			l.sync.timer.Stop()
			l.sync.timer = nil
		}
		files, dirNew := l.takeSyncLocked()
		l.mu.Unlock()
		l.wg.Wait()
		if len(files) > 0 || dirNew {
			// The last sync, after the last line, begun before this ends.
			l.sync.syncs.begin()
			go l.syncFiles(files, dirNew)
		}
		l.sync.syncs.end(func() {
			ended, err = true, werr
			l.unsettled.Store(0)
			if n := len(lost); n > 0 {
				l.counts.Add(linesLostAtExit, uint64(n))
				l.log.Error("log file still not writable at exit; its waiting lines are lost", "path", l.path,
					"lines", n, "first", string(lost[0][:len(lost[0])-1]))
			}
		})
	}()
	if n := l.sync.syncs.wait(closeSyncBound); n > 0 {
		l.counts.Add(lineSyncErrors, uint64(n))
		l.log.Error("fsync of a log file still running at close (a stalled disk); abandoned so that the exit goes on: its last lines may not survive a power loss (counted in log_sync_errors)",
			"path", l.path, "syncs", n, "waited", closeSyncBound)
		if !ended {
			// A write stuck on the disk holds the lock, or the file's
			// close sticks: the line in that write, the lines kept for
			// later and the last lines not written yet will not be
			// written.
			u := l.unsettled.Swap(gaveUp)
			lost := u/keptLine + u%keptLine
			l.counts.Add(linesLostAtExit, uint64(lost))
			l.log.Error("a write to a log file still running at close (a stalled disk); abandoned so that the exit goes on: the line being written, the kept and the last lines are lost",
				"path", l.path, "lines", lost, "waited", closeSyncBound)
		}
		return errors.Join(err, fmt.Errorf("close %s: %d fsyncs or writes still running %v after close began (a stalled disk): abandoned", l.path, n, closeSyncBound))
	}
	return err
}

// Path returns the log's path.
func (l *LineLog) Path() string { return l.path }
