// See fsync.h.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include "fsync.h"

#define GT_MAXFD 256

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int started;
static int busy;      // a batch is queued or running
static int queue[GT_MAXFD];
static int queued;
static unsigned long long seq;     // the last batch submitted
static unsigned long long batches; // batches completed
static int results[GT_MAXFD];      // errno per descriptor of batch seq, once completed
static int nresults;

static void *run(void *arg)
{
	(void)arg;
	sigset_t all;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL); // signals belong to Go's threads
	// Named so that its CPU (the kernel's share of the durability bound)
	// can be told apart in /proc/<pid>/task/*/comm (make bench does).
	pthread_setname_np(pthread_self(), "gt-fsync");
	for (;;) {
		int fds[GT_MAXFD], errs[GT_MAXFD], n;
		pthread_mutex_lock(&mu);
		while (queued == 0)
			pthread_cond_wait(&cv, &mu);
		n = queued;
		memcpy(fds, queue, sizeof(int) * (size_t)n);
		queued = 0;
		pthread_mutex_unlock(&mu);
		// Start every file's writeback first, then wait for each: the
		// files' data goes to the disk together and the first fdatasync's
		// journal commit covers the others' new sizes, so the later ones
		// mostly find their work done instead of each waiting for its own
		// writeback and commit (fewer sleeps of this thread per round).
		// sync_file_range only starts the writeback; fdatasync still gives
		// the durability, file by file. Its result is ignored on purpose:
		// it is a head start, not a sync. If it fails (EINVAL/ESPIPE on a
		// descriptor that is not a regular file, EIO or ENOSPC at
		// submission), the fdatasync below still writes the file and
		// returns the error that matters: an I/O error is recorded in the
		// file's mapping, and SYNC_FILE_RANGE_WRITE without WAIT does not
		// consume it, so fdatasync reports it and the round counts it
		// (sync_errors). A failed head start only costs this thread time.
		for (int i = 0; i < n; i++)
			sync_file_range(fds[i], 0, 0, SYNC_FILE_RANGE_WRITE);
		for (int i = 0; i < n; i++) {
			errs[i] = fdatasync(fds[i]) != 0 ? errno : 0;
			close(fds[i]);
		}
		pthread_mutex_lock(&mu);
		memcpy(results, errs, sizeof(int) * (size_t)n);
		nresults = n;
		busy = 0;
		batches++;
		pthread_mutex_unlock(&mu);
	}
	return NULL;
}

unsigned long long gt_fsync_submit(const int *fds, int n)
{
	if (n <= 0 || n > GT_MAXFD)
		return 0;
	pthread_mutex_lock(&mu);
	if (!started) {
		pthread_t t;
		pthread_attr_t attr;
		pthread_attr_init(&attr);
		pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
		pthread_attr_setstacksize(&attr, 64 * 1024);
		if (pthread_create(&t, &attr, run, NULL) != 0) {
			pthread_attr_destroy(&attr);
			pthread_mutex_unlock(&mu);
			return 0;
		}
		pthread_attr_destroy(&attr);
		started = 1;
	}
	if (busy) {
		pthread_mutex_unlock(&mu);
		return 0;
	}
	memcpy(queue, fds, sizeof(int) * (size_t)n);
	queued = n;
	busy = 1;
	nresults = 0;
	unsigned long long s = ++seq;
	pthread_cond_signal(&cv);
	pthread_mutex_unlock(&mu);
	return s;
}

int gt_fsync_result(unsigned long long s, int *errnos, int n)
{
	int rc;
	pthread_mutex_lock(&mu);
	if (s == 0 || s != seq) {
		rc = -1;
	} else if (busy) {
		rc = 0;
	} else {
		if (n > nresults)
			n = nresults;
		if (n > 0)
			memcpy(errnos, results, sizeof(int) * (size_t)n);
		rc = 1;
	}
	pthread_mutex_unlock(&mu);
	return rc;
}

void gt_fsync_stats(unsigned long long *b)
{
	pthread_mutex_lock(&mu);
	*b = batches;
	pthread_mutex_unlock(&mu);
}
