/*
 * device.c - device enumeration and every modelled per-device query.
 *
 * Hot path rules: no malloc, no I/O, no locks. Each call reads the clock once
 * (plus once more only after sleeping in an injected hang) and evaluates the
 * precomputed per-GPU tracks by binary search over a few segments.
 */
#include "sim.h"

#include <string.h>
#include <strings.h>

struct nvmlDevice_st g_devs[SIM_MAX_GPUS];

/* ---- value evaluation ---------------------------------------------------- */

static inline uint64_t mix64(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ULL;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
	return x ^ (x >> 31);
}

/* Deterministic noise in [-amp, amp]; changes every 100 ms. */
static double noise(const struct nvmlDevice_st *d, int m, int64_t t, double amp)
{
	uint64_t tick = t > 0 ? (uint64_t)(t / 100000000LL) : 0;
	uint64_t h = mix64(g_host.seed ^ ((uint64_t)d->index << 56) ^ ((uint64_t)m << 48) ^ tick);
	double u = (double)(h >> 11) * (1.0 / 9007199254740992.0); /* [0,1) */

	return (2.0 * u - 1.0) * amp;
}

static inline const struct sim_seg *find_seg(const struct sim_track *tr, int64_t t, uint32_t *idx)
{
	const struct sim_seg *s = g_segs + tr->off;
	uint32_t lo = 0, hi = tr->n;

	while (lo < hi) {
		uint32_t mid = (lo + hi) / 2;
		if (s[mid].t0 <= t)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0)
		return NULL;
	*idx = lo - 1;
	return &s[lo - 1];
}

static inline double seg_value(const struct sim_seg *g, int64_t t)
{
	if (t >= g->t1)
		return g->v1;
	return g->v0 + (g->v1 - g->v0) * (double)(t - g->t0) / (double)(g->t1 - g->t0);
}

static double eval_raw(const struct nvmlDevice_st *d, int m, int64_t t)
{
	const struct sim_track *tr = &d->tr[m];
	const struct sim_seg *g;
	uint32_t i;

	if (tr->n == 0)
		return tr->def;
	g = find_seg(tr, t, &i);
	return g == NULL ? tr->def : seg_value(g, t);
}

double sim_eval(const struct nvmlDevice_st *d, int m, int64_t t)
{
	double v = eval_raw(d, m, t);
	double amp = d->tr[m].noise;

	if (amp != 0) {
		double nv = v + noise(d, m, t, amp);
		if (v >= 0 && nv < 0)
			nv = 0;
		v = nv;
	}
	return v;
}

/* Integral of segment g (mW) from its start over dt ns, in mJ. */
static double seg_energy(const struct sim_seg *g, int64_t dt)
{
	int64_t ramp = g->t1 - g->t0;

	if (dt <= 0)
		return 0;
	if (ramp <= 0)
		return g->v1 * (double)dt / 1e9;
	if (dt <= ramp) {
		double vt = g->v0 + (g->v1 - g->v0) * (double)dt / (double)ramp;
		return (g->v0 + vt) / 2 * (double)dt / 1e9;
	}
	return (g->v0 + g->v1) / 2 * (double)ramp / 1e9 + g->v1 * (double)(dt - ramp) / 1e9;
}

/* Called once per device when the scenario is compiled (not hot). */
void sim_energy_prepare(struct nvmlDevice_st *d, double *ecum)
{
	const struct sim_track *tr = &d->tr[M_POWER];
	const struct sim_seg *s = g_segs + tr->off;
	uint32_t i;

	d->ecum = ecum;
	if (tr->n == 0)
		return;
	ecum[0] = tr->def * (double)s[0].t0 / 1e9;
	for (i = 0; i + 1 < tr->n; i++)
		ecum[i + 1] = ecum[i] + seg_energy(&s[i], s[i + 1].t0 - s[i].t0);
}

static double energy_at(const struct nvmlDevice_st *d, int64_t t)
{
	const struct sim_track *tr = &d->tr[M_POWER];
	const struct sim_seg *g;
	uint32_t i;

	if (t < 0)
		t = 0;
	if (tr->n == 0 || (g = find_seg(tr, t, &i)) == NULL)
		return d->energy_start + tr->def * (double)t / 1e9;
	return d->energy_start + d->ecum[i] + seg_energy(g, t - g->t0);
}

