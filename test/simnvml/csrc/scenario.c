/*
 * scenario.c - defaults, the scenario language parser (see ../README.md) and
 * the compilation of a scenario into the read-only per-GPU tracks, hang and
 * fail rules, event timeline and kernel-log timeline used on the hot path.
 *
 * Runs once per process, at the first nvmlInit, under the init mutex.
 */
#include "sim.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

struct sim_seg *g_segs;

/* ---- growable arrays ------------------------------------------------------ */

/* FOR_SELECTED(g, mask) runs the statement after it for each GPU g that a
   statement's selection mask names. */
#define FOR_SELECTED(g, mask)                       \
	for ((g) = 0; (g) < g_host.ngpus; (g)++)    \
		if (!((mask) & (1u << (g)))) {      \
		} else

struct rawseg {
	unsigned int gpu;
	int metric;
	int rel; /* "raise": v0, v1 are added to the track's value at t0 */
	size_t order;
	struct sim_seg s;
};

struct rawhang {
	unsigned int gpu;
	struct sim_hang h;
};

struct rawfail {
	unsigned int gpu;
	struct sim_fail f;
};

struct rawevent {
	size_t order;
	struct sim_event e;
};

struct rawkmsg {
	size_t order;
	struct sim_kmsg k;
};

#define VEC(T)                 \
	struct {               \
		T *v;          \
		size_t n, cap; \
	}

static VEC(struct rawseg) r_segs;
static VEC(struct rawhang) r_hangs;
static VEC(struct rawfail) r_fails;
static VEC(struct rawevent) r_events;
static VEC(struct rawkmsg) r_kmsgs;

static int grow(void **v, size_t *cap, size_t n, size_t size)
{
	void *nv;
	size_t ncap;

	if (n < *cap)
		return 0;
	ncap = *cap ? *cap * 2 : 16;
	nv = realloc(*v, ncap * size);
	if (nv == NULL)
		return -1;
	*v = nv;
	*cap = ncap;
	return 0;
}

#define PUSH(vec, item)                                                                          \
	(grow((void **)&(vec).v, &(vec).cap, (vec).n, sizeof(*(vec).v)) == 0 ? ((vec).v[(vec).n++] = (item), 0) \
									      : -1)

/* ---- defaults ------------------------------------------------------------ */

static int g_gsp_set[SIM_MAX_GPUS];
static int g_has_gpus_stmt;
static int g_seen_gpu_stmt;

static uint64_t mix64(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ULL;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
	return x ^ (x >> 31);
}

static void set_busid(struct nvmlDevice_st *d, unsigned int domain, unsigned int bus, unsigned int dev)
{
	d->domain = domain;
	d->bus = bus;
	d->dev = dev;
	snprintf(d->busid, sizeof(d->busid), NVML_DEVICE_PCI_BUS_ID_FMT, domain, bus, dev);
	snprintf(d->busid_legacy, sizeof(d->busid_legacy), NVML_DEVICE_PCI_BUS_ID_LEGACY_FMT, domain & 0xffff, bus,
		 dev);
}

struct metric_def {
	const char *name;
	int m;
	double scale;
	const char *unit;
	double def; /* before the scenario sets it, in unit */
};

/* The time-varying values a scenario names ("gpu 0 temp 80"), with their
 * defaults; the fans' ("fan1", "fan_target") are named in parse_metric. */
static const struct metric_def metrics[] = {
	{ "temp", M_TEMP, 1, "C", 38 },
	{ "memtemp", M_MEMTEMP, 1, "C", 46 },
	{ "power", M_POWER, 1000, "W", 32 },
	{ "plimit", M_PLIMIT, 1000, "W", 0 },
	{ "enforced", M_ENFORCED, 1000, "W", 0 },
	{ "pstate", M_PSTATE, 1, "", 8 },
	{ "clk_gfx", M_CLK_GFX, 1, "MHz", 180 },
	{ "clk_sm", M_CLK_SM, 1, "MHz", 180 },
	{ "clk_mem", M_CLK_MEM, 1, "MHz", 405 },
	{ "clk_video", M_CLK_VIDEO, 1, "MHz", 600 },
	{ "util_gpu", M_UTIL_GPU, 1, "%", 0 },
	{ "util_mem", M_UTIL_MEM, 1, "%", 0 },
	{ "util_enc", M_UTIL_ENC, 1, "%", 0 },
	{ "util_dec", M_UTIL_DEC, 1, "%", 0 },
	{ "mem_used", M_MEM_USED, 1, "MiB", 14 },
	{ "pcie_gen", M_PCIE_GEN, 1, "", 5 },
	{ "pcie_width", M_PCIE_WIDTH, 1, "", 16 },
	{ "pcie_replay", M_PCIE_REPLAY, 1, "", 0 },
	{ "reasons", M_REASONS, 1, "", nvmlClocksEventReasonGpuIdle },
	{ "sensor_target", M_SENSOR_TARGET, 1, "", NVML_THERMAL_TARGET_GPU },
	{ "sensor_controller", M_SENSOR_CONTROLLER, 1, "", NVML_THERMAL_CONTROLLER_GPU_INTERNAL },
	{ "sensor_temp", M_SENSOR_TEMP, 1, "C", 0 },
	{ "procs", M_PROCS, 1, "", 0 },
	{ "gprocs", M_GPROCS, 1, "", 0 },
	{ "proc_mem", M_PROC_MEM, 1, "MiB", 1024 },
	{ NULL, 0, 0, NULL, 0 },
};

/* The GPUs' integer facts a scenario sets ("gpu 0 power_max 450"), with their
 * defaults in the scenario's units. */
struct int_fact {
	const char *key;
	size_t off;
	int kind; /* 0 uint, 1 watts->mW, 2 MiB->bytes (ull) */
	unsigned long long max;
	double def;
};

static const struct int_fact int_facts[] = {
	{ "pci_device_id", offsetof(struct nvmlDevice_st, pci_device_id), 0, 0xffffffffULL, 0x2BB110DE },
	{ "pci_subsystem_id", offsetof(struct nvmlDevice_st, pci_subsystem_id), 0, 0xffffffffULL, 0x204B10DE },
	{ "brand", offsetof(struct nvmlDevice_st, brand), 0, 0xffffffffULL, NVML_BRAND_NVIDIA_RTX },
	{ "minor", offsetof(struct nvmlDevice_st, minor), 0, 0xffffffffULL, 0 /* dev_defaults: the index */ },
	{ "fans", offsetof(struct nvmlDevice_st, fans), 0, SIM_MAX_FANS, 2 },
	{ "sensors", offsetof(struct nvmlDevice_st, sensors), 0, SIM_MAX_SENSORS, 1 },
	{ "fan_min", offsetof(struct nvmlDevice_st, fan_min), 0, 100, 30 },
	{ "fan_max", offsetof(struct nvmlDevice_st, fan_max), 0, 100, 100 },
	{ "max_clk_gfx", offsetof(struct nvmlDevice_st, max_clk[NVML_CLOCK_GRAPHICS]), 0, 0xffffffffULL, 3090 },
	{ "max_clk_sm", offsetof(struct nvmlDevice_st, max_clk[NVML_CLOCK_SM]), 0, 0xffffffffULL, 3090 },
	{ "max_clk_mem", offsetof(struct nvmlDevice_st, max_clk[NVML_CLOCK_MEM]), 0, 0xffffffffULL, 14001 },
	{ "max_clk_video", offsetof(struct nvmlDevice_st, max_clk[NVML_CLOCK_VIDEO]), 0, 0xffffffffULL, 3090 },
	{ "max_pcie_gen", offsetof(struct nvmlDevice_st, max_pcie_gen), 0, 0xffffffffULL, 5 },
	{ "max_pcie_width", offsetof(struct nvmlDevice_st, max_pcie_width), 0, 0xffffffffULL, 16 },
	{ "power_default", offsetof(struct nvmlDevice_st, p_default), 1, 4294967ULL, 600 },
	{ "power_min", offsetof(struct nvmlDevice_st, p_min), 1, 4294967ULL, 150 },
	{ "power_max", offsetof(struct nvmlDevice_st, p_max), 1, 4294967ULL, 600 },
	{ "mem_total", offsetof(struct nvmlDevice_st, mem_total), 2, 1ULL << 40, 97887 },
	{ "mem_reserved", offsetof(struct nvmlDevice_st, mem_reserved), 2, 1ULL << 40, 512 },
	{ NULL, 0, 0, 0, 0 },
};

static void set_int_fact(struct nvmlDevice_st *d, const struct int_fact *f, double v)
{
	char *base = (char *)d + f->off;

	if (f->kind == 0)
		*(unsigned int *)base = (unsigned int)v;
	else if (f->kind == 1)
		*(unsigned int *)base = (unsigned int)(v * 1000 + 0.5);
	else
		*(unsigned long long *)base = (unsigned long long)(v * 1048576.0 + 0.5);
}

static void host_defaults(void)
{
	memset(&g_host, 0, sizeof(g_host));
	g_host.ngpus = 1;
	snprintf(g_host.driver, sizeof(g_host.driver), "580.95.05");
	snprintf(g_host.nvml, sizeof(g_host.nvml), "13.580.95.05");
	g_host.cuda = 13000;
	g_host.init_result = NVML_SUCCESS;
	g_host.seed = 1;
	g_host.kmsg_seq = 1200;
	g_host.fabric = SIM_FABRIC_V1 | SIM_FABRIC_V2 | SIM_FABRIC_V3 | SIM_FABRIC_V4;
}

