/*
 * events.c - NVML event sets over the precomputed event timeline, and the
 * background thread that writes Xid records in /dev/kmsg format to the file
 * named by SIMNVML_KMSG. Events and records the scenario did not script (the
 * thermal model's crash, fans.c) are added while it runs, to short lists of
 * their own.
 */
#include "sim.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SIM_EVENT_BITS 16 /* event types are bits 0..15 (nvmlEventType*) */

struct nvmlEventSet_st {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int ready; /* mu/cv initialised */
	int inuse;
	unsigned int gen;
	size_t cursor; /* next timeline event this set has not looked at */
	unsigned long long mask[SIM_MAX_GPUS];
	int64_t regt[SIM_MAX_GPUS][SIM_EVENT_BITS]; /* registration time per type */
	uint64_t added_seen[SIM_MAX_ADDED / 64]; /* the added events this set has looked at */
	/* GPU operational events: the time each GPU subscribed (-1: not),
	 * and the last event nvmlEventSetWait_v3 returned (its contexts). */
	int64_t opt[SIM_MAX_GPUS];
	const struct sim_event *last;
};

struct sim_event *g_events;
size_t g_nevents;
struct sim_kmsg *g_kmsgs;
size_t g_nkmsgs;

static struct nvmlEventSet_st g_sets[SIM_MAX_SETS];
static pthread_mutex_t g_sets_mu = PTHREAD_MUTEX_INITIALIZER;

/* Events added while running, in the order they were added (not by time):
 * entries below g_nadded (atomic, release) are complete. */
static struct sim_event g_added[SIM_MAX_ADDED];
static unsigned int g_nadded;
static pthread_mutex_t g_added_mu = PTHREAD_MUTEX_INITIALIZER;

int sim_add_event(int64_t t, unsigned int gpu, unsigned long long type, unsigned long long data)
{
	unsigned int n;
	int i;

	pthread_mutex_lock(&g_added_mu);
	n = g_nadded;
	if (n == SIM_MAX_ADDED) {
		pthread_mutex_unlock(&g_added_mu);
		return -1;
	}
	g_added[n] = (struct sim_event){ .t = t, .gpu = gpu, .type = type, .data = data };
	__atomic_store_n(&g_nadded, n + 1, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&g_added_mu);

	/* A waiting set sleeps until the events it knew of; wake it. */
	pthread_mutex_lock(&g_sets_mu);
	for (i = 0; i < SIM_MAX_SETS; i++) {
		struct nvmlEventSet_st *s = &g_sets[i];
		if (!s->ready)
			continue;
		pthread_mutex_lock(&s->mu);
		pthread_cond_broadcast(&s->cv);
		pthread_mutex_unlock(&s->mu);
	}
	pthread_mutex_unlock(&g_sets_mu);
	return 0;
}

static struct nvmlEventSet_st *set_of(nvmlEventSet_t set)
{
	struct nvmlEventSet_st *s = set.handle;
	uintptr_t off;

	if (s < &g_sets[0] || s >= &g_sets[SIM_MAX_SETS])
		return NULL;
	off = (uintptr_t)s - (uintptr_t)&g_sets[0];
	if (off % sizeof(g_sets[0]) != 0)
		return NULL;
	return s;
}

