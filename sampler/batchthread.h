// batchthread: a GPU's sample batches (batch.h) run on a C thread of its
// own, when the driver is slow (see batchthread.go).
#ifndef GPU_TELEMETRY_BATCHTHREAD_H
#define GPU_TELEMETRY_BATCHTHREAD_H

#include <stdint.h>

#include "batch.h"

struct gt_batch_thread {
	gt_dev dev;
	struct gt_batch *b;
	int req;         // eventfd: Go writes 1 to start a batch
	int done;        // eventfd (non-blocking, read through Go's poller): 1 per finished batch
	int64_t last_ns; // how long the last batch took inside the driver
};

// gt_batch_thread_start creates the eventfds and a detached thread with
// every signal blocked; 0 or an errno.
int gt_batch_thread_start(struct gt_batch_thread *t);

#endif
