// fsync: fdatasync on a plain thread, outside the Go scheduler. A goroutine in
// a slow syscall makes the runtime hand its P to another thread and wake its
// monitor; at eight files a second that churn cost more CPU than the syncs.
#ifndef GPU_TELEMETRY_FSYNC_H
#define GPU_TELEMETRY_FSYNC_H

// gt_fsync_submit queues n file descriptors (the callee owns and closes them)
// for fdatasync on the sync thread. It returns 0, or -1 when the previous
// batch is still running (the caller keeps ownership and should close them).
int gt_fsync_submit(const int *fds, int n);

// gt_fsync_done returns how many batches completed and how many fdatasync
// calls failed, for the sink's counters.
void gt_fsync_stats(unsigned long long *batches, unsigned long long *errors);

#endif
