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
// threadAbove (averaged), they run on a C thread of the GPU's own, and the
// worker waits for it in Go's poller (an eventfd), holding no P and no
// thread. A batch stuck in the driver then holds only that C thread; one
// batch per GPU is still in flight at most, as before.
const (
	threadAbove = 200 * time.Microsecond
	threadBelow = threadAbove / 4 // back to the direct call when the driver is fast again
)

type batchThread struct {
	t    *C.struct_gt_batch_thread
	done *os.File
	buf  [8]byte
	on   bool
	avg  time.Duration // moving average of the batch's time in the driver
}

// call runs the batch x.b, directly or on the GPU's thread.
func (x *nativeExec) call() {
	th := &x.th
	if th.on {
		th.run()
		th.note(time.Duration(C.int64_t(th.t.last_ns)))
		if th.avg < threadBelow {
			th.on = false
		}
		return
	}
	t0 := time.Now()
	C.gt_batch_run(x.dev, x.b)
	th.note(time.Since(t0))
	if th.avg > threadAbove && th.start(x) {
		th.on = true
	}
}

func (th *batchThread) note(d time.Duration) { th.avg += (d - th.avg) / 8 }

// start creates the thread once; false if it cannot (the direct call stays).
func (th *batchThread) start(x *nativeExec) bool {
	if th.t != nil {
		return true
	}
	t := (*C.struct_gt_batch_thread)(C.calloc(1, C.size_t(unsafe.Sizeof(C.struct_gt_batch_thread{}))))
	t.dev, t.b = x.dev, x.b
	if C.gt_batch_thread_start(t) != 0 {
		C.free(unsafe.Pointer(t))
		return false
	}
	th.t, th.done = t, os.NewFile(uintptr(t.done), "gpu-batch-done")
	return true
}

// run hands the batch to the thread and waits for it without holding a P.
func (th *batchThread) run() {
	one := [8]byte{1}
	for {
		if _, err := unix.Write(int(th.t.req), one[:]); err != unix.EINTR {
			break
		}
	}
	th.done.Read(th.buf[:])
}
