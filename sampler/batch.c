// See batch.h. Functions are looked up once with dlsym in the library go-nvml
// loaded with RTLD_GLOBAL; the Go side plans only calls whose symbol exists,
// and a NULL pointer is still never called (recorded as function not found).
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <time.h>

#include "batch.h"

typedef void *dev_t_;

static struct {
	int (*handle)(unsigned int, dev_t_ *);
	int (*fields)(dev_t_, int, struct gt_nvml_field_value *);
	int (*temp)(dev_t_, int, unsigned int *);
	int (*power_lim)(dev_t_, unsigned int *);
	int (*pstate)(dev_t_, int *);
	int (*clock)(dev_t_, int, unsigned int *);
	int (*util)(dev_t_, struct gt_nvml_utilization *);
	int (*memv2)(dev_t_, struct gt_nvml_memory_v2 *);
	int (*mem)(dev_t_, struct gt_nvml_memory *);
	int (*reasons)(dev_t_, unsigned long long *);
	int (*throttle)(dev_t_, unsigned long long *);
	int (*fan1)(dev_t_, unsigned int *);
	int (*fan2)(dev_t_, unsigned int, unsigned int *);
	int (*target)(dev_t_, unsigned int, unsigned int *);
	int (*enc)(dev_t_, unsigned int *, unsigned int *);
	int (*dec)(dev_t_, unsigned int *, unsigned int *);
	int (*pcie_gen)(dev_t_, unsigned int *);
	int (*pcie_width)(dev_t_, unsigned int *);
	int (*thermal)(dev_t_, unsigned int, struct gt_nvml_thermal_settings *);
	int (*power)(dev_t_, unsigned int *);
	int (*enforced)(dev_t_, unsigned int *);
	int (*energy)(dev_t_, unsigned long long *);
	int (*replay)(dev_t_, unsigned int *);
} fn;

static pthread_once_t once = PTHREAD_ONCE_INIT;

// Serializes GetFieldValues across GPUs (it has been seen to misbehave when
// called concurrently); waiters give up after field_wait_ms.
static pthread_mutex_t field_mu = PTHREAD_MUTEX_INITIALIZER;

static void *sym(const char *a, const char *b)
{
	void *p = dlsym(RTLD_DEFAULT, a);
	if (!p && b)
		p = dlsym(RTLD_DEFAULT, b);
	return p;
}

static void resolve(void)
{
	fn.handle = sym("nvmlDeviceGetHandleByIndex_v2", "nvmlDeviceGetHandleByIndex");
	fn.fields = sym("nvmlDeviceGetFieldValues", NULL);
	fn.temp = sym("nvmlDeviceGetTemperature", NULL);
	fn.power_lim = sym("nvmlDeviceGetPowerManagementLimit", NULL);
	fn.pstate = sym("nvmlDeviceGetPerformanceState", NULL);
	fn.clock = sym("nvmlDeviceGetClockInfo", NULL);
	fn.util = sym("nvmlDeviceGetUtilizationRates", NULL);
	fn.memv2 = sym("nvmlDeviceGetMemoryInfo_v2", NULL);
	fn.mem = sym("nvmlDeviceGetMemoryInfo", NULL);
	fn.reasons = sym("nvmlDeviceGetCurrentClocksEventReasons", NULL);
	fn.throttle = sym("nvmlDeviceGetCurrentClocksThrottleReasons", NULL);
	fn.fan1 = sym("nvmlDeviceGetFanSpeed", NULL);
	fn.fan2 = sym("nvmlDeviceGetFanSpeed_v2", NULL);
	fn.target = sym("nvmlDeviceGetTargetFanSpeed", NULL);
	fn.enc = sym("nvmlDeviceGetEncoderUtilization", NULL);
	fn.dec = sym("nvmlDeviceGetDecoderUtilization", NULL);
	fn.pcie_gen = sym("nvmlDeviceGetCurrPcieLinkGeneration", NULL);
	fn.pcie_width = sym("nvmlDeviceGetCurrPcieLinkWidth", NULL);
	fn.thermal = sym("nvmlDeviceGetThermalSettings", NULL);
	fn.power = sym("nvmlDeviceGetPowerUsage", NULL);
	fn.enforced = sym("nvmlDeviceGetEnforcedPowerLimit", NULL);
	fn.energy = sym("nvmlDeviceGetTotalEnergyConsumption", NULL);
	fn.replay = sym("nvmlDeviceGetPcieReplayCounter", NULL);
}

void *gt_batch_handle(unsigned int index)
{
	dev_t_ d = NULL;
	pthread_once(&once, resolve);
	if (!fn.handle || fn.handle(index, &d) != GT_NVML_SUCCESS)
		return NULL;
	return d;
}

// lock_fields takes the field lock, giving up after wait_ms on the monotonic
// clock (a timed lock on the wall clock would stretch when the clock steps).
// Contention is rare: only while another GPU is inside GetFieldValues.
static int lock_fields(uint32_t wait_ms)
{
	struct timespec now, end, nap = { 0, 200 * 1000 };
	if (pthread_mutex_trylock(&field_mu) == 0)
		return 1;
	clock_gettime(CLOCK_MONOTONIC, &end);
	end.tv_sec += wait_ms / 1000;
	end.tv_nsec += (long)(wait_ms % 1000) * 1000000L;
	if (end.tv_nsec >= 1000000000L) {
		end.tv_sec++;
		end.tv_nsec -= 1000000000L;
	}
	for (;;) {
		nanosleep(&nap, NULL);
		if (pthread_mutex_trylock(&field_mu) == 0)
			return 1;
		clock_gettime(CLOCK_MONOTONIC, &now);
		if (now.tv_sec > end.tv_sec || (now.tv_sec == end.tv_sec && now.tv_nsec >= end.tv_nsec))
			return 0;
	}
}