static inline unsigned long long to_u64(double v)
{
	if (v >= 1.8446744073709552e19)
		return ~0ULL;
	if (v >= 0)
		return (unsigned long long)(v + 0.5);
	if (v <= -9.2e18)
		return 0;
	return (unsigned long long)(long long)(v - 0.5);
}

static inline int to_i32(double v)
{
	return (int)to_u32(v);
}

/* ---- handle validation, hangs, faults ------------------------------------ */

struct nvmlDevice_st *sim_dev_of(nvmlDevice_t device)
{
	struct nvmlDevice_st *d = device.handle;

	if (d < &g_devs[0] || d >= &g_devs[g_host.ngpus])
		return NULL;
	if (&g_devs[d->index] != d)
		return NULL;
	return d;
}

int sim_dev_present(const struct nvmlDevice_st *d, int64_t now)
{
	return now < d->removed_at;
}

nvmlReturn_t sim_dev_enter(int fn, nvmlDevice_t device, struct nvmlDevice_st **out, int64_t *nowp)
{
	struct nvmlDevice_st *d;
	int64_t now;
	unsigned int i;

	if (!sim_initialized())
		return NVML_ERROR_UNINITIALIZED;
	d = sim_dev_of(device);
	if (d == NULL)
		return NVML_ERROR_INVALID_ARGUMENT;
	now = sim_now();

	/* Injected hangs: block only this thread; no lock is held. */
again:
	for (i = 0; i < d->nhang; i++) {
		const struct sim_hang *h = &d->hangs[i];
		if (now >= h->start && now < h->end && fnset_has(&h->fns, fn)) {
			sim_sleep_until(h->end);
			now = sim_now();
			if (h->ret != NVML_SUCCESS)
				return h->ret;
			goto again;
		}
	}

	/* The call's cost (cost.c), after any hang: a hung call holds no lock. */
	if (g_cost_on) {
		sim_cost_wait(fn);
		now = sim_now();
	}

	/* lost_at is atomic: the thermal model's crash sets it (fans.c),
	 * once the model has run up to now. */
	if (d->th != NULL)
		sim_temp(d, now);
	if (now >= __atomic_load_n(&d->lost_at, __ATOMIC_RELAXED) || now >= d->removed_at)
		return NVML_ERROR_GPU_IS_LOST;

	for (i = 0; i < d->nfail; i++) {
		const struct sim_fail *f = &d->fails[i];
		if (f->field == 0 && now >= f->from && now < f->until && fnset_has(&f->fns, fn))
			return f->code;
	}
	*out = d;
	*nowp = now;
	return NVML_SUCCESS;
}

/* ANSWER_STR defines a device query copying the string src into the
 * caller's buffer arg of length bytes. */
#define ANSWER_STR(fn, arg, src)                                           \
	nvmlReturn_t fn(nvmlDevice_t device, char *arg, unsigned int length) \
	{                                                                  \
		ENTER(fn);                                                 \
		return sim_copy_str(arg, length, src);                     \
	}

/* ANSWER defines a device query with one result, expr (d and now are in
 * scope): entered like every device call, a NULL result pointer refused. */
#define ANSWER(fn, type, arg, expr)                                      \
	nvmlReturn_t fn(nvmlDevice_t device, type *arg)                  \
	{                                                                \
		ENTER(fn);                                               \
		NEED(arg);                                               \
		*arg = (expr);                                           \
		return NVML_SUCCESS;                                     \
	}

/* ANSWER2 defines a device query with two results of one type, expr_a and
 * expr_b, like ANSWER. */
#define ANSWER2(fn, type, a, expr_a, b, expr_b)                          \
	nvmlReturn_t fn(nvmlDevice_t device, type *a, type *b)           \
	{                                                                \
		ENTER(fn);                                               \
		NEED(a);                                                 \
		NEED(b);                                                 \
		*a = (expr_a);                                           \
		*b = (expr_b);                                           \
		return NVML_SUCCESS;                                     \
	}

/* ANSWER_AT defines a device query with one result for an index (a sensor,
 * a threshold kind, a clock type): an index at or above count is an invalid
 * argument, one where supported is false is not supported, and expr (d, now
 * and the index are in scope) is the answer. */
#define ANSWER_AT(fn, itype, index, count, supported, type, arg, expr)   \
	nvmlReturn_t fn(nvmlDevice_t device, itype index, type *arg)      \
	{                                                                \
		ENTER(fn);                                               \
		NEED(arg);                                               \
		if ((unsigned)index >= (count))                          \
			return NVML_ERROR_INVALID_ARGUMENT;              \
		if (!(supported))                                        \
			return NVML_ERROR_NOT_SUPPORTED;                 \
		*arg = (expr);                                           \
		return NVML_SUCCESS;                                     \
	}