static size_t first_event_at_or_after(int64_t t)
{
	size_t lo = 0, hi = g_nevents;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (g_events[mid].t < t)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t *set)
{
	struct nvmlEventSet_st *s = NULL;
	int64_t now;
	int i;

	SIM_COUNT(nvmlEventSetCreate);
	if (!sim_initialized())
		return NVML_ERROR_UNINITIALIZED;
	if (set == NULL)
		return NVML_ERROR_INVALID_ARGUMENT;
	now = sim_now();
	pthread_mutex_lock(&g_sets_mu);
	for (i = 0; i < SIM_MAX_SETS; i++) {
		if (!g_sets[i].inuse) {
			s = &g_sets[i];
			break;
		}
	}
	if (s == NULL) {
		pthread_mutex_unlock(&g_sets_mu);
		return NVML_ERROR_MEMORY;
	}
	if (!s->ready) {
		pthread_condattr_t ca;
		pthread_condattr_init(&ca);
		pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
		pthread_cond_init(&s->cv, &ca);
		pthread_condattr_destroy(&ca);
		pthread_mutex_init(&s->mu, NULL);
		s->ready = 1;
	}
	pthread_mutex_lock(&s->mu);
	s->inuse = 1;
	s->cursor = first_event_at_or_after(now);
	memset(s->mask, 0, sizeof(s->mask));
	memset(s->added_seen, 0, sizeof(s->added_seen));
	for (i = 0; i < SIM_MAX_GPUS; i++)
		s->opt[i] = -1;
	s->last = NULL;
	pthread_mutex_unlock(&s->mu);
	pthread_mutex_unlock(&g_sets_mu);
	set->handle = s;
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t set)
{
	struct nvmlEventSet_st *s;
	nvmlReturn_t r = NVML_SUCCESS;

	SIM_COUNT(nvmlEventSetFree);
	if (!sim_initialized())
		return NVML_ERROR_UNINITIALIZED;
	s = set_of(set);
	if (s == NULL)
		return NVML_ERROR_INVALID_ARGUMENT;
	pthread_mutex_lock(&g_sets_mu);
	if (!s->ready) {
		pthread_mutex_unlock(&g_sets_mu);
		return NVML_ERROR_INVALID_ARGUMENT;
	}
	pthread_mutex_lock(&s->mu);
	if (!s->inuse) {
		r = NVML_ERROR_INVALID_ARGUMENT;
	} else {
		s->inuse = 0;
		s->gen++;
		pthread_cond_broadcast(&s->cv);
	}
	pthread_mutex_unlock(&s->mu);
	pthread_mutex_unlock(&g_sets_mu);
	return r;
}

nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t device, unsigned long long eventTypes, nvmlEventSet_t set)
{
	struct nvmlDevice_st *d;
	struct nvmlEventSet_st *s;
	int64_t now;
	nvmlReturn_t r;
	int bit;

	SIM_COUNT(nvmlDeviceRegisterEvents);
	r = sim_dev_enter(FN_nvmlDeviceRegisterEvents, device, &d, &now);
	if (r != NVML_SUCCESS)
		return r;
	s = set_of(set);
	if (s == NULL || !s->ready)
		return NVML_ERROR_INVALID_ARGUMENT;
	if ((eventTypes & ~d->supported_events) != 0)
		return NVML_ERROR_NOT_SUPPORTED;
	pthread_mutex_lock(&s->mu);
	if (!s->inuse) {
		pthread_mutex_unlock(&s->mu);
		return NVML_ERROR_INVALID_ARGUMENT;
	}
	for (bit = 0; bit < SIM_EVENT_BITS; bit++) {
		unsigned long long b = 1ULL << bit;
		if ((eventTypes & b) && !(s->mask[d->index] & b))
			s->regt[d->index][bit] = now;
	}
	s->mask[d->index] |= eventTypes;
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->mu);
	return NVML_SUCCESS;
}

/* eventset_fault applies the "eventset fail|hang" statements active at now:
 * a hang blocks until it ends; it returns the code to return, or
 * NVML_SUCCESS to wait normally. */
static nvmlReturn_t eventset_fault(int64_t now)
{
	unsigned int i;

	for (i = 0; i < g_host.nevfaults; i++) {
		const struct sim_evfault *f = &g_host.evfaults[i];
		if (now < f->from || now >= f->until)
			continue;
		if (f->hang)
			sim_sleep_until(f->until);
		if (f->code != NVML_SUCCESS || f->hang)
			return f->code;
	}
	return NVML_SUCCESS;
}

/* eventset_failing returns the code of an "eventset fail" active at now
 * (it also ends a wait in progress), or NVML_SUCCESS. */
static nvmlReturn_t eventset_failing(int64_t now)
{
	unsigned int i;

	for (i = 0; i < g_host.nevfaults; i++) {
		const struct sim_evfault *f = &g_host.evfaults[i];
		if (!f->hang && f->code != NVML_SUCCESS && now >= f->from && now < f->until)
			return f->code;
	}
	return NVML_SUCCESS;
}

