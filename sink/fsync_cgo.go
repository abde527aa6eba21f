package sink

/*
#include "fsync.h"
*/
import "C"

import (
	"os"
	"syscall"
)

// syncAsync hands duplicates of the files' descriptors to the sync thread
// (fsync.c) and returns at once. It reports false, doing nothing, while the
// previous batch is still being synced: a slow disk then gets fewer syncs, and
// nothing piles up.
func syncAsync(files []*os.File) bool {
	fds := make([]C.int, 0, len(files))
	for _, f := range files {
		// A duplicate stays valid even if the file is closed (rotation)
		// while the thread syncs it.
		d, err := syscall.Dup(int(f.Fd()))
		if err != nil {
			continue
		}
		fds = append(fds, C.int(d))
	}
	if len(fds) == 0 {
		return true
	}
	if C.gt_fsync_submit(&fds[0], C.int(len(fds))) != 0 {
		for _, d := range fds {
			syscall.Close(int(d))
		}
		return false
	}
	return true
}

// asyncSyncStats returns the sync thread's completed batches and failed
// fdatasync calls.
func asyncSyncStats() (batches, errors uint64) {
	var b, e C.ulonglong
	C.gt_fsync_stats(&b, &e)
	return uint64(b), uint64(e)
}
