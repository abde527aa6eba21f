package sink

import (
	"fmt"
	"syscall"
)

func statfsFree(dir string) (uint64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return st.Bavail * uint64(st.Bsize), nil
}

// Why the disk guard paused rows.
const (
	pauseLowSpace = iota + 1 // free space below MinFreeMB
	pauseENOSPC              // a write failed: the disk is full
)

// enospcResumeFree is the free space a disk that ran full must have again
// before rows resume: room for many seconds of rows from 16 GPUs (a row is
// under 1 KiB), so that a disk with a few bytes back does not flap between
// full and writing.
const enospcResumeFree = 64 << 10

// checkDisk pauses or resumes writing by free space. After ENOSPC, rows
// resume once enospcResumeFree bytes are free again (and MinFreeMB, when set).
func (c *CSV) checkDisk() {
	floor := c.cfg.MinFreeMB << 20
	need := floor
	if c.paused.Load() == pauseENOSPC {
		need = max(need, enospcResumeFree)
	}
	if need == 0 {
		c.resume()
		return
	}
	free, err := c.cfg.FreeBytes(c.cfg.Dir)
	if err != nil {
		return // can't tell: let writes fail on their own
	}
	switch {
	case free >= need:
		c.resume()
	case free < floor:
		c.pause(pauseLowSpace, fmt.Sprintf("free space %d MB below %d MB", free>>20, c.cfg.MinFreeMB))
	}
}

func (c *CSV) pause(by uint32, why string) {
	if c.paused.CompareAndSwap(0, by) {
		c.log.Warn("disk guard: not writing rows", "dir", c.cfg.Dir, "reason", why)
	}
}

func (c *CSV) resume() {
	if c.paused.Swap(0) != 0 {
		c.log.Info("disk guard: space is back, writing rows again", "dir", c.cfg.Dir, "dropped_so_far", c.counts.Load(rowsDropped))
	}
}
