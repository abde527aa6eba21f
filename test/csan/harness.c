/*
 * csan: runs the project's C parts (sampler/batch.c, sampler/evthread.c,
 * sink/fsync.c) against the simulated driver (test/simnvml/csrc, linked in
 * and exported with -rdynamic so their dlsym(RTLD_DEFAULT) finds it), all
 * built with AddressSanitizer and UndefinedBehaviorSanitizer. Go's race
 * detector and ASan cannot share one binary, so this is a C program; `make
 * test` builds and runs it (make csan). Any sanitizer report aborts it.
 *
 * It also pins sampler/nvml_abi.h's structs to NVIDIA's nvml.h (from the
 * go-nvml module): every struct size, field offset and field size is checked
 * at compile time. The getters' structs are not in nvml_abi.h: batch.c is
 * handed their sizes and offsets (a struct gt_lib), here from nvml.h, in the
 * daemon from go-nvml's types generated from it. This is the one layout pin: go-nvml's Go types are
 * generated from this same header, and nvmlEventData_t has no exported Go
 * twin, so a Go-side copy would check less. The codes (GT_NVML_*) have their
 * one pin in sampler/batch_native.go, against go-nvml's constants: it fails
 * every build of the binary, not only make csan, and compares them with the
 * values the Go side classifies results by.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "nvml.h"

#include "batch.h"
#include "evthread.h"
#include "fsync.h"
#include "nvml_abi.h"

/* ---- nvml_abi.h against nvml.h ------------------------------------------- */

/* One row a pinned field: our struct, our field, nvml.h's struct, its field.
 * PIN_FIELD checks the two structs' sizes, the field's offset and its size,
 * so a new pinned struct is its fields' rows. */
