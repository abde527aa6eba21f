package sink

import (
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// What was not on the disk when the host froze is lost, and an Xid 79 is
// often followed by a frozen host: a line log's lines reach the disk within
// syncEvery of their write (the CSV rows' bound, 1 s by default) and at
// Close. The writer (Line, called from the poll loop's goroutines) never
// waits on an fsync: it only notes the file it wrote, and a timer armed by
// the first line after a sync fsyncs it on its own goroutine. With no line
// written nothing is armed: a steady daemon writes no events.log lines, and
// no timer wakes for it.
//
// lumberjack exposes no file, and renames it inside a Write when it
// rotates: lines written before a rotation are in the renamed file. So the
// log holds a read-only descriptor of each file it wrote lines to since the
// last sync (fsync works on any descriptor of the inode), opened by path
// right after the write, when the line is in the file at the path; a write
// that finds another file there (a rotation, a SIGHUP reopen) opens one more.
// A file renamed from outside (logrotate, before its SIGHUP) is let go of
// before the next write (followPathLocked), so that lumberjack never writes
// a file the log does not hold.
// A file not seen before is a new directory entry: the directory is synced
// too.

// defaultLineSyncEvery is the bound when NewLineLog is given none.
const defaultLineSyncEvery = time.Second

// lineSync is a line log's durability state, under its mu.
type lineSync struct {
	every    time.Duration
	unsynced []*os.File           // read-only descriptors of the files written since the last sync, oldest first
	cur      os.FileInfo          // the file the last of them is; nil when none is held
	seen     os.FileInfo          // the last file written: another one is a new directory entry
	dirNew   bool                 // the directory gained an entry since it was last synced
	timer    *time.Timer          // armed while lines wait for their sync and none runs
	running  bool                 // a sync is on the disk (syncDue's)
	syncs    closeSyncs           // the syncs on the disk, which Close waits for within a bound
	sync     func(*os.File) error // (*os.File).Sync; tests watch it
	syncDir  func(string) error   // SyncDir; tests watch it
}

// wroteLocked notes that a line was just written to the file at the path
// and arms the sync. A descriptor that cannot be had is a failed sync.
func (l *LineLog) wroteLocked() {
	s := &l.sync
	fi, err := os.Lstat(l.path)
	if err == nil && s.cur != nil && os.SameFile(s.cur, fi) {
		return // held since this file's first line after the last sync; the timer is armed
	}
	f, err := os.OpenFile(l.path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
	if err == nil {
		if fi, err = f.Stat(); err != nil {
			f.Close()
		}
	}
	if err != nil {
		l.syncFailed(l.path, err)
		return
	}
	s.unsynced, s.cur = append(s.unsynced, f), fi
	if s.seen == nil || !os.SameFile(s.seen, fi) {
		s.seen, s.dirNew = fi, true
	}
	l.armSyncLocked()
}

// followPathLocked closes the file lumberjack writes when the path no
// longer names it, before a write: logrotate renamed it (and may have
// created a new one) and has not sent its SIGHUP yet. The write then
// reopens the path, as the SIGHUP would, and its line is in the file that
// wroteLocked opens by path to sync. Left open, lumberjack wrote the
// renamed file, which nothing synced, while wroteLocked counted a failed
// sync for the missing path or synced the new, empty file. It closes it
// too for a SIGHUP that found the lock held (Reopen). It returns the file
// at the path, which the write goes to unless lumberjack rotates in it
// (nil: none is there).
func (l *LineLog) followPathLocked() os.FileInfo {
	fi, err := os.Lstat(l.path)
	if err != nil {
		fi = nil
	}
	if l.reopen.Swap(false) {
		l.w.Close() // as Reopen would have
	} else if s := l.sync.seen; s != nil && (fi == nil || !os.SameFile(fi, s)) {
		l.w.Close() // lumberjack buffers nothing; the write reopens, or fails and keeps its line
	}
	return fi
}

// armSyncLocked arms the timer unless it is armed, a sync runs (it arms it
// when done) or the log is closed (Close syncs).
func (l *LineLog) armSyncLocked() {
	s := &l.sync
	if s.timer == nil && !s.running && !l.closed {
		s.timer = time.AfterFunc(s.every, l.syncDue)
	}
}

// takeSyncLocked hands over what waits for a sync; the next line opens
// its file again.
func (l *LineLog) takeSyncLocked() (files []*os.File, dirNew bool) {
	s := &l.sync
	files, dirNew = s.unsynced, s.dirNew
	s.unsynced, s.cur, s.dirNew = nil, nil, false
	return files, dirNew
}

// syncDue runs on the timer's goroutine: it syncs what waits, outside the
// lock, and arms the timer again for the lines written meanwhile.
func (l *LineLog) syncDue() {
	l.mu.Lock()
	l.sync.timer = nil
	if l.closed {
		l.mu.Unlock()
		return
	}
	files, dirNew := l.takeSyncLocked()
	l.sync.running = true
	l.sync.syncs.begin()
	l.mu.Unlock()

	l.syncFiles(files, dirNew)

	l.mu.Lock()
	l.sync.running = false
	if len(l.sync.unsynced) > 0 || l.sync.dirNew {
		l.armSyncLocked()
	}
	l.mu.Unlock()
}

// syncFiles fsyncs and closes files, then the directory when it gained an
// entry; l.sync.syncs.begin was called for it. Failures are counted and the
// first logged, unless Close gave up on it first (counted as abandoned).
func (l *LineLog) syncFiles(files []*os.File, dirNew bool) {
	var failed []*os.PathError
	for _, f := range files {
		if err := l.sync.sync(f); err != nil {
			failed = append(failed, &os.PathError{Op: "fsync", Path: f.Name(), Err: err})
		}
		f.Close()
	}
	if dirNew {
		if err := l.sync.syncDir(filepath.Dir(l.path)); err != nil {
			failed = append(failed, &os.PathError{Op: "fsync", Path: filepath.Dir(l.path), Err: err})
		}
	}
	l.sync.syncs.end(func() {
		for _, e := range failed {
			l.syncFailed(e.Path, e.Err)
		}
	})
}

// syncFailed counts a line log's failed sync (log_sync_errors) and logs the
// first: lines written since the last good one may not survive a power loss.
func (l *LineLog) syncFailed(path string, err error) {
	l.counts.Inc(lineSyncErrors)
	if l.syncErrLogged.CompareAndSwap(false, true) {
		l.log.Error("fsync of a log file failed; its recent lines may not survive a power loss (later failures are only counted: log_sync_errors)",
			"path", path, "error", err)
	}
}