/* ---- enumeration --------------------------------------------------------- */

static unsigned int present_count(int64_t now)
{
	unsigned int i, n = 0;

	for (i = 0; i < g_host.ngpus; i++)
		if (sim_dev_present(&g_devs[i], now))
			n++;
	return n;
}

static nvmlReturn_t get_count(unsigned int *count)
{
	if (!sim_initialized())
		return NVML_ERROR_UNINITIALIZED;
	NEED(count);
	*count = present_count(sim_now());
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *deviceCount)
{
	SIM_COUNT(nvmlDeviceGetCount_v2);
	return get_count(deviceCount);
}

nvmlReturn_t nvmlDeviceGetCount(unsigned int *deviceCount)
{
	SIM_COUNT(nvmlDeviceGetCount);
	return get_count(deviceCount);
}

static nvmlReturn_t hand_out(int fn, struct nvmlDevice_st *d, nvmlDevice_t *out)
{
	nvmlDevice_t h;
	int64_t now;
	nvmlReturn_t r;

	h.handle = d;
	r = sim_dev_enter(fn, h, &d, &now);
	if (r != NVML_SUCCESS)
		return r;
	out->handle = d;
	return NVML_SUCCESS;
}

static nvmlReturn_t by_index(int fn, unsigned int index, nvmlDevice_t *device)
{
	unsigned int i, k = 0;
	int64_t now;

	if (!sim_initialized())
		return NVML_ERROR_UNINITIALIZED;
	NEED(device);
	now = sim_now();
	for (i = 0; i < g_host.ngpus; i++) {
		if (!sim_dev_present(&g_devs[i], now))
			continue;
		if (k++ == index)
			return hand_out(fn, &g_devs[i], device);
	}
	return NVML_ERROR_INVALID_ARGUMENT;
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device)
{
	SIM_COUNT(nvmlDeviceGetHandleByIndex_v2);
	return by_index(FN_nvmlDeviceGetHandleByIndex_v2, index, device);
}

nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int index, nvmlDevice_t *device)
{
	SIM_COUNT(nvmlDeviceGetHandleByIndex);
	return by_index(FN_nvmlDeviceGetHandleByIndex, index, device);
}

nvmlReturn_t nvmlDeviceGetHandleByUUID(const char *uuid, nvmlDevice_t *device)
{
	unsigned int i;
	int64_t now;

	SIM_COUNT(nvmlDeviceGetHandleByUUID);
	if (!sim_initialized())
		return NVML_ERROR_UNINITIALIZED;
	NEED(uuid);
	NEED(device);
	now = sim_now();
	for (i = 0; i < g_host.ngpus; i++)
		if (sim_dev_present(&g_devs[i], now) && strcasecmp(g_devs[i].uuid, uuid) == 0)
			return hand_out(FN_nvmlDeviceGetHandleByUUID, &g_devs[i], device);
	return NVML_ERROR_NOT_FOUND;
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* Parses [domain:]bus:device[.function], hex, any case. */
int sim_parse_busid(const char *s, unsigned int *domain, unsigned int *bus, unsigned int *dev)
{
	unsigned long long part[3] = { 0, 0, 0 };
	int nparts = 0, digits = 0, v;

	for (;; s++) {
		if (*s == ':' || *s == '.' || *s == '\0') {
			if (digits == 0 || nparts >= 3)
				return -1;
			nparts++;
			digits = 0;
			if (*s != ':')
				break;
			continue;
		}
		v = hexval(*s);
		if (v < 0 || digits >= 8)
			return -1;
		part[nparts] = part[nparts] * 16 + (unsigned)v;
		digits++;
	}
	if (*s == '.') {
		s++;
		if (hexval(*s) < 0 || s[1] != '\0')
			return -1;
	}
	if (nparts == 3) {
		*domain = (unsigned int)part[0];
		*bus = (unsigned int)part[1];
		*dev = (unsigned int)part[2];
	} else if (nparts == 2) {
		*domain = 0;
		*bus = (unsigned int)part[0];
		*dev = (unsigned int)part[1];
	} else {
		return -1;
	}
	return 0;
}

static nvmlReturn_t by_busid(int fn, const char *busid, nvmlDevice_t *device)
{
	unsigned int dom, bus, dev, i;
	int64_t now;

	if (!sim_initialized())
		return NVML_ERROR_UNINITIALIZED;
	NEED(busid);
	NEED(device);
	if (sim_parse_busid(busid, &dom, &bus, &dev) != 0)
		return NVML_ERROR_INVALID_ARGUMENT;
	now = sim_now();
	for (i = 0; i < g_host.ngpus; i++) {
		struct nvmlDevice_st *d = &g_devs[i];
		if (sim_dev_present(d, now) && d->domain == dom && d->bus == bus && d->dev == dev)
			return hand_out(fn, d, device);
	}
	return NVML_ERROR_NOT_FOUND;
}

nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char *pciBusId, nvmlDevice_t *device)
{
	SIM_COUNT(nvmlDeviceGetHandleByPciBusId_v2);
	return by_busid(FN_nvmlDeviceGetHandleByPciBusId_v2, pciBusId, device);
}