static void dev_defaults(struct nvmlDevice_st *d, unsigned int i)
{
	uint64_t a = mix64(0x51ed0000ULL + i), b = mix64(0xc0ffee00ULL + i);
	const struct metric_def *md;
	const struct int_fact *fact;
	int f;

	memset(d, 0, sizeof(*d));
	d->index = i;
	d->lost_at = SIM_NEVER;
	d->removed_at = SIM_NEVER;
	snprintf(d->name, sizeof(d->name), "NVIDIA RTX PRO 6000 Blackwell Workstation Edition");
	snprintf(d->uuid, sizeof(d->uuid), "GPU-%08x-%04x-%04x-%04x-%012llx", (unsigned)(a >> 32),
		 (unsigned)(a >> 16) & 0xffff, ((unsigned)a & 0x0fff) | 0x4000, ((unsigned)(b >> 48) & 0x3fff) | 0x8000,
		 (unsigned long long)(b & 0xffffffffffffULL));
	snprintf(d->serial, sizeof(d->serial), "1791025%06u", 12340 + i);
	snprintf(d->vbios, sizeof(d->vbios), "98.02.52.00.02");
	snprintf(d->part, sizeof(d->part), "900-5G144-2200-000");
	set_busid(d, 0, i < 8 ? 0x01 + 0x20 * i : 0x11 + 0x20 * (i - 8), 0);
	d->arch = NVML_DEVICE_ARCH_BLACKWELL;
	for (fact = int_facts; fact->key != NULL; fact++)
		set_int_fact(d, fact, fact->def);
	d->minor = i;
	d->persistence = 1;
	d->gsp_enabled = 1;
	d->gsp_default = 1;
	d->thresholds[NVML_TEMPERATURE_THRESHOLD_SHUTDOWN] = 98;
	d->thresholds[NVML_TEMPERATURE_THRESHOLD_SLOWDOWN] = 95;
	d->thresholds[NVML_TEMPERATURE_THRESHOLD_MEM_MAX] = 95;
	d->thresholds[NVML_TEMPERATURE_THRESHOLD_GPU_MAX] = 93;
	d->thresholds[NVML_TEMPERATURE_THRESHOLD_ACOUSTIC_MIN] = 40;
	d->thresholds[NVML_TEMPERATURE_THRESHOLD_ACOUSTIC_CURR] = 83;
	d->thresholds[NVML_TEMPERATURE_THRESHOLD_ACOUSTIC_MAX] = 93;
	d->thresholds[NVML_TEMPERATURE_THRESHOLD_GPS_CURR] = -1;
	d->supported_events = nvmlEventTypeSingleBitEccError | nvmlEventTypeDoubleBitEccError | nvmlEventTypePState |
			      nvmlEventTypeXidCriticalError | nvmlEventTypeClock | nvmlEventTypeGpuUnavailableError |
			      nvmlEventTypeGpuRecoveryAction;
	d->supported_reasons = nvmlClocksEventReasonAll;

	for (md = metrics; md->name != NULL; md++)
		d->tr[md->m].def = md->def * md->scale;
	sim_health_defaults(d);
	for (f = 0; f < SIM_MAX_FANS; f++) {
		d->tr[M_FAN0 + f].def = 30;
		d->tr[M_FANT0 + f].def = 30;
		d->tr[M_FANP0 + f].def = NVML_FAN_POLICY_TEMPERATURE_CONTINOUS_SW;
		d->fan_cmd[f] = -1; /* the firmware controls every fan */
	}
}

/* ---- parser state and errors --------------------------------------------- */

struct parser {
	const char *file;
	int line;
	char err[300];
};

static int perr(struct parser *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int perr(struct parser *p, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(p->err, sizeof(p->err), fmt, ap);
	va_end(ap);
	return -1;
}

/* Splits s in place. "double quotes" group words; # starts a comment. */
static int tokenize(struct parser *p, char *s, char **tok, int max)
{
	int n = 0;

	for (;;) {
		while (*s == ' ' || *s == '\t' || *s == '\r' || *s == '\n')
			s++;
		if (*s == '\0' || *s == '#')
			return n;
		if (n == max)
			return perr(p, "too many words on one line (max %d)", max);
		if (*s == '"') {
			tok[n++] = ++s;
			while (*s != '"' && *s != '\0')
				s++;
			if (*s != '"')
				return perr(p, "unterminated \"quoted string\"");
			*s++ = '\0';
			if (*s != '\0' && *s != ' ' && *s != '\t' && *s != '\r' && *s != '\n')
				return perr(p, "missing space after closing quote");
			continue;
		}
		tok[n++] = s;
		while (*s != '\0' && *s != ' ' && *s != '\t' && *s != '\r' && *s != '\n')
			s++;
		if (*s != '\0')
			*s++ = '\0';
	}
}

/* ---- value parsers ------------------------------------------------------- */

static int parse_num(const char *s, double *out)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (end == s || *end != '\0' || errno == ERANGE || !__builtin_isfinite(v))
		return -1;
	*out = v;
	return 0;
}

static int parse_uint(const char *s, unsigned long long max, unsigned long long *out)
{
	double v;

	if (parse_num(s, &v) != 0 || v < 0 || v != (double)(unsigned long long)v || v > (double)max)
		return -1;
	*out = (unsigned long long)v;
	return 0;
}

/* Seconds by default; suffixes us, ms, s, m, h. */
static int parse_dur(const char *s, int64_t *ns)
{
	char num[64], *end;
	double v, mult = 1e9;
	size_t n = strlen(s);

	if (n == 0 || n >= sizeof(num))
		return -1;
	memcpy(num, s, n + 1);
	errno = 0;
	v = strtod(num, &end);
	if (end == num || errno == ERANGE || !__builtin_isfinite(v) || v < 0)
		return -1;
	if (*end == '\0' || strcmp(end, "s") == 0)
		mult = 1e9;
	else if (strcmp(end, "ms") == 0)
		mult = 1e6;
	else if (strcmp(end, "us") == 0)
		mult = 1e3;
	else if (strcmp(end, "m") == 0)
		mult = 60e9;
	else if (strcmp(end, "h") == 0)
		mult = 3600e9;
	else
		return -1;
	if (v * mult > 9e18)
		return -1;
	*ns = (int64_t)(v * mult + 0.5);
	return 0;
}

struct named {
	const char *name;
	unsigned long long v;
};

static const struct named reason_names[] = {
	{ "none", 0 },
	{ "idle", nvmlClocksEventReasonGpuIdle },
	{ "gpu_idle", nvmlClocksEventReasonGpuIdle },
	{ "app_clocks", nvmlClocksEventReasonApplicationsClocksSetting },
	{ "sw_power_cap", nvmlClocksEventReasonSwPowerCap },
	{ "hw_slowdown", nvmlClocksThrottleReasonHwSlowdown },
	{ "sync_boost", nvmlClocksEventReasonSyncBoost },
	{ "sw_thermal", nvmlClocksEventReasonSwThermalSlowdown },
	{ "hw_thermal", nvmlClocksThrottleReasonHwThermalSlowdown },
	{ "hw_power_brake", nvmlClocksThrottleReasonHwPowerBrakeSlowdown },
	{ "display_clock", nvmlClocksEventReasonDisplayClockSetting },
	{ "board_limit", nvmlClocksEventReasonBoardLimit },
	{ "reliability", nvmlClocksEventReasonReliability },
	{ NULL, 0 },
};

static const struct named event_names[] = {
	{ "none", 0 },
	{ "sbe", nvmlEventTypeSingleBitEccError },
	{ "dbe", nvmlEventTypeDoubleBitEccError },
	{ "pstate", nvmlEventTypePState },
	{ "xid", nvmlEventTypeXidCriticalError },
	{ "clock", nvmlEventTypeClock },
	{ "power_source", nvmlEventTypePowerSourceChange },
	{ "mig", nvmlEventMigConfigChange },
	{ "sbe_storm", nvmlEventTypeSingleBitEccErrorStorm },
	{ "dram_retirement", nvmlEventTypeDramRetirementEvent },
	{ "dram_retirement_failure", nvmlEventTypeDramRetirementFailure },
	{ "nonfatal_poison", nvmlEventTypeNonFatalPoisonError },
	{ "fatal_poison", nvmlEventTypeFatalPoisonError },
	{ "unavailable", nvmlEventTypeGpuUnavailableError },
	{ "recovery", nvmlEventTypeGpuRecoveryAction },
	{ "all", nvmlEventTypeAll },
	{ NULL, 0 },
};

static const struct named arch_names[] = {
	{ "kepler", NVML_DEVICE_ARCH_KEPLER },	 { "maxwell", NVML_DEVICE_ARCH_MAXWELL },
	{ "pascal", NVML_DEVICE_ARCH_PASCAL },	 { "volta", NVML_DEVICE_ARCH_VOLTA },
	{ "turing", NVML_DEVICE_ARCH_TURING },	 { "ampere", NVML_DEVICE_ARCH_AMPERE },
	{ "ada", NVML_DEVICE_ARCH_ADA },	 { "hopper", NVML_DEVICE_ARCH_HOPPER },
	{ "blackwell", NVML_DEVICE_ARCH_BLACKWELL }, { "rubin", NVML_DEVICE_ARCH_RUBIN },
	{ "unknown", NVML_DEVICE_ARCH_UNKNOWN }, { NULL, 0 },
};

static const struct named threshold_names[] = {
	{ "shutdown", NVML_TEMPERATURE_THRESHOLD_SHUTDOWN },
	{ "slowdown", NVML_TEMPERATURE_THRESHOLD_SLOWDOWN },
	{ "mem_max", NVML_TEMPERATURE_THRESHOLD_MEM_MAX },
	{ "gpu_max", NVML_TEMPERATURE_THRESHOLD_GPU_MAX },
	{ "acoustic_min", NVML_TEMPERATURE_THRESHOLD_ACOUSTIC_MIN },
	{ "acoustic_curr", NVML_TEMPERATURE_THRESHOLD_ACOUSTIC_CURR },
	{ "acoustic_max", NVML_TEMPERATURE_THRESHOLD_ACOUSTIC_MAX },
	{ "gps_curr", NVML_TEMPERATURE_THRESHOLD_GPS_CURR },
	{ NULL, 0 },
};

