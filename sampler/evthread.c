// See evthread.h. NVML's symbols are looked up with dlsym in the library
// go-nvml loaded with RTLD_GLOBAL; a missing symbol is reported, never called.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "evthread.h"
#include "nvml_abi.h"

#define GT_MAXGPU 64
// How long one wait lasts: the longest the thread takes to notice that Go
// asked it to end (a timeout costs nothing: the thread is invisible to the Go
// scheduler).
#define GT_WAIT_MS 1000

typedef void *nvml_device;
typedef void *nvml_set;

typedef int (*fn_create)(nvml_set *);
typedef int (*fn_free)(nvml_set);
typedef int (*fn_handle)(unsigned int, nvml_device *);
typedef int (*fn_register)(nvml_device, unsigned long long, nvml_set);
typedef int (*fn_wait)(nvml_set, struct gt_nvml_event_data *, unsigned int);

struct gt_state {
	nvml_set set;
	int fd;
	int n;
	int index[GT_MAXGPU];
	nvml_device dev[GT_MAXGPU];
	fn_wait wait;
	fn_free free_set;
};

static int running;

int gt_events_running(void) { return __atomic_load_n(&running, __ATOMIC_ACQUIRE); }

static void *sym(const char *name) { return dlsym(RTLD_DEFAULT, name); }

static int send_rec(int fd, const struct gt_event *e)
{
	for (;;) {
		ssize_t r = send(fd, e, sizeof(*e), MSG_NOSIGNAL);
		if (r == (ssize_t)sizeof(*e))
			return 0;
		if (r < 0 && errno == EINTR)
			continue;
		return -1; // Go closed its end: stop
	}
}

// peer_ended reports whether Go shut down its sending side or closed the
// socket (Go never sends data, so anything readable is the end).
static int peer_ended(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLIN | POLLRDHUP };
	return poll(&p, 1, 0) > 0 && (p.revents & (POLLIN | POLLHUP | POLLERR | POLLRDHUP));
}

static void *run(void *arg)
{
	struct gt_state *st = arg;
	struct gt_nvml_event_data d;
	struct gt_event e;
	sigset_t all;

	// Signals belong to Go's threads.
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	pthread_setname_np(pthread_self(), "gt-events"); // tell it apart in /proc/<pid>/task
	while (!peer_ended(st->fd)) {
		memset(&d, 0, sizeof(d));
		int ret = st->wait(st->set, &d, GT_WAIT_MS);
		if (ret == GT_NVML_ERROR_TIMEOUT)
			continue;
		memset(&e, 0, sizeof(e));
		e.index = -1;
		if (ret != GT_NVML_SUCCESS) {
			// The set failed: report it and end. Go opens a new set
			// (with back-off) once it has read this thread's end.
			e.kind = GT_EV_ERROR;
			e.ret = ret;
			send_rec(st->fd, &e);
			break;
		}
		e.kind = GT_EV_EVENT;
		for (int i = 0; i < st->n; i++) {
			if (st->dev[i] == d.device) {
				e.index = st->index[i];
				break;
			}
		}
		e.type = d.type;
		e.data = d.data;
		if (send_rec(st->fd, &e) != 0)
			break;
	}
	if (st->free_set)
		st->free_set(st->set);
	int fd = st->fd;
	free(st);
	__atomic_fetch_sub(&running, 1, __ATOMIC_ACQ_REL);
	close(fd); // last: Go reads end-of-file only after all of the above
	return NULL;
}

int gt_events_start(const int *indexes, const uint64_t *masks, uint64_t *registered, int n, int fd)
{
	fn_create create = (fn_create)sym("nvmlEventSetCreate");
	fn_free free_set = (fn_free)sym("nvmlEventSetFree");
	fn_handle handle = (fn_handle)sym("nvmlDeviceGetHandleByIndex_v2");
	fn_register reg = (fn_register)sym("nvmlDeviceRegisterEvents");
	fn_wait wait = (fn_wait)sym("nvmlEventSetWait_v2");
	if (!wait)
		wait = (fn_wait)sym("nvmlEventSetWait");
	if (!handle)
		handle = (fn_handle)sym("nvmlDeviceGetHandleByIndex");
	if (!create || !handle || !reg || !wait || n > GT_MAXGPU)
		return GT_EV_NO_SYMBOL;

	struct gt_state *st = calloc(1, sizeof(*st));
	if (!st)
		return GT_EV_NO_THREAD;
	int ret = create(&st->set);
	if (ret != GT_NVML_SUCCESS) {
		free(st);
		return ret;
	}
	st->fd = fd;
	st->wait = wait;
	st->free_set = free_set;
	int any = 0;
	for (int i = 0; i < n; i++) {
		registered[i] = 0;
		uint64_t mask = masks[i];
		if (mask == 0)
			continue; // not ready (or supports nothing): do not touch it
		nvml_device dev = NULL;
		if (handle((unsigned int)indexes[i], &dev) != GT_NVML_SUCCESS)
			continue;
		if (reg(dev, mask, st->set) != GT_NVML_SUCCESS) {
			// Some drivers refuse a mask as a whole: type by type.
			uint64_t ok = 0;
			for (uint64_t bit = 1; bit && bit <= mask; bit <<= 1)
				if ((mask & bit) && reg(dev, bit, st->set) == GT_NVML_SUCCESS)
					ok |= bit;
			mask = ok;
		}
		registered[i] = mask;
		if (mask) {
			st->index[st->n] = indexes[i];
			st->dev[st->n] = dev;
			st->n++;
			any = 1;
		}
	}
	if (!any) {
		if (free_set)
			free_set(st->set);
		free(st);
		return GT_NVML_ERROR_NOT_SUPPORTED;
	}
	pthread_attr_t attr;
	pthread_t t;
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&attr, 64 * 1024);
	__atomic_fetch_add(&running, 1, __ATOMIC_ACQ_REL);
	ret = pthread_create(&t, &attr, run, st);
	pthread_attr_destroy(&attr);
	if (ret != 0) {
		__atomic_fetch_sub(&running, 1, __ATOMIC_ACQ_REL);
		if (free_set)
			free_set(st->set);
		free(st);
		return GT_EV_NO_THREAD;
	}
	return 0;
}