#define ABI_FIELDS(X) \
	X(struct gt_nvml_field_value, field_id, nvmlFieldValue_t, fieldId) \
	X(struct gt_nvml_field_value, scope_id, nvmlFieldValue_t, scopeId) \
	X(struct gt_nvml_field_value, timestamp, nvmlFieldValue_t, timestamp) \
	X(struct gt_nvml_field_value, latency_usec, nvmlFieldValue_t, latencyUsec) \
	X(struct gt_nvml_field_value, value_type, nvmlFieldValue_t, valueType) \
	X(struct gt_nvml_field_value, nvml_return, nvmlFieldValue_t, nvmlReturn) \
	X(struct gt_nvml_field_value, value, nvmlFieldValue_t, value) \
	X(struct gt_nvml_event_data, device, nvmlEventData_t, device) \
	X(struct gt_nvml_event_data, type, nvmlEventData_t, eventType) \
	X(struct gt_nvml_event_data, data, nvmlEventData_t, eventData) \
	X(struct gt_nvml_event_data, gpu_instance_id, nvmlEventData_t, gpuInstanceId) \
	X(struct gt_nvml_event_data, compute_instance_id, nvmlEventData_t, computeInstanceId) \
	X(struct gt_nvml_opev_config, uuid, nvmlGpuOperationalEventConfig_v1_t, uuid) \
	X(struct gt_nvml_opev_config, min_log_level, nvmlGpuOperationalEventConfig_v1_t, minLogLevel) \
	X(struct gt_nvml_opev_config, min_severity, nvmlGpuOperationalEventConfig_v1_t, minSeverity) \
	X(struct gt_nvml_wait_v3, timeout_ms, nvmlEventSetWait_v3_t, timeoutMs) \
	X(struct gt_nvml_wait_v3, data_type, nvmlEventSetWait_v3_t, dataType) \
	X(struct gt_nvml_wait_v3, uuid, nvmlEventSetWait_v3_t, uuid) \
	X(struct gt_nvml_wait_v3, source_module, nvmlEventSetWait_v3_t, sourceModule) \
	X(struct gt_nvml_wait_v3, event_type, nvmlEventSetWait_v3_t, eventType) \
	X(struct gt_nvml_wait_v3, event_data, nvmlEventSetWait_v3_t, eventData) \
	X(struct gt_nvml_wait_v3, group_cursor, nvmlEventSetWait_v3_t, groupCursor) \
	X(struct gt_nvml_wait_v3, instance_id, nvmlEventSetWait_v3_t, instanceId) \
	X(struct gt_nvml_wait_v3, timestamp_usec, nvmlEventSetWait_v3_t, timestampUsec) \
	X(struct gt_nvml_wait_v3, trace_id, nvmlEventSetWait_v3_t, traceId) \
	X(struct gt_nvml_wait_v3, gpu_instance_id, nvmlEventSetWait_v3_t, gpuInstanceId) \
	X(struct gt_nvml_wait_v3, compute_instance_id, nvmlEventSetWait_v3_t, computeInstanceId) \
	X(struct gt_nvml_wait_v3, severity, nvmlEventSetWait_v3_t, severity) \
	X(struct gt_nvml_wait_v3, category_id, nvmlEventSetWait_v3_t, categoryId) \
	X(struct gt_nvml_wait_v3, module_event_code, nvmlEventSetWait_v3_t, moduleEventCode) \
	X(struct gt_nvml_wait_v3, scope, nvmlEventSetWait_v3_t, scope) \
	X(struct gt_nvml_wait_v3, originator, nvmlEventSetWait_v3_t, originator) \
	X(struct gt_nvml_wait_v3, module_instance, nvmlEventSetWait_v3_t, moduleInstance) \
	X(struct gt_nvml_wait_v3, chiplet_id, nvmlEventSetWait_v3_t, chipletId) \
	X(struct gt_nvml_wait_v3, log_level, nvmlEventSetWait_v3_t, logLevel) \
	X(struct gt_nvml_wait_v3, attributes, nvmlEventSetWait_v3_t, attributes) \
	X(struct gt_nvml_wait_v3, group_cper_size, nvmlEventSetWait_v3_t, groupCperSize) \
	X(struct gt_nvml_wait_v3, group_attributes, nvmlEventSetWait_v3_t, groupAttributes) \
	X(struct gt_nvml_wait_v3, group_size, nvmlEventSetWait_v3_t, groupSize) \
	X(struct gt_nvml_wait_v3, group_index, nvmlEventSetWait_v3_t, groupIndex) \
	X(struct gt_nvml_context_count, count, nvmlEventSetGetContextCount_v1_t, count) \
	X(struct gt_nvml_context_info, index, nvmlEventSetGetContextInfo_v1_t, index) \
	X(struct gt_nvml_context_info, nvml_type, nvmlEventSetGetContextInfo_v1_t, nvmlGpuOperationalEventContextType) \
	X(struct gt_nvml_context_info, source_type, nvmlEventSetGetContextInfo_v1_t, sourceEventContextType) \
	X(struct gt_nvml_context_info, data_size, nvmlEventSetGetContextInfo_v1_t, dataSize) \
	X(struct gt_nvml_context_info, data_format_version, nvmlEventSetGetContextInfo_v1_t, dataFormatVersion) \
	X(struct gt_nvml_context_legacy_xid, index, nvmlEventSetGetGpuOperationalEventContextLegacyXid_v1_t, index) \
	X(struct gt_nvml_context_legacy_xid, xid_code, nvmlEventSetGetGpuOperationalEventContextLegacyXid_v1_t, xidCode)

