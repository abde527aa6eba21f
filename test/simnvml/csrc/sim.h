/*
 * sim.h - internal declarations of simnvml, the simulated libnvidia-ml.so.1.
 *
 * Everything here is hidden (-fvisibility=hidden); only the NVML entry points
 * declared by nvml.h are exported, because nvml.h is included inside a
 * "visibility push(default)" region.
 */
#ifndef SIMNVML_SIM_H
#define SIMNVML_SIM_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#define NVML_NO_UNVERSIONED_FUNC_DEFS 1
#pragma GCC visibility push(default)
#include "nvml.h"
#pragma GCC visibility pop

#define SIM_MAX_GPUS 16
#define SIM_MAX_FANS 8
#define SIM_MAX_SENSORS 3
#define SIM_MAX_SETS 256
#define SIM_MAX_ADDED 128 /* events (and kmsg records) added while running */
#define SIM_NEVER INT64_MAX

/* ---- function ids (fns.h) ------------------------------------------------ */

enum sim_fn {
#define SIMFN(name) FN_##name,
#include "fns.h"
#undef SIMFN
	FN_COUNT
};

#define SIM_FNSET_WORDS ((FN_COUNT + 63) / 64)

struct sim_fnset {
	uint64_t w[SIM_FNSET_WORDS];
};

static inline int fnset_has(const struct sim_fnset *s, int fn)
{
	return (int)((s->w[fn / 64] >> (fn % 64)) & 1u);
}

extern const char *const sim_fn_names[FN_COUNT];
extern unsigned long long sim_fn_calls[FN_COUNT];

/* Stub counters live in stubs_gen.c (generated). */
extern unsigned long long simnvml_stub_calls[];
extern const char *const simnvml_stub_names[];
extern const unsigned int simnvml_nstubs;

#define SIM_COUNT(name) __atomic_fetch_add(&sim_fn_calls[FN_##name], 1, __ATOMIC_RELAXED)

/* ---- hardware health counters (health.h, health.c) ------------------------ */

#define SIM_MAX_LINKS 18 /* NVLink links modelled per GPU (B200: 18) */
#define SIM_MAX_C2C 2 /* C2C links modelled per GPU (GB200: 2) */

/* Health groups: which quantities a GPU class supports ("gpu SEL health ..."). */
enum sim_hgroup {
	HG_ECC = 1 << 0, /* ECC mode and SBE/DBE totals */
	HG_REMAP = 1 << 1, /* row remapping fields */
	HG_REMAP_PHANTOM = 1 << 2, /* remap fields answer SUCCESS with 0 on a GPU without remapping */
	HG_RETIRED = 1 << 3, /* retired pages (pre-Ampere) */
	HG_PCIE = 1 << 4, /* PCIe error counters */
	HG_CLKEV = 1 << 5, /* clock-event time counters */
	HG_NVLINK = 1 << 6, /* NVLink inventory: count, state, speed, version (fields and getters) */
	HG_NVLINK5 = 1 << 7, /* NVLink5 NVLINK_COUNT_* error fields */
	HG_NVLINK_LEGACY = 1 << 8, /* nvmlDeviceGetNvLinkErrorCounter (pre-Blackwell) */
	HG_C2C = 1 << 9, /* C2C link fields */
	HG_RECOVERY = 1 << 10, /* GET_GPU_RECOVERY_ACTION field */
	HG_REPAIR = 1 << 11, /* nvmlDeviceGetRepairStatus, GetUnrepairableMemoryFlag_v1 */
	HG_SRAM = 1 << 12, /* nvmlDeviceGetSramEccErrorStatus */
	HG_HISTOGRAM = 1 << 13, /* nvmlDeviceGetRowRemapperHistogram */
	HG_FABRIC = 1 << 14, /* nvmlDeviceGetGpuFabricInfo_v4, GetGpuFabricInfoV, GetGpuFabricInfo */
};

enum sim_hf {
#define SIMHF(key, id, group, type, def, scale) HF_##key,
#include "health.h"
	HF_COUNT
};
enum sim_lf {
#define SIMLF(key, id, group, type, def, scale) LF_##key,
#include "health.h"
	LF_COUNT
};
enum sim_cf {
#define SIMCF(key, id, group, type, def, scale) CF_##key,
#include "health.h"
	CF_COUNT
};

/* ---- time-varying values ------------------------------------------------- */

