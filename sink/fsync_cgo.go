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
// closes them, and returns at once with the batch's sequence number. It
// reports false, closing them itself, while the previous batch is still being
// synced: a slow disk then gets fewer syncs, and nothing piles up.
func syncAsync(fds []int) (seq uint64, ok bool) {
	cfds := make([]C.int, len(fds))
	for i, d := range fds {
		cfds[i] = C.int(d)
	}
	s := uint64(C.gt_fsync_submit(&cfds[0], C.int(len(cfds))))
	if s == 0 {
		for _, d := range fds {
			syscall.Close(d)
		}
		return 0, false
	}
	return s, true
}

// syncOutcome is what became of a batch handed to the sync thread.
type syncOutcome int

const (
	syncRunning syncOutcome = iota // still on the disk
	syncDone                       // done; the errors are filled in
	syncGone                       // a later batch replaced its outcome
)

// syncResult reports batch seq's outcome: when done, errs[i] is the error
// fdatasync returned for the i-th descriptor submitted, or nil.
func syncResult(seq uint64, errs []error) syncOutcome {
	if len(errs) == 0 {
		return syncDone
	}
	cerr := make([]C.int, len(errs))
	switch C.gt_fsync_result(C.ulonglong(seq), &cerr[0], C.int(len(cerr))) {
	case 0:
		return syncRunning
	case 1:
		for i, e := range cerr {
			errs[i] = nil
			if e != 0 {
				errs[i] = syscall.Errno(e)
			}
		}
		return syncDone
	}
	return syncGone
}

// asyncSyncBatches returns how many batches the sync thread completed,
// process-wide.
func asyncSyncBatches() uint64 {
	var b C.ulonglong
	C.gt_fsync_stats(&b)
	return uint64(b)
}
