package sink

/*
#include "fsync.h"
*/
import "C"

import (
	"os"
	"syscall"
)

// dupFile returns a duplicate of f's descriptor. A duplicate stays valid even
// if f is closed (rotation) while the sync thread works on it.
func dupFile(f *os.File) (int, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return -1, err
	}
	d := -1
	var derr error
	if err := rc.Control(func(fd uintptr) { d, derr = syscall.Dup(int(fd)) }); err != nil {
		return -1, err
	}
	return d, derr
}

// syncAsync hands duplicated descriptors to the sync thread (fsync.c), which
// closes them, and returns at once. It reports false, closing them itself,
// while the previous batch is still being synced: a slow disk then gets fewer
// syncs, and nothing piles up.
func syncAsync(fds []int) bool {
	cfds := make([]C.int, len(fds))
	for i, d := range fds {
		cfds[i] = C.int(d)
	}
	if C.gt_fsync_submit(&cfds[0], C.int(len(cfds))) != 0 {
		for _, d := range fds {
			syscall.Close(d)
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
