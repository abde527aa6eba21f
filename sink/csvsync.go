package sink

import (
	"errors"
	"fmt"
	"os"
)

// syncedFile names a file handed to the sync thread, for the log.
type syncedFile struct {
	gpu  int
	path string
}

// closeSyncWaits bounds how many milliseconds Close waits for the last
// periodic sync batch's outcome.
const closeSyncWaits = 200

// Sync flushes GPU index's file to disk now (before a snapshot is taken).
func (c *CSV) Sync(index int) error {
	gf := c.files[index]
	if gf == nil {
		return nil
	}
	c.lock(gf)
	f, path := gf.f, gf.path
	gf.mu.Unlock()
	if f == nil {
		return nil
	}
	gf.dirty.Store(false)
	if err := f.Sync(); err != nil && !errors.Is(err, os.ErrClosed) {
		c.syncFailed(index, path, err)
		return fmt.Errorf("fsync csv for gpu %d: %w", index, err)
	}
	return nil
}

// syncFailed counts a failed fsync, fdatasync or close of a CSV and logs
// the first one with its file: rows written since the last good sync may not
// survive a power loss.
func (c *CSV) syncFailed(gpu int, path string, err error) {
	c.counts.Inc(syncErrors)
	if c.syncErrLogged.CompareAndSwap(false, true) {
		c.log.Error("fsync of a CSV failed; its recent rows may not survive a power loss (later failures are only counted: sync_errors)",
			"gpu", gpu, "path", path, "error", err)
	}
}

// syncNewEntries fsyncs the directory once files were created in it, so a
// power loss cannot lose a whole new day's file, only its last second:
// inline (the background goroutine), or on a goroutine of its own (Close).
// Either way it is one of the syncs Close waits for within its bound
// (leaving): a directory fsync stuck on the disk, in the background
// goroutine or in Close, is abandoned with the files'. The first failure is
// logged and all are counted with the sync errors.
func (c *CSV) syncNewEntries(inline bool) {
	if !c.newEntry.Swap(false) {
		return
	}
	c.leaving.begin()
	sync := func() {
		err := c.cfg.syncDir(c.cfg.Dir)
		c.leaving.end(func() {
			if err == nil {
				return
			}
			c.counts.Inc(syncErrors)
			if c.dirErrLogged.CompareAndSwap(false, true) {
				c.log.Error("fsync of the log directory failed; new CSV files may not survive a power loss (later failures are only counted: sync_errors)",
					"dir", c.cfg.Dir, "error", err)
			}
		})
	}
	if inline {
		sync()
	} else {
		go sync()
	}
}

// collectSync takes the outcome of the batch on the sync thread, if it is
// done, and counts and logs every file whose fdatasync failed.
func (c *CSV) collectSync() {
	in := &c.inflight
	if in.seq == 0 {
		return
	}
	errs := make([]error, len(in.files))
	switch syncResult(in.seq, errs) {
	case syncRunning:
		return
	case syncDone:
		for i, err := range errs {
			if err != nil {
				c.syncFailed(in.files[i].gpu, in.files[i].path, err)
			}
		}
	case syncGone:
		// Another CSV in this process (tests only) submitted after it;
		// its outcome is unknown.
	}
	in.seq, in.files = 0, nil
}

// syncDirty hands every dirty file to the sync thread without waiting. While
// the previous round is still on the disk, this round is skipped (counted,
// the first logged): a slow disk gets fewer syncs rather than a pile of them.
func (c *CSV) syncDirty() {
	c.collectSync()
	var fds []int
	var gfs []*gpuFile
	var files []syncedFile
	for _, i := range c.order {
		gf := c.files[i]
		if !gf.dirty.Load() {
			continue
		}
		// Duplicate under the lock: a rotation or reopen cannot close the
		// file (and let its number be reused) in between.
		c.lock(gf)
		if gf.osf != nil {
			if d, err := dupFile(gf.osf); err == nil {
				fds = append(fds, d)
				gfs = append(gfs, gf)
				files = append(files, syncedFile{gf.index, gf.path})
				gf.dirty.Store(false)
			}
		}
		gf.mu.Unlock()
	}
	if len(fds) == 0 {
		return
	}
	seq, ok := syncAsync(fds)
	if !ok {
		n := c.counts.Add(syncSkips, 1)
		for _, gf := range gfs {
			gf.dirty.Store(true)
		}
		if n == 1 {
			c.log.Warn("periodic fsync skipped: the previous round is still on the disk; these files' rows wait in the page cache for the next round (later skips are only counted: sync_skips)",
				"files", len(files), "first", files[0].path, "every", c.cfg.FsyncEvery)
		}
		return
	}
	c.inflight.seq, c.inflight.files = seq, files
}
