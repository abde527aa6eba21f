// See evthread.h. NVML's symbols are looked up with gt_sym (batch.c) in the
// library go-nvml loaded with RTLD_GLOBAL; a missing symbol is reported,
// never called.
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "batch.h"
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
typedef int (*fn_register_op)(nvml_set, const struct gt_nvml_opev_config *);
typedef int (*fn_wait3)(nvml_set, struct gt_nvml_wait_v3 *);
typedef int (*fn_ctx_count)(nvml_set, struct gt_nvml_context_count *);
typedef int (*fn_ctx_info)(nvml_set, struct gt_nvml_context_info *);
typedef int (*fn_ctx_xid)(nvml_set, struct gt_nvml_context_legacy_xid *);

struct gt_state {
	nvml_set set;
	int fd;
	int n;
	int index[GT_MAXGPU];
	nvml_device dev[GT_MAXGPU];
	char uuid[GT_MAXGPU][GT_NVML_UUID_V2_SIZE]; // operational events only
	fn_wait wait;
	fn_free free_set;
	// Set when operational events are subscribed: the thread waits with
	// wait3 (both kinds of event come through it) and reads the contexts.
	fn_wait3 wait3;
	fn_ctx_count ctx_count;
	fn_ctx_info ctx_info;
	fn_ctx_xid ctx_xid;
};

static int running;

int gt_events_running(void) { return __atomic_load_n(&running, __ATOMIC_ACQUIRE); }

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

// gpu_of returns the index of the GPU with uuid (an operational-event wait
// names its GPU so), -1 when none; a set of one GPU (the sampler opens one a
// GPU) takes every event as its own, as nvmlEventSetWait's did.
static int gpu_of(const struct gt_state *st, const char *uuid)
{
	for (int i = 0; i < st->n; i++)
		if (uuid[0] && strncmp(st->uuid[i], uuid, GT_NVML_UUID_V2_SIZE) == 0)
			return st->index[i];
	return st->n == 1 ? st->index[0] : -1;
}

// read_op fills e from operational event w and the set's context records,
// which stay valid until the set's next wait (this thread's).
static void read_op(const struct gt_state *st, const struct gt_nvml_wait_v3 *w, struct gt_event *e)
{
	e->op = 1;
	e->w = *w;
	struct gt_nvml_context_count c = { 0 };
	if (!st->ctx_count || st->ctx_count(st->set, &c) != GT_NVML_SUCCESS)
		return;
	e->ncontext = c.count;
	for (unsigned int i = 0; i < c.count && i < GT_EV_MAXCTX; i++) {
		struct gt_ev_context *x = &e->ctx[i];
		x->info.index = i;
		x->ret = st->ctx_info ? st->ctx_info(st->set, &x->info) : GT_NVML_ERROR_FUNCTION_NOT_FOUND;
		if (x->ret != GT_NVML_SUCCESS)
			continue;
		struct gt_nvml_context_legacy_xid lx = { .index = i };
		if (x->info.nvml_type == GT_NVML_OPEV_CONTEXT_TYPE_LEGACY_XID && st->ctx_xid &&
		    st->ctx_xid(st->set, &lx) == GT_NVML_SUCCESS) {
			x->has_xid = 1;
			x->xid = lx.xid_code;
		}
	}
}