static const struct named code_names[] = {
	{ "success", NVML_SUCCESS },
	{ "ok", NVML_SUCCESS },
	{ "uninitialized", NVML_ERROR_UNINITIALIZED },
	{ "invalid_argument", NVML_ERROR_INVALID_ARGUMENT },
	{ "not_supported", NVML_ERROR_NOT_SUPPORTED },
	{ "no_permission", NVML_ERROR_NO_PERMISSION },
	{ "already_initialized", NVML_ERROR_ALREADY_INITIALIZED },
	{ "not_found", NVML_ERROR_NOT_FOUND },
	{ "insufficient_size", NVML_ERROR_INSUFFICIENT_SIZE },
	{ "insufficient_power", NVML_ERROR_INSUFFICIENT_POWER },
	{ "driver_not_loaded", NVML_ERROR_DRIVER_NOT_LOADED },
	{ "timeout", NVML_ERROR_TIMEOUT },
	{ "irq_issue", NVML_ERROR_IRQ_ISSUE },
	{ "library_not_found", NVML_ERROR_LIBRARY_NOT_FOUND },
	{ "function_not_found", NVML_ERROR_FUNCTION_NOT_FOUND },
	{ "corrupted_inforom", NVML_ERROR_CORRUPTED_INFOROM },
	{ "gpu_is_lost", NVML_ERROR_GPU_IS_LOST },
	{ "lost", NVML_ERROR_GPU_IS_LOST },
	{ "reset_required", NVML_ERROR_RESET_REQUIRED },
	{ "operating_system", NVML_ERROR_OPERATING_SYSTEM },
	{ "lib_rm_version_mismatch", NVML_ERROR_LIB_RM_VERSION_MISMATCH },
	{ "in_use", NVML_ERROR_IN_USE },
	{ "memory", NVML_ERROR_MEMORY },
	{ "no_data", NVML_ERROR_NO_DATA },
	{ "vgpu_ecc_not_supported", NVML_ERROR_VGPU_ECC_NOT_SUPPORTED },
	{ "insufficient_resources", NVML_ERROR_INSUFFICIENT_RESOURCES },
	{ "freq_not_supported", NVML_ERROR_FREQ_NOT_SUPPORTED },
	{ "argument_version_mismatch", NVML_ERROR_ARGUMENT_VERSION_MISMATCH },
	{ "deprecated", NVML_ERROR_DEPRECATED },
	{ "not_ready", NVML_ERROR_NOT_READY },
	{ "gpu_not_found", NVML_ERROR_GPU_NOT_FOUND },
	{ "invalid_state", NVML_ERROR_INVALID_STATE },
	{ "reset_type_not_supported", NVML_ERROR_RESET_TYPE_NOT_SUPPORTED },
	{ "unknown", NVML_ERROR_UNKNOWN },
	{ NULL, 0 },
};

static int lookup(const struct named *t, const char *s, unsigned long long *out)
{
	for (; t->name != NULL; t++) {
		if (strcasecmp(t->name, s) == 0) {
			*out = t->v;
			return 0;
		}
	}
	return -1;
}

/* A number, or names from t joined with '|'. */
static int parse_flags(const struct named *t, const char *s, unsigned long long *out)
{
	char buf[256], *save = NULL, *w;
	unsigned long long acc = 0, v;
	double dv;

	if (s[0] >= '0' && s[0] <= '9') {
		char *end;
		errno = 0;
		v = strtoull(s, &end, 0);
		if (*end == '\0' && errno == 0) {
			*out = v;
			return 0;
		}
		if (parse_num(s, &dv) != 0 || dv < 0 || dv >= 1.8446744073709552e19 || dv != (double)(unsigned long long)dv)
			return -1;
		*out = (unsigned long long)dv;
		return 0;
	}
	if (strlen(s) >= sizeof(buf))
		return -1;
	strcpy(buf, s);
	for (w = strtok_r(buf, "|+", &save); w != NULL; w = strtok_r(NULL, "|+", &save)) {
		if (lookup(t, w, &v) != 0)
			return -1;
		acc |= v;
	}
	*out = acc;
	return 0;
}

int sim_parse_code(const char *s, nvmlReturn_t *out)
{
	unsigned long long v;

	if (strncasecmp(s, "NVML_ERROR_", 11) == 0)
		s += 11;
	else if (strncasecmp(s, "NVML_", 5) == 0)
		s += 5;
	if (lookup(code_names, s, &v) == 0 || parse_uint(s, 0x7fffffff, &v) == 0) {
		*out = (nvmlReturn_t)v;
		return 0;
	}
	return -1;
}

/* Function names for "hang ... fn NAME" and "fail NAME". "nvml" prefix is
 * optional; a name without a version suffix also matches its _vN variants;
 * "fan_setters" names the three fan setters. */
static int parse_fnset(struct parser *p, const char *s, struct sim_fnset *out)
{
	char name[128];
	size_t n;
	int i, found = 0;

	memset(out, 0, sizeof(*out));
	if (strcmp(s, "*") == 0 || strcmp(s, "all") == 0) {
		for (i = 0; i < FN_COUNT; i++)
			out->w[i / 64] |= 1ULL << (i % 64);
		return 0;
	}
	if (strcmp(s, "fan_setters") == 0) {
		static const int setters[] = { FN_nvmlDeviceSetFanSpeed_v2, FN_nvmlDeviceSetDefaultFanSpeed_v2,
					       FN_nvmlDeviceSetFanControlPolicy };
		for (i = 0; i < (int)(sizeof(setters) / sizeof(setters[0])); i++)
			out->w[setters[i] / 64] |= 1ULL << (setters[i] % 64);
		return 0;
	}
	if (strncmp(s, "nvml", 4) == 0)
		snprintf(name, sizeof(name), "%s", s);
	else
		snprintf(name, sizeof(name), "nvml%s", s);
	n = strlen(name);
	for (i = 0; i < FN_COUNT; i++) {
		const char *f = sim_fn_names[i];
		if (strcmp(f, name) == 0 || (strncmp(f, name, n) == 0 && strncmp(f + n, "_v", 2) == 0)) {
			out->w[i / 64] |= 1ULL << (i % 64);
			found = 1;
		}
	}
	if (!found)
		return perr(p, "unknown or unmodelled NVML function \"%s\"", s);
	return 0;
}

/* ---- metrics ------------------------------------------------------------- */

/* Resolves a metric name. Fan metrics may name one fan ("fan1",
 * "fan1_target", "fan1_policy") or all fans ("fan", "fan_target",
 * "fan_policy"); health metrics (health.h) one link ("nvlink3_state") or
 * every link ("nvlink_state"). Returns the first metric id, count, the
 * stride between the count metrics, and scale. */
static int parse_metric(const char *s, int *m, int *count, int *stride, double *scale)
{
	const struct metric_def *md;
	int base = -1, fan = -1;
	const char *rest;

	*stride = 1;
	if (sim_health_metric(s, m, count, scale) == 0) {
		if (*count < 0) { /* every link: one track per link */
			*stride = *m >= M_C0 ? CF_COUNT : LF_COUNT;
			*count = -*count;
		}
		return 0;
	}
	for (md = metrics; md->name != NULL; md++) {
		if (strcmp(md->name, s) == 0) {
			*m = md->m;
			*count = 1;
			*scale = md->scale;
			return 0;
		}
	}
	if (strncmp(s, "fan", 3) != 0)
		return -1;
	rest = s + 3;
	if (*rest >= '0' && *rest <= '9') {
		fan = *rest - '0';
		rest++;
		if (fan >= SIM_MAX_FANS)
			return -1;
	}
	if (*rest == '\0')
		base = M_FAN0;
	else if (strcmp(rest, "_target") == 0)
		base = M_FANT0;
	else if (strcmp(rest, "_policy") == 0)
		base = M_FANP0;
	else
		return -1;
	*scale = 1;
	if (fan >= 0) {
		*m = base + fan;
		*count = 1;
	} else {
		*m = base;
		*count = SIM_MAX_FANS;
	}
	return 0;
}

static int parse_metric_value(struct parser *p, int m, double scale, const char *s, double *out)
{
	unsigned long long u;

	if (m == M_REASONS) {
		if (parse_flags(reason_names, s, &u) != 0)
			return perr(p, "bad clocks event reasons \"%s\" (number or names like sw_power_cap|hw_slowdown)", s);
		*out = (double)u;
		return 0;
	}
	if (m == M_PSTATE && (s[0] == 'P' || s[0] == 'p') && parse_uint(s + 1, 32, &u) == 0) {
		*out = (double)u;
		return 0;
	}
	if (m >= M_FANP0 && m < M_FANP0 + SIM_MAX_FANS) {
		if (strcmp(s, "auto") == 0) {
			*out = NVML_FAN_POLICY_TEMPERATURE_CONTINOUS_SW;
			return 0;
		}
		if (strcmp(s, "manual") == 0) {
			*out = NVML_FAN_POLICY_MANUAL;
			return 0;
		}
	}
	if (parse_num(s, out) != 0)
		return perr(p, "bad number \"%s\"", s);
	*out *= scale;
	return 0;
}

/* ---- statements ---------------------------------------------------------- */

static int parse_gpus(struct parser *p, const char *s, uint32_t *mask)
{
	char buf[128], *save = NULL, *w;
	unsigned long long a, b;

	*mask = 0;
	if (strcmp(s, "all") == 0 || strcmp(s, "*") == 0) {
		*mask = g_host.ngpus >= 32 ? 0xffffffffu : (1u << g_host.ngpus) - 1;
		return 0;
	}
	if (strlen(s) >= sizeof(buf))
		return perr(p, "bad GPU selector \"%s\"", s);
	strcpy(buf, s);
	for (w = strtok_r(buf, ",", &save); w != NULL; w = strtok_r(NULL, ",", &save)) {
		char *dash = strchr(w, '-');
		if (dash != NULL) {
			*dash = '\0';
			if (parse_uint(w, 1000, &a) != 0 || parse_uint(dash + 1, 1000, &b) != 0 || b < a)
				return perr(p, "bad GPU selector \"%s\" (use N, N-M, N,M or all)", s);
		} else {
			if (parse_uint(w, 1000, &a) != 0)
				return perr(p, "bad GPU selector \"%s\" (use N, N-M, N,M or all)", s);
			b = a;
		}
		if (b >= g_host.ngpus)
			return perr(p, "GPU %llu out of range: the scenario has %u GPU(s) (\"gpus N\" must come first)", b,
				    g_host.ngpus);
		for (; a <= b; a++)
			*mask |= 1u << a;
	}
	return 0;
}

static int add_seg_rel(struct parser *p, uint32_t mask, int m, int count, int stride, int rel, int64_t t0, int64_t t1,
		       double v0, double v1)
{
	unsigned int g;
	int k;

	FOR_SELECTED(g, mask) {
		for (k = 0; k < count; k++) {
			struct rawseg r = {.gpu = g, .metric = m + k * stride, .rel = rel, .order = r_segs.n,
					   .s = {.t0 = t0, .t1 = t1, .v0 = v0, .v1 = v1}};
			if (PUSH(r_segs, r) != 0)
				return perr(p, "out of memory");
			if (r.metric == M_ENFORCED)
				g_devs[g].enforced_explicit = 1;
			if (r.metric == M_SENSOR_TEMP)
				g_devs[g].sensor_temp_explicit = 1;
		}
	}
	return 0;
}