enum sim_metric {
	M_TEMP,
	M_MEMTEMP,
	M_POWER, /* mW */
	M_PLIMIT, /* mW, management limit */
	M_ENFORCED, /* mW, enforced limit (follows plimit unless set) */
	M_PSTATE,
	M_CLK_GFX,
	M_CLK_SM,
	M_CLK_MEM,
	M_CLK_VIDEO,
	M_UTIL_GPU,
	M_UTIL_MEM,
	M_UTIL_ENC,
	M_UTIL_DEC,
	M_MEM_USED, /* MiB */
	M_PCIE_GEN,
	M_PCIE_WIDTH,
	M_PCIE_REPLAY,
	M_REASONS,
	M_SENSOR_TARGET,
	M_SENSOR_CONTROLLER,
	M_SENSOR_TEMP, /* thermal sensor 0; follows M_TEMP unless set */
	M_PROCS,
	M_GPROCS,
	M_PROC_MEM, /* MiB per process */
	M_FAN0, /* M_FAN0 + i: fan i speed % */
	M_FANT0 = M_FAN0 + SIM_MAX_FANS, /* fan i target % */
	M_FANP0 = M_FANT0 + SIM_MAX_FANS, /* fan i control policy */
	M_H0 = M_FANP0 + SIM_MAX_FANS, /* health.h: GPU-level quantity HF_x at M_H0 + HF_x */
	M_L0 = M_H0 + HF_COUNT, /* NVLink link l, quantity LF_x: M_L0 + l * LF_COUNT + LF_x */
	M_C0 = M_L0 + SIM_MAX_LINKS * LF_COUNT, /* C2C link l, quantity CF_x: M_C0 + l * CF_COUNT + CF_x */
	M_COUNT = M_C0 + SIM_MAX_C2C * CF_COUNT
};

/* One "set" (t1 == t0) or "ramp" (v0 at t0 .. v1 at t1, then v1). */
struct sim_seg {
	int64_t t0, t1; /* ns since time origin */
	double v0, v1;
};

struct sim_track {
	double def; /* value before the first segment */
	double noise; /* deterministic noise amplitude, 0 = none */
	uint32_t off, n; /* segments g_segs[off .. off+n) sorted by t0 */
};

struct sim_hang {
	int64_t start, end;
	struct sim_fnset fns;
	nvmlReturn_t ret;
};

struct sim_fail {
	int64_t from, until;
	struct sim_fnset fns;
	unsigned int field; /* != 0: applies to GetFieldValues entry with this field id */
	nvmlReturn_t code;
};

/* The device handle handed to callers points at one of these. */
struct nvmlDevice_st {
	unsigned int index; /* scenario index 0..15 */
	int64_t lost_at; /* ns, SIM_NEVER if never */
	int64_t removed_at;

	struct sim_track tr[M_COUNT];
	double *ecum; /* mJ at the start of each power segment */

	struct sim_hang *hangs;
	unsigned int nhang;
	struct sim_fail *fails;
	unsigned int nfail;
	int has_field_fails;

	/* static facts */
	char name[96];
	char uuid[80];
	char serial[32];
	char vbios[32];
	char busid[NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE];
	char busid_legacy[NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE];
	char part[32];
	char gsp_version[NVML_GSP_FIRMWARE_VERSION_BUF_SIZE];
	unsigned int domain, bus, dev;
	unsigned int pci_device_id, pci_subsystem_id;
	unsigned int arch, brand, minor, persistence;
	unsigned int fans, sensors;
	unsigned int gsp_enabled, gsp_default;
	long long thresholds[NVML_TEMPERATURE_THRESHOLD_COUNT]; /* <0: not supported */
	unsigned int p_default, p_min, p_max; /* mW */
	unsigned int max_clk[NVML_CLOCK_COUNT];
	unsigned int max_pcie_gen, max_pcie_width;
	unsigned long long mem_total, mem_reserved; /* bytes */
	unsigned long long supported_events;
	unsigned long long supported_reasons;
	double energy_start; /* mJ */
	int enforced_explicit;
	int sensor_temp_explicit; /* M_SENSOR_TEMP set: sensor 0 no longer reads M_TEMP */
	unsigned int health; /* enum sim_hgroup bits this GPU supports */
	unsigned int links, c2c_links; /* NVLink and C2C links */
	unsigned int fan_min, fan_max; /* GetMinMaxFanSpeed: the range a setter accepts, % */

	/* fans.c: the only state a caller changes. fan_cmd[i] is the speed
	 * SetFanSpeed_v2 (or SetFanControlPolicy manual) commanded for fan i,
	 * -1 while the firmware controls it; read and written atomically. */
	int fan_cmd[SIM_MAX_FANS];
	struct sim_thermal *th; /* the thermal model, NULL unless "thermal" is on */
};

/* ---- timeline events ----------------------------------------------------- */

/* A GPU operational event ("opevent"): what nvmlEventSetWait_v3 reports of
 * it, and its context records (a legacy Xid, or an opaque one). */