nvmlReturn_t nvmlDeviceGetHandleByPciBusId(const char *pciBusId, nvmlDevice_t *device)
{
	SIM_COUNT(nvmlDeviceGetHandleByPciBusId);
	return by_busid(FN_nvmlDeviceGetHandleByPciBusId, pciBusId, device);
}

/* ---- identity ------------------------------------------------------------ */

nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t device, unsigned int *index)
{
	unsigned int i, k = 0;

	ENTER(nvmlDeviceGetIndex);
	NEED(index);
	for (i = 0; i < d->index; i++)
		if (sim_dev_present(&g_devs[i], now))
			k++;
	*index = k;
	return NVML_SUCCESS;
}

ANSWER_STR(nvmlDeviceGetName, name, d->name)

ANSWER_STR(nvmlDeviceGetUUID, uuid, d->uuid)

ANSWER_STR(nvmlDeviceGetSerial, serial, d->serial)

ANSWER_STR(nvmlDeviceGetVbiosVersion, version, d->vbios)

ANSWER_STR(nvmlDeviceGetBoardPartNumber, partNumber, d->part)

ANSWER(nvmlDeviceGetMinorNumber, unsigned int, minorNumber, d->minor)

static void fill_pci(const struct nvmlDevice_st *d, nvmlPciInfo_t *pci)
{
	memset(pci, 0, sizeof(*pci));
	memcpy(pci->busIdLegacy, d->busid_legacy, sizeof(pci->busIdLegacy));
	memcpy(pci->busId, d->busid, sizeof(pci->busId));
	pci->domain = d->domain;
	pci->bus = d->bus;
	pci->device = d->dev;
	pci->pciDeviceId = d->pci_device_id;
	pci->pciSubSystemId = d->pci_subsystem_id;
}

/* ANSWER_PCI defines one version of the PCI info query (they differ only in
 * the name a driver exports). */
#define ANSWER_PCI(fn)                                                  \
	nvmlReturn_t fn(nvmlDevice_t device, nvmlPciInfo_t *pci)        \
	{                                                               \
		ENTER(fn);                                              \
		NEED(pci);                                              \
		fill_pci(d, pci);                                       \
		return NVML_SUCCESS;                                    \
	}

ANSWER_PCI(nvmlDeviceGetPciInfo)

ANSWER_PCI(nvmlDeviceGetPciInfo_v2)

#ifndef SIMNVML_OLD_DRIVER
ANSWER_PCI(nvmlDeviceGetPciInfo_v3)
#endif

ANSWER(nvmlDeviceGetArchitecture, nvmlDeviceArchitecture_t, arch, d->arch)

ANSWER(nvmlDeviceGetBrand, nvmlBrandType_t, type, (nvmlBrandType_t)d->brand)

ANSWER(nvmlDeviceGetPersistenceMode, nvmlEnableState_t, mode, d->persistence ? NVML_FEATURE_ENABLED : NVML_FEATURE_DISABLED)

/* ---- thermal ------------------------------------------------------------- */

ANSWER_AT(nvmlDeviceGetTemperature, nvmlTemperatureSensors_t, sensorType, NVML_TEMPERATURE_COUNT,
	  sensorType == NVML_TEMPERATURE_GPU, unsigned int, temp, to_u32(sim_temp(d, now)))