static int add_seg(struct parser *p, uint32_t mask, int m, int count, int stride, int64_t t0, int64_t t1, double v0,
		   double v1)
{
	return add_seg_rel(p, mask, m, count, stride, 0, t0, t1, v0, v1);
}

/* [at T] gpu SEL raise METRIC N [over DURATION]: the metric grows by N from
 * its value at T, at once or linearly over DURATION. */
static int stmt_raise(struct parser *p, uint32_t mask, int64_t t, char **tok, int n)
{
	int m, count, stride;
	double scale, v;
	int64_t dur = 0;

	if ((n != 3 && n != 5) || parse_metric(tok[1], &m, &count, &stride, &scale) != 0)
		return perr(p, "expected: [at T] gpu SEL raise METRIC N [over DURATION]");
	if (parse_metric_value(p, m, scale, tok[2], &v) != 0)
		return -1;
	if (n == 5 && (strcmp(tok[3], "over") != 0 || parse_dur(tok[4], &dur) != 0))
		return perr(p, "expected: [at T] gpu SEL raise METRIC N [over DURATION]");
	return add_seg_rel(p, mask, m, count, stride, 1, t, t + dur, 0, v);
}

/* at T gpu SEL remap pending|applied|failure|cor N|unc N: row remapping. */
static int stmt_remap(struct parser *p, uint32_t mask, int64_t t, char **tok, int n)
{
	const char *usage = "expected: [at T] gpu SEL remap pending|applied|failure|cor N|unc N";
	double v;

	if (n == 2 && strcmp(tok[1], "pending") == 0)
		return add_seg(p, mask, M_H0 + HF_remap_pending, 1, 1, t, t, 1, 1);
	if (n == 2 && strcmp(tok[1], "applied") == 0)
		return add_seg(p, mask, M_H0 + HF_remap_pending, 1, 1, t, t, 0, 0);
	if (n == 2 && strcmp(tok[1], "failure") == 0)
		return add_seg(p, mask, M_H0 + HF_remap_failure, 1, 1, t, t, 1, 1);
	if (n == 3 && (strcmp(tok[1], "cor") == 0 || strcmp(tok[1], "unc") == 0)) {
		if (parse_num(tok[2], &v) != 0)
			return perr(p, "bad number \"%s\"", tok[2]);
		return add_seg_rel(p, mask, M_H0 + (tok[1][0] == 'c' ? HF_remap_cor : HF_remap_unc), 1, 1, 1, t, t, 0, v);
	}
	return perr(p, "%s", usage);
}

/* at T gpu SEL link L|all down|up|flap COUNT over DURATION: NVLink state.
 * A flap takes the link down and up COUNT times, evenly over DURATION, each
 * a successful link recovery (recovery_ok and recovery_all + 1). */
static int stmt_link(struct parser *p, uint32_t mask, int64_t t, char **tok, int n)
{
	const char *usage = "expected: [at T] gpu SEL link L|all down|up|flap COUNT over DURATION";
	unsigned long long l, cnt, i;
	int first, nlinks;
	int64_t over;

	if (n < 3)
		return perr(p, "%s", usage);
	if (strcmp(tok[1], "all") == 0) {
		first = 0;
		nlinks = SIM_MAX_LINKS;
	} else {
		if (parse_uint(tok[1], SIM_MAX_LINKS - 1, &l) != 0)
			return perr(p, "bad NVLink link \"%s\" (0..%d or all)", tok[1], SIM_MAX_LINKS - 1);
		first = (int)l;
		nlinks = 1;
	}
#define LM(f) (M_L0 + first * LF_COUNT + LF_##f)
	if (n == 3 && (strcmp(tok[2], "down") == 0 || strcmp(tok[2], "up") == 0)) {
		double st = tok[2][0] == 'd' ? NVML_NVLINK_STATE_INACTIVE : NVML_NVLINK_STATE_ACTIVE;
		return add_seg(p, mask, LM(state), nlinks, LF_COUNT, t, t, st, st);
	}
	if (n == 6 && strcmp(tok[2], "flap") == 0) {
		if (parse_uint(tok[3], 10000, &cnt) != 0 || cnt == 0 || strcmp(tok[4], "over") != 0 ||
		    parse_dur(tok[5], &over) != 0)
			return perr(p, "%s", usage);
		for (i = 0; i < cnt; i++) {
			int64_t down = t + (int64_t)(i * (uint64_t)over / cnt);
			int64_t up = down + over / (int64_t)(2 * cnt);
			if (add_seg(p, mask, LM(state), nlinks, LF_COUNT, down, down, NVML_NVLINK_STATE_INACTIVE,
				    NVML_NVLINK_STATE_INACTIVE) != 0 ||
			    add_seg(p, mask, LM(state), nlinks, LF_COUNT, up, up, NVML_NVLINK_STATE_ACTIVE,
				    NVML_NVLINK_STATE_ACTIVE) != 0 ||
			    add_seg_rel(p, mask, LM(recovery_ok), nlinks, LF_COUNT, 1, up, up, 0, 1) != 0 ||
			    add_seg_rel(p, mask, LM(recovery_all), nlinks, LF_COUNT, 1, up, up, 0, 1) != 0)
				return -1;
		}
		return 0;
	}
#undef LM
	return perr(p, "%s", usage);
}

/* Optional trailing "repeat COUNT over DURATION". */
static int parse_repeat(struct parser *p, char **tok, int n, int *i, unsigned long long *count, int64_t *over)
{
	*count = 1;
	*over = 0;
	if (*i < n && strcmp(tok[*i], "repeat") == 0) {
		if (*i + 3 >= n)
			return perr(p, "expected: repeat COUNT over DURATION");
		if (parse_uint(tok[*i + 1], 100000, count) != 0 || *count == 0)
			return perr(p, "bad repeat count \"%s\"", tok[*i + 1]);
		if (strcmp(tok[*i + 2], "over") != 0 || parse_dur(tok[*i + 3], over) != 0)
			return perr(p, "expected: repeat COUNT over DURATION");
		*i += 4;
	}
	return 0;
}

static int add_event(struct parser *p, unsigned int gpu, int64_t t, unsigned long long type, unsigned long long data)
{
	struct rawevent r = {.order = r_events.n, .e = {.t = t, .gpu = gpu, .type = type, .data = data}};

	if (PUSH(r_events, r) != 0)
		return perr(p, "out of memory");
	return 0;
}

static int stmt_xid(struct parser *p, uint32_t mask, int64_t t, char **tok, int n)
{
	unsigned long long xid, action = 1, count, k;
	int64_t over;
	int ev, km, i = 1, have_action = 0;
	const char *msg = NULL;
	unsigned int g;

	if (n < 2 || parse_uint(tok[1], 0xffffffffULL, &xid) != 0)
		return perr(p, "expected: xid NUMBER [to events|kmsg|both] [action A] [msg \"TEXT\"] [repeat C over D]");
	/* Real NVML does not deliver these through events; the kernel logs them. */
	km = 1;
	ev = !(xid == 79 || xid == 119 || xid == 120);
	for (i = 2; i < n;) {
		if (strcmp(tok[i], "to") == 0 && i + 1 < n) {
			ev = strcmp(tok[i + 1], "events") == 0 || strcmp(tok[i + 1], "both") == 0;
			km = strcmp(tok[i + 1], "kmsg") == 0 || strcmp(tok[i + 1], "both") == 0;
			if (!ev && !km)
				return perr(p, "bad xid route \"%s\" (events, kmsg or both)", tok[i + 1]);
			i += 2;
		} else if (strcmp(tok[i], "action") == 0 && i + 1 < n) {
			if (parse_uint(tok[i + 1], 0xffff, &action) != 0)
				return perr(p, "bad recovery action \"%s\"", tok[i + 1]);
			have_action = 1;
			i += 2;
		} else if (strcmp(tok[i], "msg") == 0 && i + 1 < n) {
			msg = tok[i + 1];
			i += 2;
		} else if (strcmp(tok[i], "repeat") == 0) {
			break;
		} else {
			return perr(p, "unexpected \"%s\" in xid statement", tok[i]);
		}
	}
	if (parse_repeat(p, tok, n, &i, &count, &over) != 0)
		return -1;
	if (i != n)
		return perr(p, "unexpected \"%s\" in xid statement", tok[i]);
	if (have_action && xid != 154)
		return perr(p, "\"action\" only applies to Xid 154");
	FOR_SELECTED(g, mask) {
		for (k = 0; k < count; k++) {
			int64_t tk = t + (int64_t)((double)over * (double)k / (double)count);
			if (ev && add_event(p, g, tk, nvmlEventTypeXidCriticalError, xid) != 0)
				return -1;
			if (ev && xid == 154 && add_event(p, g, tk, nvmlEventTypeGpuRecoveryAction, action) != 0)
				return -1;
			if (km) {
				struct rawkmsg r = {.order = r_kmsgs.n, .k = {.t = tk, .gpu = g, .xid = (unsigned int)xid,
						    .action = (int)action, .text = msg != NULL ? strdup(msg) : NULL}};
				if ((msg != NULL && r.k.text == NULL) || PUSH(r_kmsgs, r) != 0)
					return perr(p, "out of memory");
			}
		}
	}
	return 0;
}

static int stmt_event(struct parser *p, uint32_t mask, int64_t t, char **tok, int n)
{
	unsigned long long type, data = 0, count, k;
	int64_t over;
	int i;
	unsigned int g;

	if (strcmp(tok[0], "recovery") == 0) {
		if (n < 2 || parse_uint(tok[1], 0xffff, &data) != 0)
			return perr(p, "expected: recovery ACTION [repeat C over D]");
		type = nvmlEventTypeGpuRecoveryAction;
		i = 2;
	} else {
		if (n < 2 || parse_flags(event_names, tok[1], &type) != 0 || type == 0 || (type & (type - 1)) != 0 ||
		    type > nvmlEventTypeGpuRecoveryAction)
			return perr(p, "expected: event TYPE [data D] [repeat C over D] with one TYPE of sbe dbe pstate xid clock power_source mig sbe_storm dram_retirement dram_retirement_failure nonfatal_poison fatal_poison unavailable recovery");
		i = 2;
		if (i < n && strcmp(tok[i], "data") == 0) {
			if (i + 1 >= n || parse_uint(tok[i + 1], ~0ULL, &data) != 0)
				return perr(p, "bad event data");
			i += 2;
		}
	}
	if (parse_repeat(p, tok, n, &i, &count, &over) != 0)
		return -1;
	if (i != n)
		return perr(p, "unexpected \"%s\" in %s statement", tok[i], tok[0]);
	FOR_SELECTED(g, mask) {
		for (k = 0; k < count; k++)
			if (add_event(p, g, t + (int64_t)((double)over * (double)k / (double)count), type, data) != 0)
				return -1;
	}
	return 0;
}