#define SIM_OPEV_MAXCTX 8
struct sim_opev {
	unsigned int severity, log_level, category, attributes, group_attributes;
	unsigned int module_event_code, gpu_instance, compute_instance;
	unsigned long long sequence;
	char module[16];
	unsigned int nctx;
	struct {
		unsigned int legacy_xid; /* 1: a LEGACY_XID context carrying xid */
		unsigned int xid;
		unsigned int source_type;
	} ctx[SIM_OPEV_MAXCTX];
};

struct sim_event {
	int64_t t;
	unsigned int gpu;
	unsigned long long type; /* 0 for an operational event */
	unsigned long long data;
	const struct sim_opev *op; /* an operational event; NULL for an event bit */
};

struct sim_kmsg {
	int64_t t;
	unsigned int gpu;
	unsigned int xid;
	int action; /* Xid 154: new recovery action */
	char *text; /* NULL: default text for the Xid */
};

/* ---- global state (read-only after the scenario is loaded) -------------- */

/* "at TIME eventset fail|hang ...": nvmlEventSetWait faults (not per GPU). */
#define SIM_MAX_EVFAULTS 16
struct sim_evfault {
	int64_t from, until;
	int hang; /* 1: block until "until", then return code (success: wait normally) */
	nvmlReturn_t code;
};

struct sim_host {
	unsigned int ngpus;
	struct sim_evfault evfaults[SIM_MAX_EVFAULTS];
	unsigned int nevfaults;
	char driver[64];
	char nvml[64];
	int cuda;
	nvmlReturn_t init_result;
	unsigned long long seed;
	unsigned long long kmsg_seq;
	double kmsg_offset; /* seconds the kmsg clock runs behind CLOCK_MONOTONIC */
	double kmsg_drift;  /* ppm it loses per second of CLOCK_MONOTONIC since boot */
	int nonroot; /* "user nonroot": every setter answers NVML_ERROR_NO_PERMISSION */
	unsigned int fabric; /* "fabric_versions": bit 1 << v, the fabric struct versions the driver knows */
};

/* The fabric struct versions (g_host.fabric): 1 the original call's
 * nvmlGpuFabricInfo_t, 2 and 3 the versioned call's, 4 the _v4 call's. */
#define SIM_FABRIC_V1 (1u << 1)
#define SIM_FABRIC_V2 (1u << 2)
#define SIM_FABRIC_V3 (1u << 3)
#define SIM_FABRIC_V4 (1u << 4)

extern struct sim_host g_host;
extern struct nvmlDevice_st g_devs[SIM_MAX_GPUS];
extern struct sim_seg *g_segs;
extern struct sim_event *g_events;
extern size_t g_nevents;
extern struct sim_kmsg *g_kmsgs;
extern size_t g_nkmsgs;
extern int64_t g_t0; /* CLOCK_MONOTONIC ns of the first nvmlInit */
extern int64_t g_real_offset; /* CLOCK_REALTIME - CLOCK_MONOTONIC, ns */
extern int g_refcount; /* atomic; > 0 while initialised */

/* scenario.c */
nvmlReturn_t sim_load_scenario(const char *path);
int sim_parse_code(const char *s, nvmlReturn_t *out);

/* core.c */
static inline int64_t sim_mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static inline int64_t sim_now(void)
{
	return sim_mono_ns() - g_t0;
}

static inline int sim_initialized(void)
{
	return __atomic_load_n(&g_refcount, __ATOMIC_ACQUIRE) > 0;
}

void sim_sleep_until(int64_t t); /* t: ns since origin */
int sim_start_thread(void *(*fn)(void *), void *arg);
void sim_dump_calls(void);
const char *sim_recovery_name(int action);

/* cost.c: the NVML cost profile (latency, driver lock, slow calls). */
struct sim_cost {
	int64_t lat, jitter; /* ns: each call waits lat +- jitter (uniform) */
	uint32_t slow_every; /* 0: never; N: about one call in N waits slow more */
	int64_t slow;
	int nolock; /* the call does not take the driver-wide lock (default: it does) */
};

extern struct sim_cost g_cost[FN_COUNT];
extern int g_cost_lock; /* driver-wide lock on */
extern int g_cost_on; /* any latency configured (fast path check) */
extern unsigned long long sim_fn_wall_ns[FN_COUNT]; /* time inside the cost wait, lock wait included */
extern unsigned long long sim_fn_cpu_ns[FN_COUNT]; /* thread CPU time of the same */

int sim_cost_profile(const char *name); /* 0 ok, -1 unknown name */
void sim_cost_scale(double x);
void sim_cost_wait(int fn);

/* to_u32 rounds a value to what a 32-bit NVML result reports: -1 reads as
 * 0xFFFFFFFF, as a scenario that sets it means. */
static inline unsigned int to_u32(double v)
{
	long long x;

	if (v >= 9.2e18)
		return 0xFFFFFFFFu;
	if (v <= -9.2e18)
		return 0;
	x = (long long)(v >= 0 ? v + 0.5 : v - 0.5);
	return (unsigned int)x;
}