#define PIN_FIELD(ours, of, theirs, tf)                                                                          \
	_Static_assert(sizeof(ours) == sizeof(theirs), #ours " and " #theirs " differ in size");                    \
	_Static_assert(offsetof(ours, of) == offsetof(theirs, tf), #ours "." #of " is not at " #theirs "." #tf); \
	_Static_assert(sizeof(((ours *)0)->of) == sizeof(((theirs *)0)->tf), #ours "." #of " and " #theirs "." #tf " differ in size");
ABI_FIELDS(PIN_FIELD)


/* ---- the run ------------------------------------------------------------- */

#define NGPU 4

static const char scenario[] =
	"gpus 4\n"
	"gpu 0 fans 2\n"
	"gpu 1 fans 0\n"
	"gpu 1 sensors 0\n"
	"gpu 1 health fabric\n"
	"gpu 2 fail nvmlDeviceGetTemperature unknown\n"
	"gpu 2 fail field 190 not_supported\n"
	"gpu 2 fail nvmlDeviceGetFieldValues unknown for 0.1s\n"
	"at 0.2 gpu 3 lost\n"
	"at 0 gpu 1 hang 0.15s fn nvmlDeviceGetFieldValues\n"
	"at 0.3 gpu 0 xid 62 to events\n"
	"at 0.8 eventset fail unknown for 0.1s\n"
	"at 1.6 gpu 0 xid 45 to events\n"
	"at 3 gpu 2 fail nvmlDeviceRegisterEvents gpu_is_lost\n";

static int failures;

#define CHECK(cond, ...)                                  \
	do {                                              \
		if (!(cond)) {                            \
			fprintf(stderr, "csan: " __VA_ARGS__); \
			fputc('\n', stderr);              \
			failures++;                       \
		}                                         \
	} while (0)

static void *must_sym(const char *name)
{
	void *p = dlsym(RTLD_DEFAULT, name);
	if (!p) {
		fprintf(stderr, "csan: %s not found (link with -rdynamic)\n", name);
		exit(1);
	}
	return p;
}

#define NQ 5 /* the fields the sampler batches today */

/* The getter calls of this harness's batch, one of each shape and kind of
 * struct (scalar, with an argument, two outputs, unversioned and versioned
 * structs), described as the Go side describes its own (sampler/batch.go). */
enum {
	H_FIELDS = GT_FIELDS, H_TEMP, H_POWERLIM, H_PSTATE, H_UTIL, H_MEMV2, H_REASONS, H_ENC, H_THERMAL, H_SRAM, H_REPAIR,
	H_UNREPAIRABLE, H_POWER, H_ENFORCED, H_ENERGY, H_REPLAY, H_FAN0, H_FAN1, H_NCALLS
};

#define VAL(type, field) offsetof(type, field), sizeof(((type *)0)->field)

static void set_call(struct gt_call *c, const char *name, uint32_t shape, uint32_t arg, uint32_t size, uint32_t version,
		     int n, ...)
{
	va_list ap;
	c->fn = gt_sym(name, NULL);
	CHECK(c->fn != NULL, "%s not found", name);
	c->shape = shape;
	c->arg = arg;
	c->size = size;
	c->version = version;
	c->nvals = (uint32_t)n;
	va_start(ap, n);
	for (int i = 0; i < n; i++) {
		c->off[i] = (uint32_t)va_arg(ap, size_t);
		c->width[i] = (uint32_t)va_arg(ap, size_t);
	}
	va_end(ap);
}

/* The library's calls, as the Go side fills them (sampler/batch_native.go's
 * newNative). */
static struct gt_lib lib;

static void set_calls(void)
{
	struct gt_call *c = lib.calls;
	set_call(&c[H_TEMP], "nvmlDeviceGetTemperature", GT_SHAPE_ARG_OUT, NVML_TEMPERATURE_GPU, 4, 0, 1, (size_t)0, (size_t)4);
	set_call(&c[H_POWERLIM], "nvmlDeviceGetPowerManagementLimit", GT_SHAPE_OUT, 0, 4, 0, 1, (size_t)0, (size_t)4);
	set_call(&c[H_PSTATE], "nvmlDeviceGetPerformanceState", GT_SHAPE_OUT, 0, sizeof(nvmlPstates_t), 0, 1, (size_t)0,
		 sizeof(nvmlPstates_t));
	set_call(&c[H_UTIL], "nvmlDeviceGetUtilizationRates", GT_SHAPE_OUT, 0, sizeof(nvmlUtilization_t), 0, 2,
		 VAL(nvmlUtilization_t, gpu), VAL(nvmlUtilization_t, memory));
	set_call(&c[H_MEMV2], "nvmlDeviceGetMemoryInfo_v2", GT_SHAPE_OUT, 0, sizeof(nvmlMemory_v2_t), 2, 1,
		 VAL(nvmlMemory_v2_t, used));
	set_call(&c[H_REASONS], "nvmlDeviceGetCurrentClocksEventReasons", GT_SHAPE_OUT, 0, 8, 0, 1, (size_t)0, (size_t)8);
	set_call(&c[H_ENC], "nvmlDeviceGetEncoderUtilization", GT_SHAPE_OUT_OUT, 0, 4, 0, 1, (size_t)0, (size_t)4);
	set_call(&c[H_THERMAL], "nvmlDeviceGetThermalSettings", GT_SHAPE_ARG_OUT, 0, sizeof(nvmlGpuThermalSettings_t), 0, 4,
		 VAL(nvmlGpuThermalSettings_t, count), VAL(nvmlGpuThermalSettings_t, sensor[0].controller),
		 VAL(nvmlGpuThermalSettings_t, sensor[0].currentTemp), VAL(nvmlGpuThermalSettings_t, sensor[0].target));
	set_call(&c[H_SRAM], "nvmlDeviceGetSramEccErrorStatus", GT_SHAPE_OUT, 0, sizeof(nvmlEccSramErrorStatus_t), 1, 4,
		 VAL(nvmlEccSramErrorStatus_t, volatileCor), VAL(nvmlEccSramErrorStatus_t, volatileUncSecDed),
		 VAL(nvmlEccSramErrorStatus_t, volatileUncParity), VAL(nvmlEccSramErrorStatus_t, bThresholdExceeded));
	set_call(&c[H_REPAIR], "nvmlDeviceGetRepairStatus", GT_SHAPE_OUT, 0, sizeof(nvmlRepairStatus_t), 1, 2,
		 VAL(nvmlRepairStatus_t, bChannelRepairPending), VAL(nvmlRepairStatus_t, bTpcRepairPending));
	set_call(&c[H_UNREPAIRABLE], "nvmlDeviceGetUnrepairableMemoryFlag_v1", GT_SHAPE_OUT, 0,
		 sizeof(nvmlUnrepairableMemoryStatus_v1_t), 0, 1, VAL(nvmlUnrepairableMemoryStatus_v1_t, bUnrepairableMemory));
	set_call(&c[H_POWER], "nvmlDeviceGetPowerUsage", GT_SHAPE_OUT, 0, 4, 0, 1, (size_t)0, (size_t)4);
	set_call(&c[H_ENFORCED], "nvmlDeviceGetEnforcedPowerLimit", GT_SHAPE_OUT, 0, 4, 0, 1, (size_t)0, (size_t)4);
	set_call(&c[H_ENERGY], "nvmlDeviceGetTotalEnergyConsumption", GT_SHAPE_OUT, 0, 8, 0, 1, (size_t)0, (size_t)8);
	set_call(&c[H_REPLAY], "nvmlDeviceGetPcieReplayCounter", GT_SHAPE_OUT, 0, 4, 0, 1, (size_t)0, (size_t)4);
	set_call(&c[H_FAN0], "nvmlDeviceGetFanSpeed_v2", GT_SHAPE_ARG_OUT, 0, 4, 0, 1, (size_t)0, (size_t)4);
	set_call(&c[H_FAN1], "nvmlDeviceGetFanSpeed_v2", GT_SHAPE_ARG_OUT, 1, 4, 0, 1, (size_t)0, (size_t)4);
	_Static_assert(sizeof(nvmlEccSramErrorStatus_t) <= GT_MAXOUT, "GT_MAXOUT");
	_Static_assert(sizeof(nvmlGpuThermalSettings_t) <= GT_MAXOUT / 2, "GT_MAXOUT");
	_Static_assert(H_NCALLS <= GT_MAXCALLS, "GT_MAXCALLS");
	lib.fields = gt_sym("nvmlDeviceGetFieldValues", NULL);
	CHECK(lib.fields != NULL, "nvmlDeviceGetFieldValues not found");
	lib.ncalls = H_NCALLS;
}

struct sampler_arg {
	int gpu;
	int samples, lost, lock_timeouts, memv2_ok;
};

/* Samples one GPU many times with every call planned, as the Go side plans
 * them (fallbacks on a failed batch or a refused field). */
static void *sample_gpu(void *p)
{
	static const uint32_t fields[NQ] = { NVML_FI_DEV_POWER_INSTANT, NVML_FI_DEV_POWER_CURRENT_LIMIT,
						NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION, NVML_FI_DEV_MEMORY_TEMP,
						NVML_FI_DEV_PCIE_REPLAY_COUNTER };
	static const int fallback[NQ] = { H_POWER, H_ENFORCED, H_ENERGY, -1, H_REPLAY };
	struct sampler_arg *a = p;
	gt_dev dev = gt_batch_handle((unsigned int)a->gpu);
	struct gt_batch *b = calloc(1, sizeof(*b));

	CHECK(dev != 0, "no handle for GPU %d", a->gpu);
	if (dev == 0 || b == NULL) {
		free(b);
		return NULL;
	}
	for (int n = 0; n < 150; n++) {
		memset(b, 0, sizeof(*b));
		b->lib = &lib;
		b->field_wait_ms = 2;
		for (int c = 0; c < GT_MAXCALLS; c++) {
			b->ret[c] = GT_NOT_RUN;
			if (c < H_NCALLS && c != H_POWER && c != H_ENFORCED && c != H_ENERGY && c != H_REPLAY)
				b->plan |= 1ULL << c;
		}
		b->nfields = NQ;
		for (int i = 0; i < NQ; i++) {
			b->fields[i].field_id = fields[i];
			if (fallback[i] >= 0) {
				b->fallback |= 1ULL << fallback[i];
				b->field_fallback[i] = 1ULL << fallback[i];
			}
		}
		gt_batch_run(dev, b);
		a->samples++;
		a->lost += b->ret[H_TEMP] == GT_NVML_ERROR_GPU_IS_LOST || b->ret[H_FIELDS] == GT_NVML_ERROR_GPU_IS_LOST;
		a->lock_timeouts += b->ret[H_FIELDS] == GT_LOCK_TIMEOUT;
		/* The simulated driver refuses a wrong struct version: SUCCESS
		 * proves the version batch.c wrote. */
		a->memv2_ok += b->ret[H_MEMV2] == GT_NVML_SUCCESS && b->v[H_MEMV2][0] > 0;
		CHECK(__atomic_load_n(&b->cur, __ATOMIC_ACQUIRE) == 0, "GPU %d: call still marked in flight", a->gpu);
		struct timespec nap = { 0, 2 * 1000 * 1000 };
		nanosleep(&nap, NULL);
	}
	free(b);
	return NULL;
}

/* next_record reads one event record, waiting at most ms; 1 record, 0 EOF,
 * -1 timeout or error. */
static int next_record(int fd, struct gt_event *e, int ms)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	if (poll(&p, 1, ms) <= 0)
		return -1;
	ssize_t n = recv(fd, e, sizeof(*e), 0);
	if (n == 0)
		return 0;
	return n == (ssize_t)sizeof(*e) ? 1 : -1;
}

static int start_events(int *fd)
{
	int sv[2], idx[NGPU] = { 0, 1, 2, 3 };
	uint64_t masks[NGPU], reg[NGPU];
	for (int i = 0; i < NGPU; i++)
		masks[i] = nvmlEventTypeXidCriticalError | nvmlEventTypeGpuRecoveryAction;
	masks[3] = 0; /* lost by now */
	/* With the GPUs' UUIDs: operational events are subscribed too, and
	 * the thread waits with nvmlEventSetWait_v3. */
	static char uuid[NGPU][96];
	const char *uuids[NGPU] = { 0 };
	for (int i = 0; i < NGPU; i++) {
		nvmlDevice_t d;
		if (masks[i] && nvmlDeviceGetHandleByIndex_v2((unsigned int)i, &d) == NVML_SUCCESS &&
		    nvmlDeviceGetUUID(d, uuid[i], sizeof(uuid[i])) == NVML_SUCCESS)
			uuids[i] = uuid[i];
	}
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0)
		return -1;
	int opstate = -2;
	int why = -1;
	int ret = gt_events_start(idx, masks, uuids, reg, NGPU, sv[1], &opstate, &why);
	if (ret != 0) {
		close(sv[0]);
		close(sv[1]);
		return ret;
	}
	CHECK(reg[0] == masks[0] && reg[3] == 0, "registered masks %llx %llx", (unsigned long long)reg[0],
	      (unsigned long long)reg[3]);
	CHECK(opstate == GT_OP_REGISTERED, "operational events not subscribed: %d", opstate);
	*fd = sv[0];
	return 0;
}

/* events reads the records of the set started before sampling (fd). */
static void events(int fd)
{
	struct gt_event e;
	int r;

	/* Xid 62 at 0.3 s, then the wait fails at 0.8 s and the thread ends. */
	r = next_record(fd, &e, 5000);
	CHECK(r == 1 && e.kind == GT_EV_EVENT && e.index == 0 && e.data == 62, "first record: r=%d kind=%d index=%d data=%llu",
	      r, e.kind, e.index, (unsigned long long)e.data);
	r = next_record(fd, &e, 5000);
	CHECK(r == 1 && e.kind == GT_EV_ERROR && e.ret == NVML_ERROR_UNKNOWN, "error record: r=%d kind=%d ret=%d index=%d type=%llx data=%llu", r,
	      e.kind, e.ret, e.index, (unsigned long long)e.type, (unsigned long long)e.data);
	r = next_record(fd, &e, 5000);
	CHECK(r == 0, "no end of file after the error record (r=%d)", r);
	close(fd);
	CHECK(gt_events_running() == 0, "%d event threads still running", gt_events_running());

	/* Reopened after the failure: Xid 45 at 1.6 s. */
	struct timespec nap = { 0, 200 * 1000 * 1000 };
	nanosleep(&nap, NULL);
	CHECK(start_events(&fd) == 0, "gt_events_start (again) failed");
	r = next_record(fd, &e, 5000);
	CHECK(r == 1 && e.kind == GT_EV_EVENT && e.data == 45, "after reopening: r=%d kind=%d data=%llu", r, e.kind,
	      (unsigned long long)e.data);
	/* Shutting down our side ends the thread within its 1 s wait. */
	shutdown(fd, SHUT_WR);
	r = next_record(fd, &e, 3000);
	CHECK(r == 0, "no end of file after shutdown (r=%d)", r);
	close(fd);
	CHECK(gt_events_running() == 0, "%d event threads still running after shutdown", gt_events_running());
}

/* The simulated driver's call counters and scenario clock origin
 * (test/simnvml/csrc/core.c). */
extern const char *const sim_fn_names[];
extern unsigned long long sim_fn_calls[];
extern int64_t g_t0;

/* sim_sleep_until sleeps until the scenario's clock reads at least sec. */
static void sim_sleep_until(double sec)
{
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	int64_t left = g_t0 + (int64_t)(sec * 1e9) - ((int64_t)now.tv_sec * 1000000000LL + now.tv_nsec);
	if (left > 0) {
		struct timespec nap = { left / 1000000000LL, left % 1000000000LL };
		nanosleep(&nap, NULL);
	}
}

/* sim_calls returns how many times the simulated driver's fn was called. */
static unsigned long long sim_calls(const char *fn)
{
	for (int i = 0;; i++)
		if (strcmp(sim_fn_names[i], fn) == 0)
			return __atomic_load_n(&sim_fn_calls[i], __ATOMIC_RELAXED);
}

/* fabric: the simulated fabric calls write each struct version whole and no
 * more (heap buffers of its exact size: ASan reports a write past one), the
 * versioned call by the struct's version field. GPU 1 has the fabric. */
static void fabric(void)
{
	nvmlGpuFabricInfo_t *i1 = malloc(sizeof(*i1));
	nvmlGpuFabricInfo_v2_t *i2 = malloc(sizeof(*i2));
	nvmlGpuFabricInfo_v3_t *i3 = malloc(sizeof(*i3));
	nvmlGpuFabricInfo_v4_t *i4 = malloc(sizeof(*i4));
	nvmlDevice_t dev;
	nvmlReturn_t r;

	CHECK(nvmlDeviceGetHandleByIndex_v2(1, &dev) == NVML_SUCCESS, "no handle of GPU 1");
	r = nvmlDeviceGetGpuFabricInfo(dev, i1);
	CHECK(r == NVML_SUCCESS && i1->cliqueId == 32766, "original fabric call: %d clique %u", r, i1->cliqueId);
	i2->version = nvmlGpuFabricInfo_v2;
	r = nvmlDeviceGetGpuFabricInfoV(dev, (nvmlGpuFabricInfoV_t *)i2);
	CHECK(r == NVML_SUCCESS && i2->version == nvmlGpuFabricInfo_v2 && i2->healthMask == 0x51aa,
	      "versioned fabric call, v2: %d mask %#x", r, i2->healthMask);
	i3->version = nvmlGpuFabricInfo_v3;
	r = nvmlDeviceGetGpuFabricInfoV(dev, i3);
	CHECK(r == NVML_SUCCESS && i3->version == nvmlGpuFabricInfo_v3 && i3->healthSummary == 1,
	      "versioned fabric call, v3: %d summary %u", r, i3->healthSummary);
	i3->version = nvmlGpuFabricInfo_v3 + 1;
	r = nvmlDeviceGetGpuFabricInfoV(dev, i3);
	CHECK(r == NVML_ERROR_ARGUMENT_VERSION_MISMATCH, "versioned fabric call, unknown version: %d", r);
	r = nvmlDeviceGetGpuFabricInfo_v4(dev, i4);
	CHECK(r == NVML_SUCCESS && i4->numCliques == 1 && i4->cliques[0].id == 32766, "fabric call v4: %d", r);
	free(i1);
	free(i2);
	free(i3);
	free(i4);
}

/* registration_failures: a set no GPU could be registered on says why,
 * telling the GPUs' answer that they support none of the types (final) from
 * a failed call (retried): GPU 3 is lost by now (its handle says so), and
 * GPU 2's registration says it is lost from 3 s on: it is not called again
 * once it said so (the type by type retry). A set registered in part says
 * why too (Go opens it again later). */
static void registration_failures(void)
{
	int sv[2], idx[NGPU] = { 0, 1, 2, 3 }, opstate, why, ret;
	uint64_t masks[NGPU] = { 0 }, reg[NGPU];
	const char *uuids[NGPU] = { 0 };
	unsigned long long calls;

	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0)
		return;
	masks[3] = nvmlEventTypeXidCriticalError;
	why = -1;
	ret = gt_events_start(idx, masks, uuids, reg, NGPU, sv[1], &opstate, &why);
	CHECK(ret == GT_EV_NOT_REGISTERED && why == NVML_ERROR_GPU_IS_LOST && reg[3] == 0,
	      "registering a lost GPU: ret %d why %d (want %d, GPU_IS_LOST)", ret, why, GT_EV_NOT_REGISTERED);
	masks[3] = 0;
	sim_sleep_until(3.2);
	masks[2] = nvmlEventTypeXidCriticalError | nvmlEventTypeGpuRecoveryAction;
	why = -1;
	calls = sim_calls("nvmlDeviceRegisterEvents");
	ret = gt_events_start(idx, masks, uuids, reg, NGPU, sv[1], &opstate, &why);
	calls = sim_calls("nvmlDeviceRegisterEvents") - calls;
	CHECK(ret == GT_EV_NOT_REGISTERED && why == NVML_ERROR_GPU_IS_LOST && reg[2] == 0,
	      "a registration that says the GPU is lost: ret %d why %d (want %d, GPU_IS_LOST)", ret, why, GT_EV_NOT_REGISTERED);
	CHECK(calls == 1, "a GPU that said it is lost at its registration was called %llu times in all, want once", calls);
	masks[2] = 0;
	masks[1] = nvmlEventMigConfigChange; /* not among the simulated GPU's types */
	ret = gt_events_start(idx, masks, uuids, reg, NGPU, sv[1], &opstate, &why);
	CHECK(ret == GT_EV_NONE_SUPPORTED && reg[1] == 0, "registering a type no GPU supports: ret %d why %d (want %d)", ret,
	      why, GT_EV_NONE_SUPPORTED);
	CHECK(gt_events_running() == 0, "%d event threads running after failed starts", gt_events_running());
	close(sv[0]);
	close(sv[1]);

	/* GPU 0 registers, GPU 2 says it is lost: the set starts, saying why
	 * it is not whole. */
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0)
		return;
	masks[1] = 0;
	masks[0] = masks[2] = nvmlEventTypeXidCriticalError;
	why = -1;
	ret = gt_events_start(idx, masks, uuids, reg, NGPU, sv[1], &opstate, &why);
	CHECK(ret == 0 && why == NVML_ERROR_GPU_IS_LOST && reg[0] == masks[0] && reg[2] == 0,
	      "a set registered in part: ret %d why %d registered %llx %llx (want 0, GPU_IS_LOST)", ret, why,
	      (unsigned long long)reg[0], (unsigned long long)reg[2]);
	if (ret != 0) {
		close(sv[0]);
		close(sv[1]);
		return;
	}
	struct gt_event e;
	shutdown(sv[0], SHUT_WR);
	int r;
	while ((r = next_record(sv[0], &e, 3000)) == 1)
		;
	CHECK(r == 0, "no end of file after shutdown (r=%d)", r);
	close(sv[0]);
	CHECK(gt_events_running() == 0, "%d event threads running after the set registered in part ended", gt_events_running());
}