/* GPU operational events' named values (nvml.h). */
static const struct named opev_severities[] = {
	{ "informational", 10 }, { "corrected", 20 }, { "recoverable", 30 }, { "fatal", 40 }, { NULL, 0 },
};
static const struct named opev_levels[] = {
	{ "telemetry", 10 }, { "diag", 20 }, { "notice", 30 }, { "warning", 40 }, { "error", 50 }, { NULL, 0 },
};
static const struct named opev_attrs[] = {
	{ "none", 0 },
	{ "uncontained", NVML_OPERATIONAL_EVENT_ATTR_UNCONTAINED },
	{ "latent", NVML_OPERATIONAL_EVENT_ATTR_LATENT },
	{ "propagated", NVML_OPERATIONAL_EVENT_ATTR_PROPAGATED },
	{ "component_reset", NVML_OPERATIONAL_EVENT_ATTR_COMPONENT_RESET },
	{ "threshold_exceeded", NVML_OPERATIONAL_EVENT_ATTR_THRESHOLD_EXCEEDED },
	{ "primary", NVML_OPERATIONAL_EVENT_ATTR_PRIMARY },
	{ "overflow", NVML_OPERATIONAL_EVENT_ATTR_OVERFLOW },
	{ NULL, 0 },
};
static const struct named opev_group_attrs[] = {
	{ "none", 0 },
	{ "recovered", NVML_OPERATIONAL_EVENT_GROUP_ATTR_RECOVERED },
	{ "previous_error", NVML_OPERATIONAL_EVENT_GROUP_ATTR_PREVERR },
	{ "simulated", NVML_OPERATIONAL_EVENT_GROUP_ATTR_SIMULATED },
	{ NULL, 0 },
};

/* "opevent [severity S] [level L] [category N] [attrs A|B] [group A|B]
 * [code N] [module NAME] [mig GI CI] [xid N] [context SOURCE_TYPE]
 * [repeat C over D]": a GPU operational event; each xid adds a legacy-Xid
 * context, each context an opaque one. */
static int stmt_opevent(struct parser *p, uint32_t mask, int64_t t, char **tok, int n)
{
	static const char usage[] = "expected: opevent [severity S] [level L] [category N] [attrs A|B] [group A|B] [code N] [module NAME] [mig GI CI] [xid N] [context TYPE] [repeat C over D]";
	static unsigned long long seq;
	struct sim_opev o = { .severity = 10, .log_level = 30, .gpu_instance = 0xFFFFFFFFu, .compute_instance = 0xFFFFFFFFu };
	unsigned long long v, v2, count, k;
	int64_t over;
	int i;
	unsigned int g;

	strcpy(o.module, "GSP");
	for (i = 1; i < n;) {
		const char *w = tok[i];
		if (strcmp(w, "repeat") == 0)
			break;
		if (i + 1 >= n)
			return perr(p, "%s", usage);
		if (strcmp(w, "severity") == 0 && parse_flags(opev_severities, tok[i + 1], &v) == 0 && v <= 0xffffffffULL) {
			o.severity = (unsigned int)v;
		} else if (strcmp(w, "level") == 0 && parse_flags(opev_levels, tok[i + 1], &v) == 0 && v <= 0xffffffffULL) {
			o.log_level = (unsigned int)v;
		} else if (strcmp(w, "category") == 0 && parse_uint(tok[i + 1], 0xffffffffULL, &v) == 0) {
			o.category = (unsigned int)v;
		} else if (strcmp(w, "attrs") == 0 && parse_flags(opev_attrs, tok[i + 1], &v) == 0 && v <= 0xffffffffULL) {
			o.attributes = (unsigned int)v;
		} else if (strcmp(w, "group") == 0 && parse_flags(opev_group_attrs, tok[i + 1], &v) == 0 && v <= 0xffffffffULL) {
			o.group_attributes = (unsigned int)v;
		} else if (strcmp(w, "code") == 0 && parse_uint(tok[i + 1], 0xffffffffULL, &v) == 0) {
			o.module_event_code = (unsigned int)v;
		} else if (strcmp(w, "module") == 0 && strlen(tok[i + 1]) <= sizeof(o.module)) {
			memset(o.module, 0, sizeof(o.module));
			memcpy(o.module, tok[i + 1], strlen(tok[i + 1])); /* 16 characters: not NUL-terminated */
		} else if (strcmp(w, "mig") == 0 && i + 2 < n && parse_uint(tok[i + 1], 0xffffffffULL, &v) == 0 &&
			   parse_uint(tok[i + 2], 0xffffffffULL, &v2) == 0) {
			o.gpu_instance = (unsigned int)v;
			o.compute_instance = (unsigned int)v2;
			i++;
		} else if ((strcmp(w, "xid") == 0 || strcmp(w, "context") == 0) && o.nctx < SIM_OPEV_MAXCTX &&
			   parse_uint(tok[i + 1], 0xffffffffULL, &v) == 0) {
			int x = strcmp(w, "xid") == 0;
			o.ctx[o.nctx].legacy_xid = (unsigned int)x;
			o.ctx[o.nctx].xid = x ? (unsigned int)v : 0;
			o.ctx[o.nctx].source_type = x ? 1 : (unsigned int)v;
			o.nctx++;
		} else {
			return perr(p, "%s (at \"%s\")", usage, w);
		}
		i += 2;
	}
	if (parse_repeat(p, tok, n, &i, &count, &over) != 0)
		return -1;
	if (i != n)
		return perr(p, "unexpected \"%s\" in opevent statement", tok[i]);
	FOR_SELECTED(g, mask) {
		for (k = 0; k < count; k++) {
			struct sim_opev *op = malloc(sizeof(*op));
			struct rawevent r = {.order = r_events.n, .e = {.t = t + (int64_t)((double)over * (double)k / (double)count), .gpu = g}};
			if (op == NULL)
				return perr(p, "out of memory");
			*op = o;
			op->sequence = ++seq;
			r.e.op = op;
			if (PUSH(r_events, r) != 0)
				return perr(p, "out of memory");
		}
	}
	return 0;
}

static int stmt_hang(struct parser *p, uint32_t mask, int64_t t, char **tok, int n)
{
	struct rawhang r;
	int64_t dur;
	int i;
	unsigned int g;

	if (n < 2 || parse_dur(tok[1], &dur) != 0)
		return perr(p, "expected: hang DURATION [fn NAME] [ret CODE]");
	memset(&r, 0, sizeof(r));
	r.h.start = t;
	r.h.end = t + dur;
	r.h.ret = NVML_SUCCESS;
	if (parse_fnset(p, "*", &r.h.fns) != 0)
		return -1;
	for (i = 2; i < n; i += 2) {
		if (i + 1 >= n)
			return perr(p, "missing value after \"%s\"", tok[i]);
		if (strcmp(tok[i], "fn") == 0) {
			if (parse_fnset(p, tok[i + 1], &r.h.fns) != 0)
				return -1;
		} else if (strcmp(tok[i], "ret") == 0) {
			if (sim_parse_code(tok[i + 1], &r.h.ret) != 0)
				return perr(p, "unknown NVML return code \"%s\"", tok[i + 1]);
		} else {
			return perr(p, "unexpected \"%s\" in hang statement (fn NAME, ret CODE)", tok[i]);
		}
	}
	FOR_SELECTED(g, mask) {
		r.gpu = g;
		if (PUSH(r_hangs, r) != 0)
			return perr(p, "out of memory");
	}
	return 0;
}

static int stmt_fail(struct parser *p, uint32_t mask, int64_t t, char **tok, int n)
{
	struct rawfail r;
	unsigned long long field;
	int64_t dur;
	int i;
	unsigned int g;

	memset(&r, 0, sizeof(r));
	r.f.from = t;
	r.f.until = SIM_NEVER;
	if (n >= 4 && strcmp(tok[1], "field") == 0) {
		if ((parse_uint(tok[2], 0xffffffffULL, &field) != 0 || field == 0) &&
		    (field = sim_health_field_id(tok[2])) == 0)
			return perr(p, "bad field id \"%s\" (a number or a health metric read by a field)", tok[2]);
		r.f.field = (unsigned int)field;
		i = 3;
	} else if (n >= 3) {
		if (parse_fnset(p, tok[1], &r.f.fns) != 0)
			return -1;
		i = 2;
	} else {
		return perr(p, "expected: fail FUNCTION|* CODE [for DURATION]  or  fail field ID CODE [for DURATION]");
	}
	if (sim_parse_code(tok[i], &r.f.code) != 0)
		return perr(p, "unknown NVML return code \"%s\"", tok[i]);
	i++;
	if (i < n) {
		if (strcmp(tok[i], "for") != 0 || i + 2 != n || parse_dur(tok[i + 1], &dur) != 0)
			return perr(p, "expected \"for DURATION\" after the return code");
		r.f.until = t + dur;
	}
	FOR_SELECTED(g, mask) {
		r.gpu = g;
		if (PUSH(r_fails, r) != 0)
			return perr(p, "out of memory");
		if (r.f.field != 0)
			g_devs[g].has_field_fails = 1;
	}
	return 0;
}

static int copy_field(struct parser *p, char *dst, size_t size, const char *src, const char *what)
{
	if (strlen(src) >= size)
		return perr(p, "%s too long (max %zu characters)", what, size - 1);
	strcpy(dst, src);
	return 0;
}

static int onoff(const char *s, unsigned int *out)
{
	if (strcmp(s, "on") == 0 || strcmp(s, "1") == 0 || strcmp(s, "enabled") == 0) {
		*out = 1;
		return 0;
	}
	if (strcmp(s, "off") == 0 || strcmp(s, "0") == 0 || strcmp(s, "disabled") == 0) {
		*out = 0;
		return 0;
	}
	return -1;
}