/* next_eventset_fail returns the earlier of wake and the next "eventset fail"
 * start after now. */
static int64_t next_eventset_fail(int64_t now, int64_t wake)
{
	unsigned int i;

	for (i = 0; i < g_host.nevfaults; i++) {
		const struct sim_evfault *f = &g_host.evfaults[i];
		if (!f->hang && f->code != NVML_SUCCESS && f->from > now && f->from < wake)
			wake = f->from;
	}
	return wake;
}

/* wanted reports whether set s registered for e's type on e's GPU no later
 * than e happened (nothing is delivered retroactively); an operational
 * event only to a subscribed set waited on with _v3. */
static int wanted(const struct nvmlEventSet_st *s, const struct sim_event *e, int v3)
{
	int bit;

	if (e->op != NULL)
		return v3 && s->opt[e->gpu] >= 0 && s->opt[e->gpu] <= e->t;
	bit = __builtin_ctzll(e->type);
	return (s->mask[e->gpu] & e->type) && s->regt[e->gpu][bit] <= e->t;
}

static void fill(nvmlEventData_t *data, const struct sim_event *e, int v2)
{
	data->device.handle = &g_devs[e->gpu];
	data->eventType = e->type;
	data->eventData = e->data;
	if (v2) { /* the v1 struct ends after eventData */
		data->gpuInstanceId = 0xFFFFFFFFu;
		data->computeInstanceId = 0xFFFFFFFFu;
	}
}

/* next_added returns the first added event due at now that set s has not
 * looked at (marking it looked at), or NULL; *wake becomes the earlier of
 * itself and the next added event after now. */
static const struct sim_event *next_added(struct nvmlEventSet_st *s, int64_t now, int64_t *wake)
{
	unsigned int i, n = __atomic_load_n(&g_nadded, __ATOMIC_ACQUIRE);

	for (i = 0; i < n; i++) {
		const struct sim_event *e = &g_added[i];
		if (s->added_seen[i / 64] & (1ULL << (i % 64)))
			continue;
		if (e->t > now) {
			if (e->t < *wake)
				*wake = e->t;
			continue;
		}
		s->added_seen[i / 64] |= 1ULL << (i % 64);
		return e;
	}
	return NULL;
}

/* wait_event waits for the next event set s wants (v: the wait's version,
 * 1, 2 or 3) and returns it in *out. */
static nvmlReturn_t wait_event(nvmlEventSet_t set, const struct sim_event **out, unsigned int timeoutms, int v)
{
	struct nvmlEventSet_st *s;
	int64_t now, deadline;
	unsigned int gen;
	nvmlReturn_t fault;

	if (!sim_initialized())
		return NVML_ERROR_UNINITIALIZED;
	s = set_of(set);
	if (s == NULL || !s->ready)
		return NVML_ERROR_INVALID_ARGUMENT;
	fault = eventset_fault(sim_now());
	if (fault != NVML_SUCCESS)
		return fault;
	now = sim_now();
	deadline = now + (int64_t)timeoutms * 1000000LL;

	pthread_mutex_lock(&s->mu);
	gen = s->gen;
	for (;;) {
		int64_t wake;
		struct timespec ts;

		if (!s->inuse || s->gen != gen) {
			pthread_mutex_unlock(&s->mu);
			return NVML_ERROR_INVALID_ARGUMENT;
		}
		wake = deadline;
		for (;;) {
			const struct sim_event *e = NULL;

			if (s->cursor < g_nevents && g_events[s->cursor].t <= now)
				e = &g_events[s->cursor++];
			else if ((e = next_added(s, now, &wake)) == NULL)
				break;
			if (wanted(s, e, v == 3)) {
				if (v == 3)
					s->last = e;
				pthread_mutex_unlock(&s->mu);
				*out = e;
				return NVML_SUCCESS;
			}
		}
		if (now >= deadline) {
			pthread_mutex_unlock(&s->mu);
			return NVML_ERROR_TIMEOUT;
		}
		fault = eventset_failing(now);
		if (fault != NVML_SUCCESS) {
			pthread_mutex_unlock(&s->mu);
			return fault;
		}
		/* Sleep until the deadline or the next timeline or added event,
		 * whichever is first; Free/Register and an added event broadcast
		 * the condvar. */
		if (s->cursor < g_nevents && g_events[s->cursor].t < wake)
			wake = g_events[s->cursor].t;
		wake = next_eventset_fail(now, wake);
		wake += g_t0;
		ts.tv_sec = wake / 1000000000LL;
		ts.tv_nsec = wake % 1000000000LL;
		pthread_cond_timedwait(&s->cv, &s->mu, &ts);
		now = sim_now();
	}
}