static void fsyncs(void)
{
	char path[] = "/tmp/csan-fsync-XXXXXX";
	int fd = mkstemp(path), fds[2], errs[2] = { -1, -1 };
	unsigned long long b0, b, seq;
	int r = 0;

	CHECK(fd >= 0, "mkstemp: %s", strerror(errno));
	if (fd < 0)
		return;
	unlink(path);
	CHECK(write(fd, "row\n", 4) == 4, "write");
	gt_fsync_stats(&b0);
	fds[0] = dup(fd);
	fds[1] = dup(fd);
	seq = gt_fsync_submit(fds, 2);
	CHECK(seq != 0, "gt_fsync_submit refused");
	for (int i = 0; seq != 0 && i < 500; i++) {
		r = gt_fsync_result(seq, errs, 2);
		if (r != 0)
			break;
		struct timespec nap = { 0, 10 * 1000 * 1000 };
		nanosleep(&nap, NULL);
	}
	gt_fsync_stats(&b);
	CHECK(r == 1 && errs[0] == 0 && errs[1] == 0 && b == b0 + 1, "fsync batch: result %d errnos %d %d, batches %llu -> %llu",
	      r, errs[0], errs[1], b0, b);
	close(fd);
}

int main(void)
{
	char path[] = "/tmp/csan-scenario-XXXXXX";
	int fd = mkstemp(path);
	if (fd < 0 || write(fd, scenario, sizeof(scenario) - 1) != (ssize_t)(sizeof(scenario) - 1)) {
		perror("csan: scenario");
		return 1;
	}
	close(fd);
	setenv("SIMNVML_SCENARIO", path, 1);

	nvmlReturn_t (*init)(void) = (nvmlReturn_t(*)(void))must_sym("nvmlInit_v2");
	nvmlReturn_t (*shut)(void) = (nvmlReturn_t(*)(void))must_sym("nvmlShutdown");
	CHECK(init() == NVML_SUCCESS, "nvmlInit_v2 failed");
	int evfd = -1;
	CHECK(start_events(&evfd) == 0, "gt_events_start failed");

	set_calls();
	pthread_t t[NGPU];
	struct sampler_arg args[NGPU];
	for (int i = 0; i < NGPU; i++) {
		args[i] = (struct sampler_arg){ .gpu = i };
		pthread_create(&t[i], NULL, sample_gpu, &args[i]);
	}
	for (int i = 0; i < NGPU; i++)
		pthread_join(t[i], NULL);
	CHECK(args[3].lost > 0, "GPU 3 never reported lost");
	CHECK(args[0].lost == 0 && args[1].lost == 0 && args[2].lost == 0, "a healthy GPU reported lost");
	CHECK(args[0].memv2_ok > 0, "GPU 0: nvmlDeviceGetMemoryInfo_v2 never answered with memory used");
	CHECK(args[0].lock_timeouts + args[2].lock_timeouts + args[3].lock_timeouts > 0,
	      "no field lock timeout while GPU 1 held the lock in a hung GetFieldValues");

	if (evfd >= 0)
		events(evfd);
	registration_failures();
	fabric();
	fsyncs();

	CHECK(shut() == NVML_SUCCESS, "nvmlShutdown failed");
	unlink(path);
	if (failures) {
		fprintf(stderr, "csan: %d checks failed\n", failures);
		return 1;
	}
	printf("csan: batch.c, evthread.c, fsync.c and simnvml clean under ASan+UBSan; nvml_abi.h matches nvml.h\n");
	return 0;
}