/* Static facts; returns 1 if tok[0] is not a static key. */
static int stmt_static(struct parser *p, struct nvmlDevice_st *d, char **tok, int n)
{
	const char *k = tok[0];
	unsigned long long u;
	double v;

#define ARGS(want, usage)                                          \
	do {                                                       \
		if (n != (want) + 1)                               \
			return perr(p, "expected: gpu SEL " usage); \
	} while (0)

	/* The text facts, each a char array of the device named like its key. */
#define TEXT_FACT(f) { #f, offsetof(struct nvmlDevice_st, f), sizeof(((struct nvmlDevice_st *)0)->f) }
	static const struct {
		const char *key;
		size_t off, size;
	} texts[] = { TEXT_FACT(name), TEXT_FACT(uuid), TEXT_FACT(serial), TEXT_FACT(vbios), TEXT_FACT(part) };
#undef TEXT_FACT
	for (size_t i = 0; i < sizeof(texts) / sizeof(texts[0]); i++) {
		if (strcmp(k, texts[i].key) == 0) {
			if (n != 2)
				return perr(p, "expected: gpu SEL %s \"TEXT\"", k);
			return copy_field(p, (char *)d + texts[i].off, texts[i].size, tok[1], k);
		}
	}
	if (strcmp(k, "busid") == 0) {
		unsigned int dom, bus, dev;
		ARGS(1, "busid DOMAIN:BUS:DEVICE.FUNCTION");
		if (sim_parse_busid(tok[1], &dom, &bus, &dev) != 0 || bus > 0xff || dev > 0x1f)
			return perr(p, "bad PCI bus id \"%s\" (like 00000000:01:00.0)", tok[1]);
		set_busid(d, dom, bus, dev);
		return 0;
	}
	if (strcmp(k, "gsp") == 0) {
		ARGS(1, "gsp VERSION|none");
		if (strcmp(tok[1], "none") == 0) {
			d->gsp_enabled = 0;
			d->gsp_default = 0;
			d->gsp_version[0] = '\0';
		} else {
			d->gsp_enabled = 1;
			if (copy_field(p, d->gsp_version, sizeof(d->gsp_version), tok[1], "gsp version") != 0)
				return -1;
		}
		g_gsp_set[d->index] = 1;
		return 0;
	}
	if (strcmp(k, "gsp_mode") == 0) {
		ARGS(2, "gsp_mode ENABLED DEFAULT (on|off each)");
		if (onoff(tok[1], &d->gsp_enabled) != 0 || onoff(tok[2], &d->gsp_default) != 0)
			return perr(p, "expected: gpu SEL gsp_mode ENABLED DEFAULT (on|off each)");
		return 0;
	}
	if (strcmp(k, "persistence") == 0) {
		ARGS(1, "persistence on|off");
		if (onoff(tok[1], &d->persistence) != 0)
			return perr(p, "expected: gpu SEL persistence on|off");
		return 0;
	}
	if (strcmp(k, "threshold") == 0) {
		ARGS(2, "threshold KIND VALUE|none");
		if (lookup(threshold_names, tok[1], &u) != 0)
			return perr(p, "unknown threshold \"%s\" (shutdown slowdown mem_max gpu_max acoustic_min acoustic_curr acoustic_max gps_curr)", tok[1]);
		if (strcmp(tok[2], "none") == 0) {
			d->thresholds[u] = -1;
			return 0;
		}
		if (parse_num(tok[2], &v) != 0 || v < 0 || v > 4294967295.0)
			return perr(p, "bad threshold value \"%s\"", tok[2]);
		d->thresholds[u] = (long long)v;
		return 0;
	}
	if (strcmp(k, "arch") == 0) {
		ARGS(1, "arch NAME|NUMBER");
		if (lookup(arch_names, tok[1], &u) != 0 && parse_uint(tok[1], 0xffffffffULL, &u) != 0)
			return perr(p, "unknown architecture \"%s\"", tok[1]);
		d->arch = (unsigned int)u;
		return 0;
	}
	/* The mask facts: names from a table joined by '|', or a number. */
	static const struct {
		const char *key, *usage, *what;
		const struct named *names;
		size_t off;
	} masks[] = {
		{ "events", "events TYPE|TYPE...", "event type", event_names, offsetof(struct nvmlDevice_st, supported_events) },
		{ "supported_reasons", "supported_reasons MASK", "reasons", reason_names, offsetof(struct nvmlDevice_st, supported_reasons) },
	};
	for (size_t i = 0; i < sizeof(masks) / sizeof(masks[0]); i++) {
		if (strcmp(k, masks[i].key) == 0) {
			if (n != 2)
				return perr(p, "expected: gpu SEL %s", masks[i].usage);
			if (parse_flags(masks[i].names, tok[1], &u) != 0)
				return perr(p, "bad %s mask \"%s\"", masks[i].what, tok[1]);
			*(unsigned long long *)((char *)d + masks[i].off) = u;
			return 0;
		}
	}
	if (strcmp(k, "class") == 0) {
		ARGS(1, "class rtx-pro-6000|rtx-5090|b200|gb200|h100");
		if (sim_health_class(d, tok[1]) != 0)
			return perr(p, "unknown GPU class \"%s\" (rtx-pro-6000 rtx-5090 b200 gb200 h100)", tok[1]);
		return 0;
	}
	if (strcmp(k, "health") == 0) {
		ARGS(1, "health GROUP|GROUP...");
		if (sim_health_groups(tok[1], &d->health) != 0)
			return perr(p, "bad health groups \"%s\" (ecc remap remap_phantom retired pcie clkev nvlink nvlink5 nvlink_legacy c2c recovery repair sram histogram fabric none)", tok[1]);
		return 0;
	}
	if (strcmp(k, "nvlinks") == 0 || strcmp(k, "c2c_links") == 0) {
		unsigned long long max = k[0] == 'n' ? SIM_MAX_LINKS : SIM_MAX_C2C;
		ARGS(1, "nvlinks|c2c_links N");
		if (parse_uint(tok[1], max, &u) != 0)
			return perr(p, "bad link count \"%s\" (0..%llu)", tok[1], max);
		*(k[0] == 'n' ? &d->links : &d->c2c_links) = (unsigned int)u;
		return 0;
	}
	if (strcmp(k, "energy_start") == 0) {
		ARGS(1, "energy_start MILLIJOULES");
		if (parse_num(tok[1], &v) != 0 || v < 0)
			return perr(p, "bad energy \"%s\"", tok[1]);
		d->energy_start = v;
		return 0;
	}

	{
		const struct int_fact *f;

		for (f = int_facts; f->key != NULL; f++) {
			if (strcmp(k, f->key) != 0)
				continue;
			if (n != 2)
				return perr(p, "expected: gpu SEL %s VALUE", k);
			if (parse_num(tok[1], &v) != 0 || v < 0 || v > (double)f->max)
				return perr(p, "bad value \"%s\" for %s (0..%llu)", tok[1], k, f->max);
			set_int_fact(d, f, v);
			return 0;
		}
	}
	return 1;
#undef ARGS
}

/* The statements "gpu SEL VERB ..." of a verb of their own, one row a verb. */
static const struct verb {
	const char *name;
	int (*stmt)(struct parser *p, uint32_t mask, int64_t t, char **tok, int n);
} verbs[] = {
	{"xid", stmt_xid},   {"event", stmt_event}, {"recovery", stmt_event}, {"hang", stmt_hang},
	{"fail", stmt_fail}, {"raise", stmt_raise}, {"remap", stmt_remap},    {"link", stmt_link},
	{"opevent", stmt_opevent}, {NULL, NULL},
};

static int stmt_gpu(struct parser *p, int timed, int64_t t, char **tok, int n)
{
	const struct verb *vb;
	uint32_t mask;
	unsigned int g;
	int m, count, stride;
	double scale, v0, v1;
	int64_t dur;

	if (n < 3)
		return perr(p, "expected: gpu SELECTOR STATEMENT...");
	if (parse_gpus(p, tok[1], &mask) != 0)
		return -1;
	g_seen_gpu_stmt = 1;
	tok += 2;
	n -= 2;

	if (strcmp(tok[0], "set") == 0 || parse_metric(tok[0], &m, &count, &stride, &scale) == 0) {
		if (strcmp(tok[0], "set") == 0) {
			tok++;
			n--;
		}
		if (n != 2 || parse_metric(tok[0], &m, &count, &stride, &scale) != 0)
			return perr(p, "expected: [at T] gpu SEL [set] METRIC VALUE (unknown metric \"%s\"?)",
				    n > 0 ? tok[0] : "");
		if (parse_metric_value(p, m, scale, tok[1], &v0) != 0)
			return -1;
		return add_seg(p, mask, m, count, stride, t, t, v0, v0);
	}
	if (strcmp(tok[0], "ramp") == 0) {
		if (n != 5 || parse_metric(tok[1], &m, &count, &stride, &scale) != 0)
			return perr(p, "expected: [at T] gpu SEL ramp METRIC FROM TO DURATION");
		if (parse_metric_value(p, m, scale, tok[2], &v0) != 0 || parse_metric_value(p, m, scale, tok[3], &v1) != 0)
			return -1;
		if (parse_dur(tok[4], &dur) != 0)
			return perr(p, "bad duration \"%s\" (like 10, 2.5s, 500ms)", tok[4]);
		return add_seg(p, mask, m, count, stride, t, t + dur, v0, v1);
	}
	if (strcmp(tok[0], "noise") == 0) {
		if (timed)
			return perr(p, "noise cannot be timed");
		if (n != 3 || parse_metric(tok[1], &m, &count, &stride, &scale) != 0 || parse_num(tok[2], &v0) != 0 ||
		    v0 < 0)
			return perr(p, "expected: gpu SEL noise METRIC AMPLITUDE");
		FOR_SELECTED(g, mask) {
			int k;
			for (k = 0; k < count; k++)
				g_devs[g].tr[m + k * stride].noise = v0 * scale;
		}
		return 0;
	}
	for (vb = verbs; vb->name != NULL; vb++)
		if (strcmp(tok[0], vb->name) == 0)
			return vb->stmt(p, mask, t, tok, n);
	if (strcmp(tok[0], "proc") == 0)
		return sim_stmt_proc(p->err, sizeof(p->err), mask, t, tok, n);
	if (strcmp(tok[0], "cper") == 0)
		return sim_stmt_cper(p->err, sizeof(p->err), mask, t, tok, n);
	if (strcmp(tok[0], "thermal") == 0) {
		if (timed && t != 0)
			return perr(p, "\"thermal\" describes the GPU and cannot change over time");
		return sim_stmt_thermal(p->err, sizeof(p->err), mask, tok, n);
	}
	if (strcmp(tok[0], "lost") == 0 || strcmp(tok[0], "removed") == 0) {
		if (n != 1)
			return perr(p, "unexpected \"%s\" after %s", tok[1], tok[0]);
		FOR_SELECTED(g, mask) {
			struct nvmlDevice_st *d = &g_devs[g];
			if (tok[0][0] == 'l' && t < d->lost_at)
				d->lost_at = t;
			if (tok[0][0] == 'r' && t < d->removed_at)
				d->removed_at = t;
		}
		return 0;
	}

	/* static facts */
	FOR_SELECTED(g, mask) {
		int r;
		if (timed && t != 0)
			return perr(p, "\"%s\" is a static fact and cannot change over time", tok[0]);
		r = stmt_static(p, &g_devs[g], tok, n);
		if (r < 0)
			return -1;
		if (r > 0)
			return perr(p, "unknown statement or metric \"%s\"", tok[0]);
	}
	return 0;
}

