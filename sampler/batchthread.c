// See batchthread.h.
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "batchthread.h"

static int64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void *loop(void *arg)
{
	struct gt_batch_thread *t = arg;
	uint64_t v;

	pthread_setname_np(pthread_self(), "gt-batch"); // tell it apart in /proc/<pid>/task
	for (;;) {
		if (read(t->req, &v, sizeof(v)) != sizeof(v)) {
			if (errno == EINTR || errno == EAGAIN)
				continue;
			return NULL;
		}
		int64_t t0 = mono_ns();
		gt_batch_run(t->dev, t->b);
		__atomic_store_n(&t->last_ns, mono_ns() - t0, __ATOMIC_RELAXED);
		v = 1;
		while (write(t->done, &v, sizeof(v)) < 0 && errno == EINTR)
			;
	}
}

int gt_batch_thread_start(struct gt_batch_thread *t)
{
	pthread_t th;
	pthread_attr_t attr;
	sigset_t all, old;
	int rc;

	t->req = eventfd(0, EFD_CLOEXEC);
	if (t->req < 0)
		return errno;
	t->done = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (t->done < 0) {
		rc = errno;
		close(t->req);
		return rc;
	}
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&attr, 256 * 1024);
	rc = pthread_create(&th, &attr, loop, t);
	pthread_attr_destroy(&attr);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc != 0) {
		close(t->req);
		close(t->done);
	}
	return rc;
}