ANSWER_AT(nvmlDeviceGetTemperatureThreshold, nvmlTemperatureThresholds_t, thresholdType, NVML_TEMPERATURE_THRESHOLD_COUNT,
	  d->thresholds[thresholdType] >= 0, unsigned int, temp, (unsigned int)d->thresholds[thresholdType])

#ifndef SIMNVML_OLD_DRIVER
/* thermal_sensor is one sensor of GetThermalSettings, with the default
 * range every sensor reports (0-127 C). */
static nvmlGpuThermalSettingsSensor_t thermal_sensor(nvmlThermalController_t controller, nvmlThermalTarget_t target, int temp)
{
	nvmlGpuThermalSettingsSensor_t s = {
		.controller = controller,
		.defaultMinTemp = 0,
		.defaultMaxTemp = 127,
		.currentTemp = temp,
		.target = target,
	};
	return s;
}

nvmlReturn_t nvmlDeviceGetThermalSettings(nvmlDevice_t device, unsigned int sensorIndex, nvmlGpuThermalSettings_t *pThermalSettings)
{
	nvmlGpuThermalSettingsSensor_t all[SIM_MAX_SENSORS];
	unsigned int i;

	ENTER(nvmlDeviceGetThermalSettings);
	NEED(pThermalSettings);
	if (d->sensors == 0)
		return NVML_ERROR_NOT_SUPPORTED;
	all[0] = thermal_sensor((nvmlThermalController_t)to_i32(sim_eval(d, M_SENSOR_CONTROLLER, now)),
				(nvmlThermalTarget_t)to_i32(sim_eval(d, M_SENSOR_TARGET, now)),
				to_i32(d->sensor_temp_explicit ? sim_eval(d, M_SENSOR_TEMP, now) : sim_temp(d, now)));
	all[1] = thermal_sensor(NVML_THERMAL_CONTROLLER_GPU_INTERNAL, NVML_THERMAL_TARGET_MEMORY, to_i32(sim_eval(d, M_MEMTEMP, now)));
	all[2] = thermal_sensor(NVML_THERMAL_CONTROLLER_GPU_INTERNAL, NVML_THERMAL_TARGET_BOARD, all[0].currentTemp - 8);

	memset(pThermalSettings, 0, sizeof(*pThermalSettings));
	if (sensorIndex == NVML_THERMAL_TARGET_ALL) {
		pThermalSettings->count = d->sensors;
		for (i = 0; i < d->sensors; i++)
			pThermalSettings->sensor[i] = all[i];
		return NVML_SUCCESS;
	}
	if (sensorIndex >= d->sensors)
		return NVML_ERROR_INVALID_ARGUMENT;
	pThermalSettings->count = 1;
	pThermalSettings->sensor[0] = all[sensorIndex];
	return NVML_SUCCESS;
}
#endif

/* ---- power --------------------------------------------------------------- */

ANSWER(nvmlDeviceGetPowerUsage, unsigned int, power, to_u32(sim_eval(d, M_POWER, now)))

ANSWER(nvmlDeviceGetPowerManagementLimit, unsigned int, limit, to_u32(sim_eval(d, M_PLIMIT, now)))

ANSWER(nvmlDeviceGetEnforcedPowerLimit, unsigned int, limit, to_u32(sim_eval(d, M_ENFORCED, now)))

ANSWER(nvmlDeviceGetPowerManagementDefaultLimit, unsigned int, defaultLimit, d->p_default)

ANSWER2(nvmlDeviceGetPowerManagementLimitConstraints, unsigned int, minLimit, d->p_min, maxLimit, d->p_max)

ANSWER(nvmlDeviceGetTotalEnergyConsumption, unsigned long long, energy, to_u64(energy_at(d, now)))

/* ---- performance --------------------------------------------------------- */

ANSWER(nvmlDeviceGetPerformanceState, nvmlPstates_t, pState, (nvmlPstates_t)to_u32(sim_eval(d, M_PSTATE, now)))

ANSWER(nvmlDeviceGetPowerState, nvmlPstates_t, pState, (nvmlPstates_t)to_u32(sim_eval(d, M_PSTATE, now)))

ANSWER_AT(nvmlDeviceGetClockInfo, nvmlClockType_t, type, NVML_CLOCK_COUNT, 1, unsigned int, clock,
	  to_u32(sim_eval(d, M_CLK_GFX + (int)type, now)))

ANSWER_AT(nvmlDeviceGetMaxClockInfo, nvmlClockType_t, type, NVML_CLOCK_COUNT, 1, unsigned int, clock, d->max_clk[type])

nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device, nvmlUtilization_t *utilization)
{
	ENTER(nvmlDeviceGetUtilizationRates);
	NEED(utilization);
	utilization->gpu = to_u32(sim_eval(d, M_UTIL_GPU, now));
	utilization->memory = to_u32(sim_eval(d, M_UTIL_MEM, now));
	return NVML_SUCCESS;
}

/* ANSWER_CODEC defines the encoder or decoder utilization query: metric m
 * over NVML's sampling period. */
#define ANSWER_CODEC(fn, m) \
	ANSWER2(fn, unsigned int, utilization, to_u32(sim_eval(d, (m), now)), samplingPeriodUs, 167000)

ANSWER_CODEC(nvmlDeviceGetEncoderUtilization, M_UTIL_ENC)

ANSWER_CODEC(nvmlDeviceGetDecoderUtilization, M_UTIL_DEC)

#ifndef SIMNVML_OLD_DRIVER
/* The JPEG decoder and the optical flow accelerator: idle (R525 and later). */
ANSWER2(nvmlDeviceGetJpgUtilization, unsigned int, utilization, 0, samplingPeriodUs, 167000)

ANSWER2(nvmlDeviceGetOfaUtilization, unsigned int, utilization, 0, samplingPeriodUs, 167000)
#endif

/* BAR1: a 256 MiB aperture with 4 MiB mapped. */
nvmlReturn_t nvmlDeviceGetBAR1MemoryInfo(nvmlDevice_t device, nvmlBAR1Memory_t *bar1Memory)
{
	ENTER(nvmlDeviceGetBAR1MemoryInfo);
	NEED(bar1Memory);
	bar1Memory->bar1Total = 256ULL << 20;
	bar1Memory->bar1Used = 4ULL << 20;
	bar1Memory->bar1Free = bar1Memory->bar1Total - bar1Memory->bar1Used;
	return NVML_SUCCESS;
}

static inline unsigned long long mem_used(const struct nvmlDevice_st *d, int64_t now)
{
	return to_u64(sim_eval(d, M_MEM_USED, now) * 1048576.0);
}

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory)
{
	unsigned long long used;

	ENTER(nvmlDeviceGetMemoryInfo);
	NEED(memory);
	/* v1: "used" includes the memory reserved by the driver. */
	used = mem_used(d, now) + d->mem_reserved;
	memory->total = d->mem_total;
	memory->used = used;
	memory->free = d->mem_total > used ? d->mem_total - used : 0;
	return NVML_SUCCESS;
}

#ifndef SIMNVML_OLD_DRIVER
nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *memory)
{
	unsigned long long used, taken;

	ENTER(nvmlDeviceGetMemoryInfo_v2);
	NEED_VERSION(memory, nvmlMemory_v2);
	used = mem_used(d, now);
	taken = used + d->mem_reserved;
	memory->total = d->mem_total;
	memory->reserved = d->mem_reserved;
	memory->used = used;
	memory->free = d->mem_total > taken ? d->mem_total - taken : 0;
	return NVML_SUCCESS;
}
#endif

/* ---- PCIe ---------------------------------------------------------------- */

ANSWER(nvmlDeviceGetCurrPcieLinkGeneration, unsigned int, currLinkGen, to_u32(sim_eval(d, M_PCIE_GEN, now)))

ANSWER(nvmlDeviceGetCurrPcieLinkWidth, unsigned int, currLinkWidth, to_u32(sim_eval(d, M_PCIE_WIDTH, now)))

ANSWER(nvmlDeviceGetMaxPcieLinkGeneration, unsigned int, maxLinkGen, d->max_pcie_gen)

ANSWER(nvmlDeviceGetMaxPcieLinkWidth, unsigned int, maxLinkWidth, d->max_pcie_width)

#ifndef SIMNVML_OLD_DRIVER
/* The GPU's own maximum: the scenario's link maximum (the slot does not
 * hold the GPU back). */
ANSWER(nvmlDeviceGetGpuMaxPcieLinkGeneration, unsigned int, maxLinkGenDevice, d->max_pcie_gen)
#endif

ANSWER(nvmlDeviceGetPcieReplayCounter, unsigned int, value, to_u32(sim_eval(d, M_PCIE_REPLAY, now)))

/* ---- clocks event (throttle) reasons ------------------------------------- */

