package sampler

/*
#include <stdlib.h>
#include "batchthread.h"
*/
import "C"

import (
	"os"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// A sample's calls run in one cgo call on the GPU's worker goroutine: on the
// simulated driver that is 2 us, and a cgo call is the cheapest way there.
// On a real driver the batch takes milliseconds (14 calls of 0.1-0.4 ms), and
// a cgo call that long holds the process's only P (GOMAXPROCS=1) until the
// runtime's sysmon takes it back, polling every 20 us while it does: the
// other GPUs' workers wait for the P (their samples start late) and the
// polling costs CPU. So once a GPU's batches take longer than
// threadAbove (switchAfter batches in a row), they run on a C thread of the
// GPU's own, and the
// worker waits for it in Go's poller (an eventfd), holding no P and no
// thread. A batch stuck in the driver then holds only that C thread; one
// batch per GPU is still in flight at most, as before.
const (
	threadAbove = 200 * time.Microsecond
	threadBelow = threadAbove / 4 // back to the direct call when the driver is fast again
	// switchAfter batches in a row past the threshold switch the mode: one
	// batch preempted on a busy machine (milliseconds) must not move a fast
	// GPU to its thread (two more context switches per sample), nor one
	// quick answer move a slow one back.
	switchAfter = 8
)

type batchThread struct {
	t    *C.struct_gt_batch_thread
	done *os.File
	buf  [8]byte
	on   bool
	run  int // batches in a row past the threshold toward the other mode
}

// call runs the batch x.b, directly or on the GPU's thread.
func (x *nativeExec) call() {
	th := &x.th
	if th.on {
		th.call()
		th.on = th.decide(time.Duration(C.int64_t(th.t.last_ns)))
		return
	}
	t0 := time.Now()
	C.gt_batch_run(x.dev, x.b)
	if th.decide(time.Since(t0)) && x.threads && th.start(x) {
		th.on = true
	}
}

// decide notes how long one batch took in the driver and reports whether
// the next batches run on the thread.
func (th *batchThread) decide(d time.Duration) bool {
	past := d > threadAbove
	if th.on {
		past = d < threadBelow
	}
	if !past {
		th.run = 0
		return th.on
	}
	if th.run++; th.run < switchAfter {
		return th.on
	}
	th.run = 0
	return !th.on
}

// cThread is the C side of a GPU's batch thread.
type cThread = C.struct_gt_batch_thread

// threadStart starts a batch thread; false if it cannot (tests replace it).
var threadStart = func(t *cThread) bool { return C.gt_batch_thread_start(t) == 0 }

// start creates the thread once; false if it cannot (the direct call stays;
// the failure is counted and the first logged, through x.threadFailed).
func (th *batchThread) start(x *nativeExec) bool {
	if th.t != nil {
		return true
	}
	t := (*cThread)(C.calloc(1, C.size_t(unsafe.Sizeof(cThread{}))))
	t.dev, t.b = x.dev, x.b
	if !threadStart(t) {
		C.free(unsafe.Pointer(t))
		if x.threadFailed != nil {
			x.threadFailed()
		}
		return false
	}
	th.t, th.done = t, os.NewFile(uintptr(t.done), "gpu-batch-done")
	return true
}

// call hands the batch to the thread and waits for it without holding a P.
func (th *batchThread) call() {
	one := [8]byte{1}
	for {
		if _, err := unix.Write(int(th.t.req), one[:]); err != unix.EINTR {
			break
		}
	}
	th.done.Read(th.buf[:])
}