static int stmt_cost(struct parser *p, char **tok, int n);

/* at TIME eventset fail CODE [for DURATION] | at TIME eventset hang DURATION [ret CODE] */
static int stmt_eventset(struct parser *p, int64_t t, char **tok, int n)
{
	struct sim_evfault f;
	int64_t dur;

	memset(&f, 0, sizeof(f));
	f.from = t;
	f.until = SIM_NEVER;
	f.code = NVML_SUCCESS;
	if (n >= 3 && strcmp(tok[1], "fail") == 0) {
		if (sim_parse_code(tok[2], &f.code) != 0)
			return perr(p, "unknown NVML return code \"%s\"", tok[2]);
		if (n == 5 && strcmp(tok[3], "for") == 0 && parse_dur(tok[4], &dur) == 0)
			f.until = t + dur;
		else if (n != 3)
			return perr(p, "expected: eventset fail CODE [for DURATION]");
	} else if (n >= 3 && strcmp(tok[1], "hang") == 0 && parse_dur(tok[2], &dur) == 0) {
		f.hang = 1;
		f.until = t + dur;
		if (n == 5 && strcmp(tok[3], "ret") == 0) {
			if (sim_parse_code(tok[4], &f.code) != 0)
				return perr(p, "unknown NVML return code \"%s\"", tok[4]);
		} else if (n != 3) {
			return perr(p, "expected: eventset hang DURATION [ret CODE]");
		}
	} else {
		return perr(p, "expected: eventset fail CODE [for DURATION]  or  eventset hang DURATION [ret CODE]");
	}
	if (g_host.nevfaults >= SIM_MAX_EVFAULTS)
		return perr(p, "more than %d eventset statements", SIM_MAX_EVFAULTS);
	g_host.evfaults[g_host.nevfaults++] = f;
	return 0;
}

static int stmt_host(struct parser *p, char **tok, int n)
{
	unsigned long long u;
	const char *k = tok[0];

	if (strcmp(k, "cost") == 0)
		return stmt_cost(p, tok, n);

	if (strcmp(k, "gpus") == 0) {
		if (n != 2 || parse_uint(tok[1], SIM_MAX_GPUS, &u) != 0)
			return perr(p, "expected: gpus N (0..%d)", SIM_MAX_GPUS);
		if (g_seen_gpu_stmt)
			return perr(p, "\"gpus\" must come before any \"gpu\" statement");
		if (g_has_gpus_stmt)
			return perr(p, "\"gpus\" given twice");
		g_has_gpus_stmt = 1;
		g_host.ngpus = (unsigned int)u;
		return 0;
	}
	if (strcmp(k, "driver") == 0 || strcmp(k, "nvml") == 0) {
		char *dst = k[0] == 'd' ? g_host.driver : g_host.nvml;
		if (n != 2)
			return perr(p, "expected: %s VERSION", k);
		if (strlen(tok[1]) >= sizeof(g_host.driver))
			return perr(p, "version too long");
		strcpy(dst, tok[1]);
		return 0;
	}
	if (strcmp(k, "fabric_versions") == 0) {
		int i;
		g_host.fabric = 0;
		for (i = 1; i < n; i++) {
			if (tok[i][0] != 'v' || tok[i][1] < '1' || tok[i][1] > '4' || tok[i][2] != '\0')
				return perr(p, "expected: fabric_versions v4|v3|v2|v1...");
			g_host.fabric |= 1u << (tok[i][1] - '0');
		}
		if (n < 2)
			return perr(p, "expected: fabric_versions v4|v3|v2|v1...");
		return 0;
	}
	if (strcmp(k, "cuda") == 0) {
		double v;
		if (n != 2 || parse_num(tok[1], &v) != 0 || v < 0 || v > 1e7)
			return perr(p, "expected: cuda VERSION (like 12.9 or 12090)");
		if (strchr(tok[1], '.') != NULL) {
			unsigned long long maj, min;
			const char *dot = strchr(tok[1], '.');
			char majs[16];
			if ((size_t)(dot - tok[1]) >= sizeof(majs))
				return perr(p, "bad cuda version");
			memcpy(majs, tok[1], (size_t)(dot - tok[1]));
			majs[dot - tok[1]] = '\0';
			if (parse_uint(majs, 1000, &maj) != 0 || parse_uint(dot + 1, 99, &min) != 0)
				return perr(p, "bad cuda version \"%s\" (like 12.9 or 12090)", tok[1]);
			g_host.cuda = (int)(maj * 1000 + min * 10);
		} else {
			g_host.cuda = (int)v;
		}
		return 0;
	}
	if (strcmp(k, "init") == 0) {
		if (n == 2 && strcmp(tok[1], "ok") == 0) {
			g_host.init_result = NVML_SUCCESS;
			return 0;
		}
		if (n != 3 || strcmp(tok[1], "fail") != 0 || sim_parse_code(tok[2], &g_host.init_result) != 0)
			return perr(p, "expected: init ok | init fail CODE");
		return 0;
	}
	if (strcmp(k, "seed") == 0) {
		if (n != 2 || parse_uint(tok[1], ~0ULL, &g_host.seed) != 0)
			return perr(p, "expected: seed N");
		return 0;
	}
	if (strcmp(k, "user") == 0) {
		if (n != 2 || (strcmp(tok[1], "root") != 0 && strcmp(tok[1], "nonroot") != 0))
			return perr(p, "expected: user root|nonroot");
		g_host.nonroot = tok[1][0] == 'n';
		return 0;
	}
	if (strcmp(k, "kmsg_seq") == 0) {
		if (n != 2 || parse_uint(tok[1], ~0ULL, &g_host.kmsg_seq) != 0)
			return perr(p, "expected: kmsg_seq N");
		return 0;
	}
	if (strcmp(k, "kmsg_clock") == 0) {
		if ((n != 2 && n != 4) || parse_num(tok[1], &g_host.kmsg_offset) != 0 ||
		    (n == 4 && (strcmp(tok[2], "drift") != 0 || parse_num(tok[3], &g_host.kmsg_drift) != 0 ||
				g_host.kmsg_drift <= -1e6 || g_host.kmsg_drift >= 1e6)))
			return perr(p, "expected: kmsg_clock OFFSET_SECONDS [drift PPM]");
		return 0;
	}
	return perr(p, "unknown statement \"%s\"", k);
}

/* ---- cost profile (cost.c; README "Cost profile") ------------------------ */

#define COST_USAGE                                                                         \
	"expected: cost profile none|realistic|pessimistic, cost scale X, cost lock on|off, " \
	"cost lock FUNCTION|* on|off, cost slow FUNCTION|* 1/N DURATION, "                    \
	"or cost FUNCTION|* LATENCY [jitter J]"

static int stmt_cost(struct parser *p, char **tok, int n)
{
	struct sim_fnset fns;
	unsigned int on;
	int64_t lat, jit = 0;
	double x;
	int i;

	if (n == 3 && strcmp(tok[1], "profile") == 0) {
		if (sim_cost_profile(tok[2]) != 0)
			return perr(p, "unknown cost profile \"%s\" (none, realistic, pessimistic)", tok[2]);
		return 0;
	}
	if (n == 3 && strcmp(tok[1], "scale") == 0) {
		if (parse_num(tok[2], &x) != 0 || x < 0 || x > 1000)
			return perr(p, "bad cost scale \"%s\" (0..1000)", tok[2]);
		sim_cost_scale(x);
		return 0;
	}
	if (n == 3 && strcmp(tok[1], "lock") == 0) {
		if (onoff(tok[2], &on) != 0)
			return perr(p, COST_USAGE);
		g_cost_lock = (int)on;
		return 0;
	}
	if (n == 4 && strcmp(tok[1], "lock") == 0) {
		if (parse_fnset(p, tok[2], &fns) != 0)
			return -1;
		if (onoff(tok[3], &on) != 0)
			return perr(p, COST_USAGE);
		for (i = 0; i < FN_COUNT; i++)
			if (fnset_has(&fns, i))
				g_cost[i].nolock = !on;
		return 0;
	}
	if (n == 5 && strcmp(tok[1], "slow") == 0) {
		unsigned long long every;
		if (parse_fnset(p, tok[2], &fns) != 0)
			return -1;
		if (strncmp(tok[3], "1/", 2) != 0 || parse_uint(tok[3] + 2, 1000000000ULL, &every) != 0 || every == 0)
			return perr(p, "bad slow-call rate \"%s\" (like 1/1000)", tok[3]);
		if (parse_dur(tok[4], &lat) != 0)
			return perr(p, "bad duration \"%s\"", tok[4]);
		for (i = 0; i < FN_COUNT; i++)
			if (fnset_has(&fns, i)) {
				g_cost[i].slow_every = (uint32_t)every;
				g_cost[i].slow = lat;
			}
		g_cost_on = 1;
		return 0;
	}
	if (n == 3 || (n == 5 && strcmp(tok[3], "jitter") == 0)) {
		if (parse_fnset(p, tok[1], &fns) != 0)
			return -1;
		if (parse_dur(tok[2], &lat) != 0)
			return perr(p, "bad latency \"%s\" (like 0.25ms)", tok[2]);
		if (n == 5 && (parse_dur(tok[4], &jit) != 0 || jit > lat))
			return perr(p, "bad jitter \"%s\" (a duration, at most the latency)", tok[4]);
		for (i = 0; i < FN_COUNT; i++)
			if (fnset_has(&fns, i)) {
				g_cost[i].lat = lat;
				g_cost[i].jitter = jit;
			}
		g_cost_on = 1;
		return 0;
	}
	return perr(p, COST_USAGE);
}