#ifndef SIMNVML_OLD_DRIVER
ANSWER(nvmlDeviceGetCurrentClocksEventReasons, unsigned long long, clocksEventReasons, to_u64(sim_eval(d, M_REASONS, now)))

ANSWER(nvmlDeviceGetSupportedClocksEventReasons, unsigned long long, supportedClocksEventReasons, d->supported_reasons)
#endif

ANSWER(nvmlDeviceGetCurrentClocksThrottleReasons, unsigned long long, clocksThrottleReasons, to_u64(sim_eval(d, M_REASONS, now)))

ANSWER(nvmlDeviceGetSupportedClocksThrottleReasons, unsigned long long, supportedClocksThrottleReasons, d->supported_reasons)

/* ---- GSP ----------------------------------------------------------------- */

#ifndef SIMNVML_OLD_DRIVER
nvmlReturn_t nvmlDeviceGetGspFirmwareVersion(nvmlDevice_t device, char *version)
{
	ENTER(nvmlDeviceGetGspFirmwareVersion);
	NEED(version);
	if (!d->gsp_enabled)
		return NVML_ERROR_NOT_SUPPORTED;
	memcpy(version, d->gsp_version, NVML_GSP_FIRMWARE_VERSION_BUF_SIZE);
	return NVML_SUCCESS;
}

ANSWER2(nvmlDeviceGetGspFirmwareMode, unsigned int, isEnabled, d->gsp_enabled, defaultMode, d->gsp_default)
#endif

/* ---- field values -------------------------------------------------------- */