// gt_batch_fields makes one GetFieldValues call outside a batch (the health
// counters), under the same field lock as the batches, so that field calls
// stay serialized across GPUs. Returns GT_LOCK_TIMEOUT when the lock was not
// had within wait_ms.
int32_t gt_batch_fields(void *dev, int32_t n, struct gt_nvml_field_value *f, uint32_t wait_ms)
{
	int32_t r;
	if (!fn.fields)
		return GT_NVML_ERROR_FUNCTION_NOT_FOUND;
	if (!lock_fields(wait_ms))
		return GT_LOCK_TIMEOUT;
	r = fn.fields(dev, n, f);
	pthread_mutex_unlock(&field_mu);
	return r;
}

#define PLANNED(c) (b->plan & (1ULL << (c)))
// CALL records call c's result; after a lost GPU nothing more is called.
#define CALL(c, f, ...)                                                            \
	do {                                                                       \
		if (!lost && PLANNED(c)) {                                         \
			if (!(f)) {                                                \
				b->ret[c] = GT_NVML_ERROR_FUNCTION_NOT_FOUND;         \
			} else {                                                   \
				__atomic_store_n(&b->cur, (c) + 1, __ATOMIC_RELEASE); \
				b->ret[c] = (f)(__VA_ARGS__);                      \
				lost = b->ret[c] == GT_NVML_ERROR_GPU_IS_LOST;       \
			}                                                          \
		}                                                                  \
	} while (0)

void gt_batch_run(void *dev, struct gt_batch *b)
{
	int lost = 0;
	pthread_once(&once, resolve);
	if (PLANNED(GT_FIELDS)) {
		if (lock_fields(b->field_wait_ms)) {
			CALL(GT_FIELDS, fn.fields, dev, b->nfields, b->fields);
			pthread_mutex_unlock(&field_mu);
		} else {
			b->ret[GT_FIELDS] = GT_LOCK_TIMEOUT;
		}
		if (b->ret[GT_FIELDS] != GT_NVML_SUCCESS) {
			b->plan |= b->fallback;
		} else {
			// A field the driver refused is read by its own call in
			// this same sample.
			for (int i = 0; i < b->nfields && i < GT_MAXFIELDS; i++)
				if (b->fields[i].nvml_return != GT_NVML_SUCCESS)
					b->plan |= b->field_fallback[i];
		}
	}
	CALL(GT_TEMP, fn.temp, dev, GT_NVML_TEMPERATURE_GPU, &b->temp);
	CALL(GT_POWERLIM, fn.power_lim, dev, &b->power_lim);
	int pstate = 0;
	CALL(GT_PSTATE, fn.pstate, dev, &pstate);
	b->pstate = (uint32_t)pstate;
	CALL(GT_CLK_GFX, fn.clock, dev, GT_NVML_CLOCK_GRAPHICS, &b->clk[0]);
	CALL(GT_CLK_SM, fn.clock, dev, GT_NVML_CLOCK_SM, &b->clk[1]);
	CALL(GT_CLK_MEM, fn.clock, dev, GT_NVML_CLOCK_MEM, &b->clk[2]);
	struct gt_nvml_utilization u = { 0, 0 };
	CALL(GT_UTIL, fn.util, dev, &u);
	b->util_gpu = u.gpu;
	b->util_mem = u.memory;
	struct gt_nvml_memory_v2 m2;
	memset(&m2, 0, sizeof(m2));
	m2.version = GT_NVML_STRUCT_VERSION(sizeof(m2), 2);
	CALL(GT_MEMV2, fn.memv2, dev, &m2);
	struct gt_nvml_memory m1 = { 0, 0, 0 };
	CALL(GT_MEM, fn.mem, dev, &m1);
	b->mem_used = PLANNED(GT_MEMV2) ? m2.used : m1.used;
	unsigned long long reasons = 0;
	CALL(GT_REASONS, fn.reasons, dev, &reasons);
	CALL(GT_THROTTLE, fn.throttle, dev, &reasons);
	b->reasons = reasons;
	CALL(GT_FANSPEED1, fn.fan1, dev, &b->fan1);
	for (unsigned int i = 0; i < GT_MAXFANS; i++) {
		CALL(GT_FANSPEED + i, fn.fan2, dev, i, &b->fan[i]);
		CALL(GT_TARGET + i, fn.target, dev, i, &b->target[i]);
	}
	unsigned int period = 0;
	CALL(GT_ENC, fn.enc, dev, &b->enc, &period);
	CALL(GT_DEC, fn.dec, dev, &b->dec, &period);
	CALL(GT_PCIEGEN, fn.pcie_gen, dev, &b->pcie_gen);
	CALL(GT_PCIEWIDTH, fn.pcie_width, dev, &b->pcie_width);
	struct gt_nvml_thermal_settings th;
	memset(&th, 0, sizeof(th));
	CALL(GT_THERMAL, fn.thermal, dev, 0, &th);
	b->th_count = th.count;
	b->th_controller = th.sensor[0].controller;
	b->th_current = th.sensor[0].current_temp;
	b->th_target = th.sensor[0].target;
	CALL(GT_POWER, fn.power, dev, &b->power);
	CALL(GT_ENFORCED, fn.enforced, dev, &b->enforced);
	unsigned long long energy = 0;
	CALL(GT_ENERGY, fn.energy, dev, &energy);
	b->energy = energy;
	CALL(GT_REPLAY, fn.replay, dev, &b->replay);
	__atomic_store_n(&b->cur, 0, __ATOMIC_RELEASE);
}