/* device.c */
double sim_eval(const struct nvmlDevice_st *d, int m, int64_t t);
nvmlReturn_t sim_dev_enter(int fn, nvmlDevice_t device, struct nvmlDevice_st **out, int64_t *now);
int sim_dev_present(const struct nvmlDevice_st *d, int64_t now);

/* ENTER begins a modelled device call fn: counts it, applies hangs, cost,
 * loss and fail rules, and puts the device d and the time now in scope. */
#define ENTER(fn)                                                        \
	struct nvmlDevice_st *d;                                         \
	int64_t now;                                                     \
	nvmlReturn_t enter_rc_;                                          \
	SIM_COUNT(fn);                                                   \
	enter_rc_ = sim_dev_enter(FN_##fn, device, &d, &now);            \
	if (enter_rc_ != NVML_SUCCESS)                                   \
		return enter_rc_

#define NEED(p)                                     \
	do {                                        \
		if ((p) == NULL)                    \
			return NVML_ERROR_INVALID_ARGUMENT; \
	} while (0)

/* NEED_VERSION refuses a NULL versioned struct p, and one whose version is
 * not v (the only one modelled). */
#define NEED_VERSION(p, v)                                           \
	do {                                                         \
		NEED(p);                                             \
		if ((p)->version != (v))                             \
			return NVML_ERROR_ARGUMENT_VERSION_MISMATCH; \
	} while (0)

void sim_energy_prepare(struct nvmlDevice_st *d, double *ecum);
/* sim_copy_str copies src into dst of len bytes, as NVML string queries do:
 * NULL refused, a short buffer is NVML_ERROR_INSUFFICIENT_SIZE. */
nvmlReturn_t sim_copy_str(char *dst, unsigned int len, const char *src);
int sim_parse_busid(const char *s, unsigned int *domain, unsigned int *bus, unsigned int *dev);

/* procs.c: scripted processes ("gpu SEL proc PID ...") */
#define SIM_PROC_COMPUTE 1
#define SIM_PROC_GRAPHICS 2
int sim_stmt_proc(char *err, size_t errlen, uint32_t mask, int64_t t, char **tok, int n);
unsigned int sim_procs_count(const struct nvmlDevice_st *d, int64_t now, int kind);
void sim_procs_fill(const struct nvmlDevice_st *d, int64_t now, int kind, void *infos, unsigned int first, int v1);
int sim_parse_duration(const char *s, int64_t *ns); /* scenario.c */
int sim_parse_number(const char *s, double *out); /* scenario.c */

/* cper.c: CPER records behind nvmlSystemGetCPER_v1 ("gpu SEL cper ...") */
int sim_stmt_cper(char *err, size_t errlen, uint32_t mask, int64_t t, char **tok, int n);

/* health.c: GPU classes and health counters */
int sim_health_metric(const char *s, int *m, int *count, double *scale); /* 0 ok, -1 not a health metric */
double sim_health_default(int m); /* default of health metric m (scaled) */
unsigned int sim_health_field_id(const char *key); /* field id of a health metric name; 0: none */
int sim_health_class(struct nvmlDevice_st *d, const char *name); /* 0 ok, -1 unknown class */
int sim_health_groups(const char *s, unsigned int *out); /* "ecc|pcie" or a number */
void sim_health_defaults(struct nvmlDevice_st *d);
/* sim_health_field answers one GetFieldValues entry the main switch does not
 * know: NVML_ERROR_NOT_SUPPORTED when no health quantity has that id. */
nvmlReturn_t sim_health_field(const struct nvmlDevice_st *d, nvmlFieldValue_t *v, int64_t now);

/* events.c */
void sim_start_kmsg(void);
int64_t sim_kmsg_clock(int64_t mono);
/* sim_add_event and sim_add_kmsg add an event and a kernel log record the
 * scenario did not script (the thermal model's crash), once the scenario is
 * loaded: event sets deliver it at t, the kmsg writer writes it at t.
 * Return -1 when full. */
int sim_add_event(int64_t t, unsigned int gpu, unsigned long long type, unsigned long long data);
int sim_add_kmsg(int64_t t, unsigned int gpu, unsigned int xid, int action);
void sim_write_due_kmsgs(int64_t now); /* writes the added records due at now */

/* fans.c: fan setters, the fan state and the thermal model */
struct nvmlDevice_st *sim_dev_of(nvmlDevice_t device); /* NULL: not a handle of ours */
double sim_temp(struct nvmlDevice_st *d, int64_t now); /* the die temperature, C */
int sim_stmt_thermal(char *err, size_t errlen, uint32_t mask, char **tok, int n); /* "gpu SEL thermal ..." */
void sim_start_thermal(void); /* the thread that runs the thermal model when nobody asks */

#endif