static nvmlReturn_t field_fail(const struct nvmlDevice_st *d, unsigned int field, int64_t now)
{
	unsigned int i;

	for (i = 0; i < d->nfail; i++) {
		const struct sim_fail *f = &d->fails[i];
		if (f->field == field && now >= f->from && now < f->until)
			return f->code;
	}
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetFieldValues(nvmlDevice_t device, int valuesCount, nvmlFieldValue_t *values)
{
	long long ts;
	int i;

	ENTER(nvmlDeviceGetFieldValues);
	if (valuesCount <= 0 || values == NULL)
		return NVML_ERROR_INVALID_ARGUMENT;
	ts = (now + g_t0 + g_real_offset) / 1000;
	for (i = 0; i < valuesCount; i++) {
		nvmlFieldValue_t *v = &values[i];
		nvmlReturn_t r = NVML_SUCCESS;
		int power = 0;

		v->timestamp = ts;
		v->latencyUsec = 0;
		v->value.ullVal = 0;
		if (d->has_field_fails && (r = field_fail(d, v->fieldId, now)) != NVML_SUCCESS) {
			v->valueType = NVML_VALUE_TYPE_UNSIGNED_INT;
			v->nvmlReturn = r;
			continue;
		}
		v->valueType = NVML_VALUE_TYPE_UNSIGNED_INT;
		switch (v->fieldId) {
		case NVML_FI_DEV_POWER_AVERAGE:
			power = 1;
			v->value.uiVal = to_u32(eval_raw(d, M_POWER, now));
			break;
		case NVML_FI_DEV_POWER_INSTANT:
			power = 1;
			v->value.uiVal = to_u32(sim_eval(d, M_POWER, now));
			break;
		case NVML_FI_DEV_POWER_MIN_LIMIT:
			power = 1;
			v->value.uiVal = d->p_min;
			break;
		case NVML_FI_DEV_POWER_MAX_LIMIT:
			power = 1;
			v->value.uiVal = d->p_max;
			break;
		case NVML_FI_DEV_POWER_DEFAULT_LIMIT:
			power = 1;
			v->value.uiVal = d->p_default;
			break;
		case NVML_FI_DEV_POWER_CURRENT_LIMIT:
			power = 1;
			v->value.uiVal = to_u32(sim_eval(d, M_ENFORCED, now));
			break;
		case NVML_FI_DEV_POWER_REQUESTED_LIMIT:
			power = 1;
			v->value.uiVal = to_u32(sim_eval(d, M_PLIMIT, now));
			break;
		case NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION:
		case NVML_FI_DEV_ENERGY:
			v->valueType = NVML_VALUE_TYPE_UNSIGNED_LONG_LONG;
			v->value.ullVal = to_u64(energy_at(d, now));
			break;
		case NVML_FI_DEV_MEMORY_TEMP:
			v->value.uiVal = to_u32(sim_eval(d, M_MEMTEMP, now));
			break;
		case NVML_FI_DEV_PCIE_REPLAY_COUNTER:
			v->valueType = NVML_VALUE_TYPE_UNSIGNED_LONG_LONG;
			v->value.ullVal = to_u32(sim_eval(d, M_PCIE_REPLAY, now));
			break;
		default:
			r = sim_health_field(d, v, now);
			break;
		}
		/* Power fields: only scope 0 (GPU) is modelled. */
		if (power && v->scopeId != NVML_POWER_SCOPE_GPU)
			r = NVML_ERROR_NOT_SUPPORTED;
		if (r != NVML_SUCCESS)
			v->value.ullVal = 0;
		v->nvmlReturn = r;
	}
	return NVML_SUCCESS;
}

/* ---- running processes --------------------------------------------------- */

static nvmlReturn_t procs(const struct nvmlDevice_st *d, int64_t now, int metric, unsigned int *infoCount, void *infos, int v1)
{
	unsigned int n, i, scripted;
	unsigned long long mem;

	NEED(infoCount);
	n = to_u32(sim_eval(d, metric, now));
	scripted = sim_procs_count(d, now, metric == M_GPROCS ? SIM_PROC_GRAPHICS : SIM_PROC_COMPUTE);
	n += scripted;
	if (infos == NULL) {
		if (*infoCount != 0)
			return NVML_ERROR_INVALID_ARGUMENT;
		*infoCount = n;
		return n == 0 ? NVML_SUCCESS : NVML_ERROR_INSUFFICIENT_SIZE;
	}
	if (*infoCount < n) {
		*infoCount = n;
		return NVML_ERROR_INSUFFICIENT_SIZE;
	}
	mem = to_u64(sim_eval(d, M_PROC_MEM, now) * 1048576.0);
	sim_procs_fill(d, now, metric == M_GPROCS ? SIM_PROC_GRAPHICS : SIM_PROC_COMPUTE, infos, n - scripted, v1);
	for (i = 0; i < n - scripted; i++) {
		unsigned int pid = 4000 + 100 * d->index + i + (metric == M_GPROCS ? 50 : 0);
		if (v1) {
			nvmlProcessInfo_v1_t *p = (nvmlProcessInfo_v1_t *)infos + i;
			p->pid = pid;
			p->usedGpuMemory = mem;
		} else {
			nvmlProcessInfo_v2_t *p = (nvmlProcessInfo_v2_t *)infos + i;
			p->pid = pid;
			p->usedGpuMemory = mem;
			p->gpuInstanceId = 0xFFFFFFFFu;
			p->computeInstanceId = 0xFFFFFFFFu;
		}
	}
	*infoCount = n;
	return NVML_SUCCESS;
}

/* ANSWER_PROCS defines a running-processes query: the processes of metric m
 * (M_PROCS compute, M_GPROCS graphics) in the info struct of its version
 * (v1 set for the old nvmlProcessInfo_v1_t layout). */
#define ANSWER_PROCS(fn, m, info_t, v1)                                                 \
	nvmlReturn_t fn(nvmlDevice_t device, unsigned int *infoCount, info_t *infos)    \
	{                                                                               \
		ENTER(fn);                                                              \
		return procs(d, now, (m), infoCount, infos, (v1));                      \
	}

ANSWER_PROCS(nvmlDeviceGetComputeRunningProcesses, M_PROCS, nvmlProcessInfo_v1_t, 1)
ANSWER_PROCS(nvmlDeviceGetComputeRunningProcesses_v2, M_PROCS, nvmlProcessInfo_v2_t, 0)
ANSWER_PROCS(nvmlDeviceGetGraphicsRunningProcesses, M_GPROCS, nvmlProcessInfo_v1_t, 1)
ANSWER_PROCS(nvmlDeviceGetGraphicsRunningProcesses_v2, M_GPROCS, nvmlProcessInfo_v2_t, 0)
#ifndef SIMNVML_OLD_DRIVER
ANSWER_PROCS(nvmlDeviceGetComputeRunningProcesses_v3, M_PROCS, nvmlProcessInfo_t, 0)
ANSWER_PROCS(nvmlDeviceGetGraphicsRunningProcesses_v3, M_GPROCS, nvmlProcessInfo_t, 0)
#endif

/* ---- events (device side) ------------------------------------------------ */

ANSWER(nvmlDeviceGetSupportedEventTypes, unsigned long long, eventTypes, d->supported_events)