/* SIMNVML_COST: a profile name, or cost statements separated by ';'
 * ("profile realistic; lock on"); applied after the scenario file. */
static int parse_cost_env(struct parser *p, const char *env)
{
	char buf[1024], line[1100], *s, *next;

	p->file = "SIMNVML_COST";
	p->line = 0;
	if (strlen(env) >= sizeof(buf))
		return perr(p, "too long");
	snprintf(buf, sizeof(buf), "%s", env);
	for (s = buf; s != NULL; s = next) {
		char *tok[16];
		int n;

		next = strchr(s, ';');
		if (next != NULL)
			*next++ = '\0';
		if (strchr(s, ' ') == NULL && strchr(s, '\t') == NULL && s[0] != '\0')
			snprintf(line, sizeof(line), "cost profile %s", s);
		else
			snprintf(line, sizeof(line), "cost %s", s);
		n = tokenize(p, line, tok, 16);
		if (n < 0)
			return -1;
		if (n > 1 && stmt_cost(p, tok, n) != 0)
			return -1;
	}
	return 0;
}

static int parse_line(struct parser *p, char *line)
{
	char *tok[64];
	int n = tokenize(p, line, tok, 64);
	int64_t t = 0;
	int timed = 0;

	if (n <= 0)
		return n;
	if (strcmp(tok[0], "at") == 0) {
		if (n < 3 || parse_dur(tok[1], &t) != 0)
			return perr(p, "expected: at TIME gpu SEL ... (TIME like 2.5 or 2500ms)");
		if (strcmp(tok[2], "eventset") == 0)
			return stmt_eventset(p, t, tok + 2, n - 2);
		if (strcmp(tok[2], "gpu") != 0)
			return perr(p, "only \"gpu\" and \"eventset\" statements can be timed");
		timed = 1;
		return stmt_gpu(p, timed, t, tok + 2, n - 2);
	}
	if (strcmp(tok[0], "gpu") == 0)
		return stmt_gpu(p, 0, 0, tok, n);
	if (strcmp(tok[0], "eventset") == 0)
		return stmt_eventset(p, 0, tok, n);
	return stmt_host(p, tok, n);
}

static int parse_file(struct parser *p, const char *path)
{
	FILE *f = fopen(path, "r");
	char *line = NULL;
	size_t cap = 0;
	int rc = 0;

	p->file = path;
	p->line = 0;
	if (f == NULL) {
		perr(p, "cannot open scenario: %s", strerror(errno));
		return -1;
	}
	while (getline(&line, &cap, f) >= 0) {
		p->line++;
		if (parse_line(p, line) != 0) {
			rc = -1;
			break;
		}
	}
	free(line);
	fclose(f);
	return rc;
}

/* ---- compilation --------------------------------------------------------- */

static int cmp_seg(const void *a, const void *b)
{
	const struct rawseg *x = a, *y = b;

	if (x->gpu != y->gpu)
		return x->gpu < y->gpu ? -1 : 1;
	if (x->metric != y->metric)
		return x->metric < y->metric ? -1 : 1;
	if (x->s.t0 != y->s.t0)
		return x->s.t0 < y->s.t0 ? -1 : 1;
	return x->order < y->order ? -1 : (x->order > y->order);
}

static int cmp_event(const void *a, const void *b)
{
	const struct rawevent *x = a, *y = b;

	if (x->e.t != y->e.t)
		return x->e.t < y->e.t ? -1 : 1;
	return x->order < y->order ? -1 : (x->order > y->order);
}

static int cmp_kmsg(const void *a, const void *b)
{
	const struct rawkmsg *x = a, *y = b;

	if (x->k.t != y->k.t)
		return x->k.t < y->k.t ? -1 : 1;
	return x->order < y->order ? -1 : (x->order > y->order);
}

/* PER_GPU copies the field of the entries of raw list r that belong to GPU
 * g into a new array out (an empty slot after the last), and their number
 * into len; compile returns -1 when out cannot be allocated. */
#define PER_GPU(r, g, out, field, len)                                       \
	do {                                                               \
		size_t k_ = 0;                                             \
		for (i = 0; i < (r).n; i++)                                \
			k_ += (r).v[i].gpu == (g);                         \
		(out) = calloc(k_ + 1, sizeof(*(out)));                    \
		if ((out) == NULL)                                         \
			return -1;                                         \
		for (i = 0, k_ = 0; i < (r).n; i++)                        \
			if ((r).v[i].gpu == (g))                           \
				(out)[k_++] = (r).v[i].field;              \
		(len) = (unsigned int)k_;                                    \
	} while (0)

/* SORTED sorts raw list r with cmp and copies each entry's field into a new
 * array out (an empty slot after the last), and its length into len. */
#define SORTED(r, cmp, out, field, len)                                      \
	do {                                                               \
		if ((r).n > 0) /* qsort(NULL, 0, ...) is undefined (UBSan) */ \
			qsort((r).v, (r).n, sizeof(*(r).v), (cmp));        \
		(out) = calloc((r).n + 1, sizeof(*(out)));                 \
		if ((out) == NULL)                                         \
			return -1;                                         \
		for (i = 0; i < (r).n; i++)                                \
			(out)[i] = (r).v[i].field;                         \
		(len) = (r).n;                                               \
	} while (0)

static int compile(void)
{
	size_t i, total;
	unsigned int g;

	/* enforced limit follows the management limit unless set explicitly */
	for (g = 0; g < g_host.ngpus; g++) {
		struct nvmlDevice_st *d = &g_devs[g];
		d->tr[M_PLIMIT].def = d->p_default;
		d->tr[M_ENFORCED].def = d->p_default;
		if (!g_gsp_set[g])
			snprintf(d->gsp_version, sizeof(d->gsp_version), "%s", g_host.driver);
	}
	total = r_segs.n;
	for (i = 0; i < total; i++) {
		struct rawseg r = r_segs.v[i];
		if (r.metric == M_PLIMIT && !g_devs[r.gpu].enforced_explicit) {
			r.metric = M_ENFORCED;
			if (PUSH(r_segs, r) != 0)
				return -1;
		}
	}

	if (r_segs.n > 0) /* qsort(NULL, 0, ...) is undefined (UBSan) */
		qsort(r_segs.v, r_segs.n, sizeof(*r_segs.v), cmp_seg);
	g_segs = calloc(r_segs.n + 1, sizeof(*g_segs));
	if (g_segs == NULL)
		return -1;
	for (i = 0; i < r_segs.n; i++) {
		struct sim_track *tr = &g_devs[r_segs.v[i].gpu].tr[r_segs.v[i].metric];
		struct sim_seg s = r_segs.v[i].s;
		if (r_segs.v[i].rel) {
			/* raise: from the value the track has at t0 (earlier segments only) */
			double base = tr->def;
			if (tr->n > 0) {
				const struct sim_seg *pv = &g_segs[i - 1];
				base = s.t0 >= pv->t1 || pv->t1 == pv->t0 ?
					       pv->v1 :
					       pv->v0 + (pv->v1 - pv->v0) * (double)(s.t0 - pv->t0) / (double)(pv->t1 - pv->t0);
			}
			s.v0 += base;
			s.v1 += base;
		}
		if (tr->n == 0)
			tr->off = (uint32_t)i;
		tr->n++;
		g_segs[i] = s;
	}

	for (g = 0; g < g_host.ngpus; g++) {
		struct nvmlDevice_st *d = &g_devs[g];
		double *ecum = calloc(d->tr[M_POWER].n + 1, sizeof(double));

		if (ecum == NULL)
			return -1;
		sim_energy_prepare(d, ecum);
		PER_GPU(r_hangs, g, d->hangs, h, d->nhang);
		PER_GPU(r_fails, g, d->fails, f, d->nfail);
	}

	SORTED(r_events, cmp_event, g_events, e, g_nevents);
	SORTED(r_kmsgs, cmp_kmsg, g_kmsgs, k, g_nkmsgs);

	free(r_segs.v);
	free(r_hangs.v);
	free(r_fails.v);
	free(r_events.v);
	free(r_kmsgs.v);
	memset(&r_segs, 0, sizeof(r_segs));
	memset(&r_hangs, 0, sizeof(r_hangs));
	memset(&r_fails, 0, sizeof(r_fails));
	memset(&r_events, 0, sizeof(r_events));
	memset(&r_kmsgs, 0, sizeof(r_kmsgs));
	return 0;
}

nvmlReturn_t sim_load_scenario(const char *path)
{
	struct parser p;
	unsigned int i;

	host_defaults();
	for (i = 0; i < SIM_MAX_GPUS; i++)
		dev_defaults(&g_devs[i], i);
	memset(&p, 0, sizeof(p));
	if (path != NULL && path[0] != '\0' && parse_file(&p, path) != 0) {
		if (p.line > 0)
			fprintf(stderr, "simnvml: %s:%d: %s\n", p.file, p.line, p.err);
		else
			fprintf(stderr, "simnvml: %s: %s\n", p.file, p.err);
		g_host.ngpus = 0;
		return NVML_ERROR_UNKNOWN;
	}
	if (getenv("SIMNVML_COST") != NULL && getenv("SIMNVML_COST")[0] != '\0' &&
	    parse_cost_env(&p, getenv("SIMNVML_COST")) != 0) {
		fprintf(stderr, "simnvml: SIMNVML_COST: %s\n", p.err);
		g_host.ngpus = 0;
		return NVML_ERROR_UNKNOWN;
	}
	if (compile() != 0) {
		fprintf(stderr, "simnvml: out of memory compiling scenario\n");
		g_host.ngpus = 0;
		return NVML_ERROR_UNKNOWN;
	}
	return NVML_SUCCESS;
}

/* For statements parsed in other files (procs.c, fans.c). */
int sim_parse_duration(const char *s, int64_t *ns)
{
	return parse_dur(s, ns);
}

int sim_parse_number(const char *s, double *out)
{
	return parse_num(s, out);
}