/* wait_data is nvmlEventSetWait (v2 0) and _v2 (v2 1). */
static nvmlReturn_t wait_data(nvmlEventSet_t set, nvmlEventData_t *data, unsigned int timeoutms, int v2)
{
	const struct sim_event *e;
	nvmlReturn_t r;

	if (data == NULL)
		return sim_initialized() ? NVML_ERROR_INVALID_ARGUMENT : NVML_ERROR_UNINITIALIZED;
	r = wait_event(set, &e, timeoutms, v2 ? 2 : 1);
	if (r == NVML_SUCCESS)
		fill(data, e, v2);
	return r;
}

nvmlReturn_t nvmlEventSetWait(nvmlEventSet_t set, nvmlEventData_t *data, unsigned int timeoutms)
{
	SIM_COUNT(nvmlEventSetWait);
	return wait_data(set, data, timeoutms, 0);
}

#ifndef SIMNVML_OLD_DRIVER
nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t set, nvmlEventData_t *data, unsigned int timeoutms)
{
	SIM_COUNT(nvmlEventSetWait_v2);
	return wait_data(set, data, timeoutms, 1);
}

/* ---- GPU operational events (R615+) --------------------------------------- */

nvmlReturn_t nvmlEventSetRegisterGpuOperationalEvents_v1(nvmlEventSet_t eventSet, const nvmlGpuOperationalEventConfig_v1_t *config)
{
	struct nvmlEventSet_st *s;
	nvmlDevice_t dev;
	struct nvmlDevice_st *d;
	int64_t now;
	nvmlReturn_t r;

	SIM_COUNT(nvmlEventSetRegisterGpuOperationalEvents_v1);
	if (!sim_initialized())
		return NVML_ERROR_UNINITIALIZED;
	s = set_of(eventSet);
	if (s == NULL || !s->ready || config == NULL || memchr(config->uuid, 0, sizeof(config->uuid)) == NULL)
		return NVML_ERROR_INVALID_ARGUMENT;
	r = nvmlDeviceGetHandleByUUID(config->uuid, &dev);
	if (r != NVML_SUCCESS)
		return r == NVML_ERROR_NOT_FOUND ? NVML_ERROR_INVALID_ARGUMENT : r;
	d = dev.handle;
	now = sim_now();
	pthread_mutex_lock(&s->mu);
	if (!s->inuse) {
		pthread_mutex_unlock(&s->mu);
		return NVML_ERROR_INVALID_ARGUMENT;
	}
	if (s->opt[d->index] < 0) /* the same subscription again is a success */
		s->opt[d->index] = now;
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->mu);
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlEventSetWait_v3(nvmlEventSet_t set, nvmlEventSetWait_v3_t *params)
{
	const struct sim_event *e;
	const struct nvmlDevice_st *d;
	nvmlReturn_t r;

	SIM_COUNT(nvmlEventSetWait_v3);
	if (params == NULL)
		return sim_initialized() ? NVML_ERROR_INVALID_ARGUMENT : NVML_ERROR_UNINITIALIZED;
	r = wait_event(set, &e, params->timeoutMs, 3);
	if (r != NVML_SUCCESS)
		return r;
	unsigned int timeout = params->timeoutMs;
	memset(params, 0, sizeof(*params));
	params->timeoutMs = timeout;
	d = &g_devs[e->gpu];
	snprintf(params->uuid, sizeof(params->uuid), "%s", d->uuid);
	params->gpuInstanceId = NVML_GPU_INSTANCE_ID_ANY;
	params->computeInstanceId = NVML_COMPUTE_INSTANCE_ID_ANY;
	if (e->op == NULL) {
		params->dataType = NVML_EVENT_DATA_TYPE_NVML_EVENT;
		params->eventType = e->type;
		params->eventData = e->data;
		return NVML_SUCCESS;
	}
	const struct sim_opev *o = e->op;
	params->dataType = NVML_EVENT_DATA_TYPE_GPU_OPERATIONAL_EVENT;
	memcpy(params->sourceModule, o->module, sizeof(params->sourceModule));
	params->eventType = nvmlEventTypeNone;
	params->groupCursor = o->sequence;
	params->instanceId = o->sequence;
	params->timestampUsec = (unsigned long long)((e->t + g_t0 + g_real_offset) / 1000);
	params->traceId = 0x5100000000ULL + o->sequence;
	params->gpuInstanceId = o->gpu_instance;
	params->computeInstanceId = o->compute_instance;
	params->severity = o->severity;
	params->categoryId = o->category;
	params->moduleEventCode = o->module_event_code;
	params->logLevel = o->log_level;
	params->attributes = o->attributes;
	params->groupAttributes = o->group_attributes;
	params->groupSize = 1;
	return NVML_SUCCESS;
}