// wait_one waits for the next event into e (kind, index and the event's
// fields): NVML's return code.
static int wait_one(const struct gt_state *st, struct gt_event *e)
{
	if (st->wait3) {
		struct gt_nvml_wait_v3 w = { .timeout_ms = GT_WAIT_MS };
		int ret = st->wait3(st->set, &w);
		if (ret != GT_NVML_SUCCESS)
			return ret;
		w.uuid[sizeof(w.uuid) - 1] = 0;
		e->index = gpu_of(st, w.uuid);
		if (w.data_type == GT_NVML_EVENT_DATA_TYPE_GPU_OPERATIONAL_EVENT) {
			read_op(st, &w, e);
		} else {
			e->type = w.event_type;
			e->data = w.event_data;
		}
		return ret;
	}
	struct gt_nvml_event_data d = { 0 };
	int ret = st->wait(st->set, &d, GT_WAIT_MS);
	if (ret != GT_NVML_SUCCESS)
		return ret;
	for (int i = 0; i < st->n; i++) {
		if (st->dev[i] == d.device) {
			e->index = st->index[i];
			break;
		}
	}
	e->type = d.type;
	e->data = d.data;
	return ret;
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
	struct gt_event e;
	sigset_t all;

	// Signals belong to Go's threads.
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	pthread_setname_np(pthread_self(), "gt-events"); // tell it apart in /proc/<pid>/task
	while (!peer_ended(st->fd)) {
		memset(&e, 0, sizeof(e));
		e.index = -1;
		int ret = wait_one(st, &e);
		if (ret == GT_NVML_ERROR_TIMEOUT)
			continue;
		if (ret != GT_NVML_SUCCESS) {
			// The set failed: report it and end. Go opens a new set
			// (with back-off) once it has read this thread's end.
			e.kind = GT_EV_ERROR;
			e.ret = ret;
			send_rec(st->fd, &e);
			break;
		}
		e.kind = GT_EV_EVENT;
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

// register_gpu registers dev for the types in mask on set and returns those
// registered; *fail gets the first refusal other than NOT_SUPPORTED (which
// says the GPU lacks the type), if none was had before.
static uint64_t register_gpu(fn_register reg, nvml_device dev, uint64_t mask, nvml_set set, int *fail)
{
	int r = reg(dev, mask, set);
	if (r == GT_NVML_SUCCESS)
		return mask;
	if (r == GT_NVML_ERROR_GPU_IS_LOST) {
		if (*fail == GT_NVML_SUCCESS)
			*fail = r;
		return 0; // not called again
	}
	// Some drivers refuse a mask as a whole: type by type.
	uint64_t ok = 0;
	for (uint64_t bit = 1; bit && bit <= mask; bit <<= 1) {
		if (!(mask & bit))
			continue;
		r = reg(dev, bit, set);
		if (r == GT_NVML_SUCCESS) {
			ok |= bit;
			continue;
		}
		if (r != GT_NVML_ERROR_NOT_SUPPORTED && *fail == GT_NVML_SUCCESS)
			*fail = r;
		if (r == GT_NVML_ERROR_GPU_IS_LOST)
			break;
	}
	return ok;
}

int gt_events_start(const int *indexes, const uint64_t *masks, const char *const *uuids, uint64_t *registered, int n, int fd,
		    int *opstate, int *why)
{
	fn_create create = (fn_create)gt_sym("nvmlEventSetCreate", NULL);
	fn_free free_set = (fn_free)gt_sym("nvmlEventSetFree", NULL);
	fn_handle handle = (fn_handle)gt_sym("nvmlDeviceGetHandleByIndex_v2", "nvmlDeviceGetHandleByIndex");
	fn_register reg = (fn_register)gt_sym("nvmlDeviceRegisterEvents", NULL);
	fn_wait wait = (fn_wait)gt_sym("nvmlEventSetWait_v2", "nvmlEventSetWait");
	if (!create || !handle || !reg || !wait || n > GT_MAXGPU)
		return GT_EV_NO_SYMBOL;
	fn_register_op reg_op = (fn_register_op)gt_sym("nvmlEventSetRegisterGpuOperationalEvents_v1", NULL);
	fn_wait3 wait3 = (fn_wait3)gt_sym("nvmlEventSetWait_v3", NULL);
	*opstate = reg_op && wait3 ? GT_NVML_ERROR_NOT_SUPPORTED : GT_OP_NO_SYMBOL;

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
	*why = GT_NVML_SUCCESS; // the first failed call (a handle, a registration), returned on success too
	for (int i = 0; i < n; i++) {
		registered[i] = 0;
		uint64_t mask = masks[i];
		if (mask == 0)
			continue; // not ready (or supports nothing): do not touch it
		nvml_device dev = NULL;
		int r = handle((unsigned int)indexes[i], &dev);
		if (r != GT_NVML_SUCCESS) {
			if (*why == GT_NVML_SUCCESS)
				*why = r;
			continue;
		}
		mask = register_gpu(reg, dev, mask, st->set, why);
		registered[i] = mask;
		if (mask) {
			st->index[st->n] = indexes[i];
			st->dev[st->n] = dev;
			if (*opstate != GT_OP_NO_SYMBOL && uuids[i] && uuids[i][0]) {
				// No filter: every log level and severity (the zeros).
				struct gt_nvml_opev_config c = { 0 };
				strncpy(c.uuid, uuids[i], sizeof(c.uuid) - 1);
				int r = reg_op(st->set, &c);
				if (r == GT_NVML_SUCCESS) {
					*opstate = GT_OP_REGISTERED;
					memcpy(st->uuid[st->n], c.uuid, sizeof(c.uuid));
				} else if (*opstate != GT_OP_REGISTERED) {
					*opstate = r;
				}
			}
			st->n++;
		}
	}
	if (*opstate == GT_OP_REGISTERED) {
		st->wait3 = wait3;
		st->ctx_count = (fn_ctx_count)gt_sym("nvmlEventSetGetContextCount_v1", NULL);
		st->ctx_info = (fn_ctx_info)gt_sym("nvmlEventSetGetContextInfo_v1", NULL);
		st->ctx_xid = (fn_ctx_xid)gt_sym("nvmlEventSetGetGpuOperationalEventContextLegacyXid_v1", NULL);
	}
	if (st->n == 0) {
		ret = *why == GT_NVML_SUCCESS ? GT_EV_NONE_SUPPORTED : GT_EV_NOT_REGISTERED;
		goto fail;
	}
	pthread_attr_t attr;
	pthread_t t;
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&attr, 64 * 1024);
	__atomic_fetch_add(&running, 1, __ATOMIC_ACQ_REL);
	ret = pthread_create(&t, &attr, run, st);
	pthread_attr_destroy(&attr);
	if (ret == 0)
		return 0;
	__atomic_fetch_sub(&running, 1, __ATOMIC_ACQ_REL);
	ret = GT_EV_NO_THREAD;
fail:
	if (free_set)
		free_set(st->set);
	free(st);
	return ret;
}
