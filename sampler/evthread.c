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

#define GT_MAXGPU 64
#define NVML_SUCCESS 0
#define NVML_ERROR_TIMEOUT 10

typedef void *nvml_device;
typedef void *nvml_set;

// nvmlEventData_t from nvml.h.
struct nvml_event_data {
	nvml_device device;
	unsigned long long type;
	unsigned long long data;
	unsigned int gpu_instance;
	unsigned int compute_instance;
};

typedef int (*fn_create)(nvml_set *);
typedef int (*fn_free)(nvml_set);
typedef int (*fn_handle)(unsigned int, nvml_device *);
typedef int (*fn_register)(nvml_device, unsigned long long, nvml_set);
typedef int (*fn_wait)(nvml_set, struct nvml_event_data *, unsigned int);

struct gt_state {
	nvml_set set;
	int fd;
	int n;
	int index[GT_MAXGPU];
	nvml_device dev[GT_MAXGPU];
	fn_wait wait;
	fn_free free_set;
	int32_t *alive;
};

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

static void *run(void *arg)
{
	struct gt_state *st = arg;
	struct nvml_event_data d;
	struct gt_event e;
	unsigned int backoff = 1;
	sigset_t all;

	// Signals belong to Go's threads.
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	for (;;) {
		memset(&d, 0, sizeof(d));
		// A timeout costs nothing here: this thread is invisible to the Go
		// scheduler. Go stops listening by closing the socket; the timeout
		// bounds how long the thread takes to notice at shutdown.
		int ret = st->wait(st->set, &d, 1000);
		memset(&e, 0, sizeof(e));
		if (ret == NVML_ERROR_TIMEOUT) {
			// A closed Go end ends the thread.
			struct pollfd p = { .fd = st->fd, .events = POLLRDHUP };
			if (poll(&p, 1, 0) > 0 && (p.revents & (POLLHUP | POLLERR | POLLRDHUP)))
				break;
			continue;
		}
		if (ret != NVML_SUCCESS) {
			e.kind = 1;
			e.ret = ret;
			e.index = -1;
			if (send_rec(st->fd, &e) != 0)
				break;
			sleep(backoff); // the set failed: do not spin
			if (backoff < 30)
				backoff *= 2;
			continue;
		}
		backoff = 1;
		e.index = -1;
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
	close(st->fd);
	int32_t *alive = st->alive;
	free(st);
	__atomic_store_n(alive, 0, __ATOMIC_RELEASE);
	return NULL;
}

int gt_events_start(const int *indexes, const uint64_t *masks, uint64_t *registered, int n, int fd, int32_t *alive)
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
		return -1;

	struct gt_state *st = calloc(1, sizeof(*st));
	if (!st)
		return -2;
	int ret = create(&st->set);
	if (ret != NVML_SUCCESS) {
		free(st);
		return ret;
	}
	st->fd = fd;
	st->wait = wait;
	st->free_set = free_set;
	st->alive = alive;
	int any = 0;
	for (int i = 0; i < n; i++) {
		registered[i] = 0;
		uint64_t mask = masks[i];
		if (mask == 0)
			continue; // not ready (or supports nothing): do not touch it
		nvml_device dev = NULL;
		if (handle((unsigned int)indexes[i], &dev) != NVML_SUCCESS)
			continue;
		if (reg(dev, mask, st->set) != NVML_SUCCESS) {
			// Some drivers refuse a mask as a whole: type by type.
			uint64_t ok = 0;
			for (uint64_t bit = 1; bit && bit <= mask; bit <<= 1)
				if ((mask & bit) && reg(dev, bit, st->set) == NVML_SUCCESS)
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
		return 3; // NVML_ERROR_NOT_SUPPORTED
	}
	pthread_attr_t attr;
	pthread_t t;
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&attr, 64 * 1024);
	__atomic_store_n(alive, 1, __ATOMIC_RELEASE);
	ret = pthread_create(&t, &attr, run, st);
	pthread_attr_destroy(&attr);
	if (ret != 0) {
		__atomic_store_n(alive, 0, __ATOMIC_RELEASE);
		if (free_set)
			free_set(st->set);
		free(st);
		return -2;
	}
	return 0;
}
