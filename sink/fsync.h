// fsync: fdatasync on a plain thread, outside the Go scheduler. A goroutine in
// a slow syscall makes the runtime hand its P to another thread and wake its
// monitor; at eight files a second that churn cost more CPU than the syncs.
#ifndef GPU_TELEMETRY_FSYNC_H
#define GPU_TELEMETRY_FSYNC_H

// gt_fsync_submit queues n file descriptors (the callee owns and closes them)
// for fdatasync on the sync thread. It returns the batch's sequence number
// (1, 2, ...), or 0 when the previous batch is still running or n is out of
// range (the caller keeps ownership and should close them).
unsigned long long gt_fsync_submit(const int *fds, int n);

// gt_fsync_result copies batch seq's outcome into errnos: per descriptor, in
// the order submitted, 0 or the errno fdatasync failed with. It returns 1
// when copied, 0 while the batch is still running, and -1 when its outcome
// is gone (a later batch replaced it) or seq was never submitted.
int gt_fsync_result(unsigned long long seq, int *errnos, int n);

// gt_fsync_stats returns how many batches completed, process-wide.
void gt_fsync_stats(unsigned long long *batches);

#endif
