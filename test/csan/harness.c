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
 * at compile time. This is the one layout pin: go-nvml's Go types are
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
	X(struct gt_nvml_utilization, gpu, nvmlUtilization_t, gpu) \
	X(struct gt_nvml_utilization, memory, nvmlUtilization_t, memory) \
	X(struct gt_nvml_memory_v2, version, nvmlMemory_v2_t, version) \
	X(struct gt_nvml_memory_v2, total, nvmlMemory_v2_t, total) \
	X(struct gt_nvml_memory_v2, reserved, nvmlMemory_v2_t, reserved) \
	X(struct gt_nvml_memory_v2, free, nvmlMemory_v2_t, free) \
	X(struct gt_nvml_memory_v2, used, nvmlMemory_v2_t, used) \
	X(struct gt_nvml_memory, total, nvmlMemory_t, total) \
	X(struct gt_nvml_memory, free, nvmlMemory_t, free) \
	X(struct gt_nvml_memory, used, nvmlMemory_t, used) \
	X(struct gt_nvml_thermal_sensor, controller, nvmlGpuThermalSettingsSensor_t, controller) \
	X(struct gt_nvml_thermal_sensor, default_min_temp, nvmlGpuThermalSettingsSensor_t, defaultMinTemp) \
	X(struct gt_nvml_thermal_sensor, default_max_temp, nvmlGpuThermalSettingsSensor_t, defaultMaxTemp) \
	X(struct gt_nvml_thermal_sensor, current_temp, nvmlGpuThermalSettingsSensor_t, currentTemp) \
	X(struct gt_nvml_thermal_sensor, target, nvmlGpuThermalSettingsSensor_t, target) \
	X(struct gt_nvml_thermal_settings, count, nvmlGpuThermalSettings_t, count) \
	X(struct gt_nvml_thermal_settings, sensor, nvmlGpuThermalSettings_t, sensor) \
	X(struct gt_nvml_event_data, device, nvmlEventData_t, device) \
	X(struct gt_nvml_event_data, type, nvmlEventData_t, eventType) \
	X(struct gt_nvml_event_data, data, nvmlEventData_t, eventData) \
	X(struct gt_nvml_event_data, gpu_instance_id, nvmlEventData_t, gpuInstanceId) \
	X(struct gt_nvml_event_data, compute_instance_id, nvmlEventData_t, computeInstanceId)

#define PIN_FIELD(ours, of, theirs, tf)                                                                          \
	_Static_assert(sizeof(ours) == sizeof(theirs), #ours " and " #theirs " differ in size");                    \
	_Static_assert(offsetof(ours, of) == offsetof(theirs, tf), #ours "." #of " is not at " #theirs "." #tf); \
	_Static_assert(sizeof(((ours *)0)->of) == sizeof(((theirs *)0)->tf), #ours "." #of " and " #theirs "." #tf " differ in size");
ABI_FIELDS(PIN_FIELD)

_Static_assert(NVML_MAX_THERMAL_SENSORS_PER_GPU == 3, "NVML_MAX_THERMAL_SENSORS_PER_GPU");

/* ---- the run ------------------------------------------------------------- */

#define NGPU 4

static const char scenario[] =
	"gpus 4\n"
	"gpu 0 fans 2\n"
	"gpu 1 fans 0\n"
	"gpu 1 sensors 0\n"
	"gpu 2 fail nvmlDeviceGetTemperature unknown\n"
	"gpu 2 fail field 190 not_supported\n"
	"gpu 2 fail nvmlDeviceGetFieldValues unknown for 0.1s\n"
	"at 0.2 gpu 3 lost\n"
	"at 0 gpu 1 hang 0.15s fn nvmlDeviceGetFieldValues\n"
	"at 0.3 gpu 0 xid 62 to events\n"
	"at 0.8 eventset fail unknown for 0.1s\n"
	"at 1.6 gpu 0 xid 45 to events\n";

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

struct sampler_arg {
	int gpu;
	int samples, lost, lock_timeouts;
};

/* Samples one GPU many times with every call planned, as the Go side plans
 * them (fallbacks on a failed batch or a refused field). */
static void *sample_gpu(void *p)
{
	static const uint32_t fields[NQ] = { NVML_FI_DEV_POWER_INSTANT, NVML_FI_DEV_POWER_CURRENT_LIMIT,
						NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION, NVML_FI_DEV_MEMORY_TEMP,
						NVML_FI_DEV_PCIE_REPLAY_COUNTER };
	static const int fallback[NQ] = { GT_POWER, GT_ENFORCED, GT_ENERGY, -1, GT_REPLAY };
	struct sampler_arg *a = p;
	void *dev = gt_batch_handle((unsigned int)a->gpu);
	struct gt_batch *b = calloc(1, sizeof(*b));

	CHECK(dev != NULL, "no handle for GPU %d", a->gpu);
	if (dev == NULL || b == NULL) {
		free(b);
		return NULL;
	}
	for (int n = 0; n < 150; n++) {
		memset(b, 0, sizeof(*b));
		b->field_wait_ms = 2;
		for (int c = 0; c < GT_NCALLS; c++) {
			b->ret[c] = GT_NOT_RUN;
			if (c != GT_MEM && c != GT_THROTTLE && c != GT_FANSPEED1 && c != GT_POWER && c != GT_ENFORCED &&
			    c != GT_ENERGY && c != GT_REPLAY)
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
		a->lost += b->ret[GT_TEMP] == GT_NVML_ERROR_GPU_IS_LOST || b->ret[GT_FIELDS] == GT_NVML_ERROR_GPU_IS_LOST;
		a->lock_timeouts += b->ret[GT_FIELDS] == GT_LOCK_TIMEOUT;
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
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0)
		return -1;
	int ret = gt_events_start(idx, masks, reg, NGPU, sv[1]);
	if (ret != 0) {
		close(sv[0]);
		close(sv[1]);
		return ret;
	}
	CHECK(reg[0] == masks[0] && reg[3] == 0, "registered masks %llx %llx", (unsigned long long)reg[0],
	      (unsigned long long)reg[3]);
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
	CHECK(args[0].lock_timeouts + args[2].lock_timeouts + args[3].lock_timeouts > 0,
	      "no field lock timeout while GPU 1 held the lock in a hung GetFieldValues");

	if (evfd >= 0)
		events(evfd);
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