/* last_op returns set's last operational event (under its lock), or NULL. */
static const struct sim_opev *last_op(nvmlEventSet_t set, nvmlReturn_t *r)
{
	struct nvmlEventSet_st *s = set_of(set);
	const struct sim_event *e = NULL;

	*r = NVML_SUCCESS;
	if (!sim_initialized()) {
		*r = NVML_ERROR_UNINITIALIZED;
		return NULL;
	}
	if (s == NULL || !s->ready) {
		*r = NVML_ERROR_INVALID_ARGUMENT;
		return NULL;
	}
	pthread_mutex_lock(&s->mu);
	e = s->last;
	pthread_mutex_unlock(&s->mu);
	if (e == NULL) {
		*r = NVML_ERROR_NOT_FOUND;
		return NULL;
	}
	return e->op;
}

nvmlReturn_t nvmlEventSetGetContextCount_v1(nvmlEventSet_t set, nvmlEventSetGetContextCount_v1_t *params)
{
	const struct sim_opev *o;
	nvmlReturn_t r;

	SIM_COUNT(nvmlEventSetGetContextCount_v1);
	o = last_op(set, &r);
	if (r != NVML_SUCCESS)
		return r;
	if (params == NULL)
		return NVML_ERROR_INVALID_ARGUMENT;
	params->count = o != NULL ? o->nctx : 0;
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlEventSetGetContextInfo_v1(nvmlEventSet_t set, nvmlEventSetGetContextInfo_v1_t *params)
{
	const struct sim_opev *o;
	nvmlReturn_t r;

	SIM_COUNT(nvmlEventSetGetContextInfo_v1);
	o = last_op(set, &r);
	if (r != NVML_SUCCESS)
		return r;
	if (params == NULL || o == NULL || params->index >= o->nctx)
		return NVML_ERROR_INVALID_ARGUMENT;
	params->nvmlGpuOperationalEventContextType = o->ctx[params->index].legacy_xid ? NVML_GPU_OPERATIONAL_EVENT_CONTEXT_TYPE_LEGACY_XID
										    : NVML_GPU_OPERATIONAL_EVENT_CONTEXT_TYPE_UNKNOWN;
	params->sourceEventContextType = o->ctx[params->index].source_type;
	params->dataSize = 4;
	params->dataFormatVersion = 1;
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlEventSetGetContextData_v1(nvmlEventSet_t set, nvmlEventSetGetContextData_v1_t *params)
{
	const struct sim_opev *o;
	nvmlReturn_t r;
	unsigned int have;

	SIM_COUNT(nvmlEventSetGetContextData_v1);
	o = last_op(set, &r);
	if (r != NVML_SUCCESS)
		return r;
	if (params == NULL || o == NULL || params->index >= o->nctx)
		return NVML_ERROR_INVALID_ARGUMENT;
	have = params->dataSize;
	params->dataSize = 4;
	if (params->data == NULL || have < 4)
		return NVML_ERROR_INSUFFICIENT_SIZE;
	memcpy(params->data, &o->ctx[params->index].xid, 4);
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlEventSetGetGpuOperationalEventContextLegacyXid_v1(nvmlEventSet_t set,
								   nvmlEventSetGetGpuOperationalEventContextLegacyXid_v1_t *params)
{
	const struct sim_opev *o;
	nvmlReturn_t r;

	SIM_COUNT(nvmlEventSetGetGpuOperationalEventContextLegacyXid_v1);
	o = last_op(set, &r);
	if (r != NVML_SUCCESS)
		return r;
	if (params == NULL || o == NULL || params->index >= o->nctx)
		return NVML_ERROR_INVALID_ARGUMENT;
	if (!o->ctx[params->index].legacy_xid)
		return NVML_ERROR_NOT_FOUND;
	params->xidCode = o->ctx[params->index].xid;
	return NVML_SUCCESS;
}
#endif

/* ---- kernel log ---------------------------------------------------------- */

static const char *xid_text(unsigned int xid)
{
	switch (xid) {
	case 13:
		return "pid=1234, name=python3, Graphics SM Warp Exception on (GPC 0, TPC 0, SM 0): Out Of Range Address";
	case 31:
		return "pid=1234, name=python3, Ch 00000010, intr 00000000. MMU Fault: ENGINE GRAPHICS GPCCLIENT_T1_0 faulted @ 0x7f1c_00000000. Fault is of type FAULT_PDE ACCESS_TYPE_VIRT_READ";
	case 43:
		return "pid=1234, name=python3, Ch 00000010";
	case 45:
		return "pid=1234, name=python3, Ch 00000010";
	case 48:
		return "pid='<unknown>', name=<unknown>, An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer at partition 0, subpartition 0.";
	case 62:
		return "pid='<unknown>', name=<unknown>, 0000c3b6 00002d26 00000000 0000bd0e 00000000 00000000 00000000 00000000";
	case 63:
	case 64:
		return "pid='<unknown>', name=<unknown>, Row Remapper: New row (0x00000000001d6c2e) marked for remapping, reset gpu to activate.";
	case 74:
		return "pid='<unknown>', name=<unknown>, NVLink: fatal error detected on link 0(0x0, 0x0, 0x10000, 0x0, 0x0, 0x0, 0x0)";
	case 79:
		return "pid='<unknown>', name=<unknown>, GPU has fallen off the bus.";
	case 92:
		return "pid='<unknown>', name=<unknown>, High single-bit ECC error rate";
	case 94:
		return "pid='<unknown>', name=<unknown>, Contained: CE User Channel (0x2). RST: No, D-RST: No";
	case 95:
		return "pid='<unknown>', name=<unknown>, Uncontained: FBHUB. RST: Yes, D-RST: No";
	case 109:
		return "pid=1234, name=python3, Ch 00000010, errorString CTX SWITCH TIMEOUT, Info 0x0";
	case 120:
		return "pid='<unknown>', name=<unknown>, GSP task timeout @ pc:0x4bd36ec, task: 1";
	default:
		return NULL;
	}
}

static int g_kmsg_fd = -1;

/* sim_kmsg_clock is the kernel log's (printk) clock at CLOCK_MONOTONIC mono
 * (ns): behind it by kmsg_clock's offset, losing its drift (ppm) per second
 * since boot. Without kmsg_clock the two are the same. */
int64_t sim_kmsg_clock(int64_t mono)
{
	return mono - (int64_t)(g_host.kmsg_offset * 1e9) - (int64_t)(g_host.kmsg_drift * 1e-6 * (double)mono);
}

/* The writer's state, shared by the scripted records' thread and the added
 * records (sim_write_due_kmsgs), under g_kmsg_mu. */
static pthread_mutex_t g_kmsg_mu = PTHREAD_MUTEX_INITIALIZER;
static unsigned long long g_kmsg_seq;
static int g_kmsg_action[SIM_MAX_GPUS]; /* the last Xid 154's recovery action per GPU */
static struct sim_kmsg g_added_k[SIM_MAX_ADDED];
static int g_added_k_done[SIM_MAX_ADDED];
static unsigned int g_nadded_k;

/* kmsg_write writes record k (g_kmsg_mu held); -1 on a write error. */
static int kmsg_write(const struct sim_kmsg *k)
{
	const struct nvmlDevice_st *d = &g_devs[k->gpu];
	const char *text = k->text;
	char line[1024], tail[640];
	int n;

	if (text == NULL && k->xid == 154) {
		snprintf(tail, sizeof(tail), "GPU recovery action changed from 0x%x (%s) to 0x%x (%s)",
			 g_kmsg_action[k->gpu], sim_recovery_name(g_kmsg_action[k->gpu]), k->action,
			 sim_recovery_name(k->action));
		text = tail;
	} else if (text == NULL && k->xid == 119) {
		snprintf(tail, sizeof(tail),
			 "pid=1234, name=python3, Timeout after 45s of waiting for RPC response from GPU%u GSP! Expected function 76 (GSP_RM_CONTROL) (0x20800a4c 0x4).",
			 k->gpu);
		text = tail;
	} else if (text == NULL) {
		text = xid_text(k->xid);
		if (text == NULL) {
			snprintf(tail, sizeof(tail), "pid='<unknown>', name=<unknown>, simulated Xid %u", k->xid);
			text = tail;
		}
	}
	if (k->xid == 154)
		g_kmsg_action[k->gpu] = k->action;
	n = snprintf(line, sizeof(line), "4,%llu,%lld,-;NVRM: Xid (PCI:%04x:%02x:%02x): %u, %s\n", g_kmsg_seq++,
		     (long long)(sim_kmsg_clock(k->t + g_t0) / 1000), d->domain, d->bus, d->dev, k->xid, text);
	if (n > 0) {
		if ((size_t)n >= sizeof(line)) {
			n = sizeof(line) - 1;
			line[n - 1] = '\n';
		}
		if (write(g_kmsg_fd, line, (size_t)n) < 0)
			return -1;
	}
	return 0;
}

static void *kmsg_thread(void *arg)
{
	size_t i;
	int r;

	(void)arg;
	for (i = 0; i < g_nkmsgs; i++) {
		sim_sleep_until(g_kmsgs[i].t);
		pthread_mutex_lock(&g_kmsg_mu);
		r = kmsg_write(&g_kmsgs[i]);
		pthread_mutex_unlock(&g_kmsg_mu);
		if (r < 0)
			break;
	}
	return NULL;
}

int sim_add_kmsg(int64_t t, unsigned int gpu, unsigned int xid, int action)
{
	int r = -1;

	pthread_mutex_lock(&g_kmsg_mu);
	if (g_nadded_k < SIM_MAX_ADDED) {
		g_added_k[g_nadded_k++] = (struct sim_kmsg){ .t = t, .gpu = gpu, .xid = xid, .action = action };
		r = 0;
	}
	pthread_mutex_unlock(&g_kmsg_mu);
	return r;
}

/* sim_write_due_kmsgs writes the added records due at now, earliest first
 * (the thermal model's thread calls it every step: on time to 100 ms, and
 * stamped with their own time). */
void sim_write_due_kmsgs(int64_t now)
{
	pthread_mutex_lock(&g_kmsg_mu);
	for (;;) {
		unsigned int i, first = SIM_MAX_ADDED;
		for (i = 0; i < g_nadded_k; i++)
			if (!g_added_k_done[i] && g_added_k[i].t <= now &&
			    (first == SIM_MAX_ADDED || g_added_k[i].t < g_added_k[first].t))
				first = i;
		if (first == SIM_MAX_ADDED)
			break;
		g_added_k_done[first] = 1;
		if (g_kmsg_fd >= 0)
			kmsg_write(&g_added_k[first]);
	}
	pthread_mutex_unlock(&g_kmsg_mu);
}

void sim_start_kmsg(void)
{
	const char *path = getenv("SIMNVML_KMSG");

	if (path == NULL || path[0] == '\0')
		return;
	g_kmsg_fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
	if (g_kmsg_fd < 0) {
		fprintf(stderr, "simnvml: cannot open SIMNVML_KMSG file %s: %s\n", path, strerror(errno));
		return;
	}
	g_kmsg_seq = g_host.kmsg_seq;
	if (g_nkmsgs > 0)
		sim_start_thread(kmsg_thread, NULL);
}
