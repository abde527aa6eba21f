/*
 * health.c - hardware health counters and the GPU classes that decide which
 * of them a GPU answers (see health.h and ../README.md, "Health counters").
 *
 * Every quantity is one line of health.h: a scenario metric with a track per
 * GPU (per link for NVLink and C2C), the NVML field that reads it and the
 * health group a GPU must support to answer it. GetFieldValues answers each
 * entry with its own nvmlReturn: a field of a group the GPU lacks is
 * NVML_ERROR_NOT_SUPPORTED (value zeroed), except row-remap fields on a GPU
 * marked remap_phantom, which answer SUCCESS with 0 as some GeForce boards do.
 *
 * Hot path rules as in device.c: no malloc, no I/O, no locks.
 */
#include "sim.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

enum { T_U, T_L, T_B };
#define U T_U
#define L T_L
#define B T_B

struct hdef {
	const char *key;
	unsigned int id;
	unsigned int group;
	int type;
	double def, scale;
};

static const struct hdef hf[HF_COUNT] = {
#define SIMHF(key, id, group, type, def, scale) { #key, id, group, type, def, scale },
#include "health.h"
};
static const struct hdef lf[LF_COUNT] = {
#define SIMLF(key, id, group, type, def, scale) { #key, id, group, type, def, scale },
#include "health.h"
};
static const struct hdef cf[CF_COUNT] = {
#define SIMCF(key, id, group, type, def, scale) { #key, id, group, type, def, scale },
#include "health.h"
};
#undef U
#undef L
#undef B

/* ---- scenario names ------------------------------------------------------ */

static int find(const struct hdef *t, int n, const char *key)
{
	int i;

	for (i = 0; i < n; i++)
		if (strcmp(t[i].key, key) == 0)
			return i;
	return -1;
}

/* "nvlink3_rx_errors" -> link 3, "rx_errors"; "nvlink_rx_errors" -> every
 * link (*link = -1). prefix is "nvlink" or "c2c"; max the link limit. */
static int link_key(const char *s, const char *prefix, int max, int *link, const char **rest)
{
	size_t n = strlen(prefix);
	int l = -1;

	if (strncmp(s, prefix, n) != 0)
		return -1;
	s += n;
	if (*s >= '0' && *s <= '9') {
		l = 0;
		while (*s >= '0' && *s <= '9') {
			l = l * 10 + (*s - '0');
			if (l >= max)
				return -1;
			s++;
		}
	}
	if (*s != '_')
		return -1;
	*link = l;
	*rest = s + 1;
	return 0;
}

int sim_health_metric(const char *s, int *m, int *count, double *scale)
{
	const char *rest;
	int i, link;

	if ((i = find(hf, HF_COUNT, s)) >= 0) {
		*m = M_H0 + i;
		*count = 1;
		*scale = hf[i].scale;
		return 0;
	}
	/* volatile and aggregate together */
	if (strcmp(s, "ecc_sbe") == 0 || strcmp(s, "ecc_dbe") == 0) {
		*m = M_H0 + (s[4] == 's' ? HF_ecc_sbe_vol : HF_ecc_dbe_vol);
		*count = 2;
		*scale = 1;
		return 0;
	}
	if (link_key(s, "nvlink", SIM_MAX_LINKS, &link, &rest) == 0 && (i = find(lf, LF_COUNT, rest)) >= 0) {
		*scale = lf[i].scale;
		if (link >= 0) {
			*m = M_L0 + link * LF_COUNT + i;
			*count = 1;
		} else {
			/* every link: the caller adds count tracks with stride LF_COUNT */
			*m = M_L0 + i;
			*count = -SIM_MAX_LINKS;
		}
		return 0;
	}
	if (link_key(s, "c2c", SIM_MAX_C2C, &link, &rest) == 0 && (i = find(cf, CF_COUNT, rest)) >= 0) {
		*scale = cf[i].scale;
		if (link >= 0) {
			*m = M_C0 + link * CF_COUNT + i;
			*count = 1;
		} else {
			*m = M_C0 + i;
			*count = -SIM_MAX_C2C;
		}
		return 0;
	}
	return -1;
}

/* def returns the table entry of health metric m, or NULL. */
static const struct hdef *def(int m)
{
	if (m >= M_H0 && m < M_L0)
		return &hf[m - M_H0];
	if (m >= M_L0 && m < M_C0)
		return &lf[(m - M_L0) % LF_COUNT];
	if (m >= M_C0 && m < M_COUNT)
		return &cf[(m - M_C0) % CF_COUNT];
	return NULL;
}

double sim_health_default(int m)
{
	const struct hdef *h = def(m);

	return h == NULL ? 0 : h->def * h->scale;
}

unsigned int sim_health_field_id(const char *key)
{
	const char *rest;
	int i, link;

	if ((i = find(hf, HF_COUNT, key)) >= 0)
		return hf[i].id;
	if (link_key(key, "nvlink", SIM_MAX_LINKS, &link, &rest) == 0 && link < 0 && (i = find(lf, LF_COUNT, rest)) >= 0)
		return lf[i].id;
	if (link_key(key, "c2c", SIM_MAX_C2C, &link, &rest) == 0 && link < 0 && (i = find(cf, CF_COUNT, rest)) >= 0)
		return cf[i].id;
	return 0;
}

static const struct {
	const char *name;
	unsigned int bit;
} group_names[] = {
	{ "ecc", HG_ECC },	     { "remap", HG_REMAP },	      { "remap_phantom", HG_REMAP_PHANTOM },
	{ "retired", HG_RETIRED },   { "pcie", HG_PCIE },	      { "clkev", HG_CLKEV },
	{ "nvlink", HG_NVLINK },     { "nvlink5", HG_NVLINK5 },   { "nvlink_legacy", HG_NVLINK_LEGACY },
	{ "c2c", HG_C2C },	     { "recovery", HG_RECOVERY }, { "repair", HG_REPAIR },
	{ "sram", HG_SRAM },	     { "histogram", HG_HISTOGRAM }, { "fabric", HG_FABRIC }, { "none", 0 },
};

int sim_health_groups(const char *s, unsigned int *out)
{
	char buf[256], *save = NULL, *w;
	unsigned int v = 0;
	size_t i;

	if (strlen(s) >= sizeof(buf))
		return -1;
	strcpy(buf, s);
	for (w = strtok_r(buf, "|", &save); w != NULL; w = strtok_r(NULL, "|", &save)) {
		for (i = 0; i < sizeof(group_names) / sizeof(group_names[0]); i++)
			if (strcasecmp(group_names[i].name, w) == 0)
				break;
		if (i == sizeof(group_names) / sizeof(group_names[0]))
			return -1;
		v |= group_names[i].bit;
	}
	*out = v;
	return 0;
}

/* ---- GPU classes --------------------------------------------------------- */

#define G_PRO (HG_ECC | HG_REMAP | HG_PCIE | HG_CLKEV | HG_RECOVERY | HG_HISTOGRAM)
#define G_B200 (G_PRO | HG_NVLINK | HG_NVLINK5 | HG_REPAIR | HG_SRAM | HG_FABRIC)

/* A class sets the facts a real board of that kind reports; later "gpu SEL"
 * lines override any of them. */
static const struct sim_class {
	const char *name;
	const char *full;
	unsigned int pci_device_id, pci_subsystem_id, arch, brand;
	unsigned int fans, power_default, power_min, power_max; /* W */
	unsigned int mem_total; /* MiB */
	unsigned int health, links, c2c_links, nvlink_version;
	unsigned long long events;
} classes[] = {
	{ "rtx-pro-6000", "NVIDIA RTX PRO 6000 Blackwell Workstation Edition", 0x2BB110DE, 0x204B10DE,
	  NVML_DEVICE_ARCH_BLACKWELL, NVML_BRAND_NVIDIA_RTX, 2, 600, 150, 600, 97887, G_PRO, 0, 0, 0,
	  nvmlEventTypeSingleBitEccError | nvmlEventTypeDoubleBitEccError | nvmlEventTypePState |
		  nvmlEventTypeXidCriticalError | nvmlEventTypeClock | nvmlEventTypeGpuUnavailableError |
		  nvmlEventTypeGpuRecoveryAction },
	{ "rtx-5090", "NVIDIA GeForce RTX 5090", 0x2B8510DE, 0x20A510DE, NVML_DEVICE_ARCH_BLACKWELL,
	  NVML_BRAND_GEFORCE, 2, 575, 400, 600, 32607, HG_REMAP_PHANTOM | HG_PCIE | HG_CLKEV | HG_RECOVERY, 0, 0, 0,
	  nvmlEventTypePState | nvmlEventTypeXidCriticalError | nvmlEventTypeClock | nvmlEventTypeGpuUnavailableError |
		  nvmlEventTypeGpuRecoveryAction },
	{ "b200", "NVIDIA B200", 0x290110DE, 0x199910DE, NVML_DEVICE_ARCH_BLACKWELL, NVML_BRAND_NVIDIA, 0, 1000, 200,
	  1000, 183359, G_B200, 18, 0, NVML_NVLINK_VERSION_5_0,
	  nvmlEventTypeSingleBitEccError | nvmlEventTypeDoubleBitEccError | nvmlEventTypePState |
		  nvmlEventTypeXidCriticalError | nvmlEventTypeClock | nvmlEventTypeGpuUnavailableError |
		  nvmlEventTypeGpuRecoveryAction | nvmlEventTypeDramRetirementEvent | nvmlEventTypeDramRetirementFailure },
	{ "gb200", "NVIDIA GB200", 0x294110DE, 0x199910DE, NVML_DEVICE_ARCH_BLACKWELL, NVML_BRAND_NVIDIA, 0, 1200, 200,
	  1200, 189471, G_B200 | HG_C2C, 18, 2, NVML_NVLINK_VERSION_5_0,
	  nvmlEventTypeSingleBitEccError | nvmlEventTypeDoubleBitEccError | nvmlEventTypePState |
		  nvmlEventTypeXidCriticalError | nvmlEventTypeClock | nvmlEventTypeGpuUnavailableError |
		  nvmlEventTypeGpuRecoveryAction | nvmlEventTypeDramRetirementEvent | nvmlEventTypeDramRetirementFailure },
	{ "h100", "NVIDIA H100 80GB HBM3", 0x233010DE, 0x16C110DE, NVML_DEVICE_ARCH_HOPPER, NVML_BRAND_NVIDIA, 0, 700,
	  200, 700, 81559, G_PRO | HG_NVLINK | HG_NVLINK_LEGACY, 18, 0, NVML_NVLINK_VERSION_4_0,
	  nvmlEventTypeSingleBitEccError | nvmlEventTypeDoubleBitEccError | nvmlEventTypePState |
		  nvmlEventTypeXidCriticalError | nvmlEventTypeClock | nvmlEventTypeDramRetirementEvent |
		  nvmlEventTypeDramRetirementFailure },
};

static void set_nvlink_version(struct nvmlDevice_st *d, unsigned int v)
{
	int l;

	for (l = 0; l < SIM_MAX_LINKS; l++)
		d->tr[M_L0 + l * LF_COUNT + LF_version].def = v;
}

int sim_health_class(struct nvmlDevice_st *d, const char *name)
{
	size_t i;

	for (i = 0; i < sizeof(classes) / sizeof(classes[0]); i++) {
		const struct sim_class *c = &classes[i];
		if (strcasecmp(c->name, name) != 0)
			continue;
		snprintf(d->name, sizeof(d->name), "%s", c->full);
		d->pci_device_id = c->pci_device_id;
		d->pci_subsystem_id = c->pci_subsystem_id;
		d->arch = c->arch;
		d->brand = c->brand;
		d->fans = c->fans;
		d->p_default = c->power_default * 1000;
		d->p_min = c->power_min * 1000;
		d->p_max = c->power_max * 1000;
		d->mem_total = (unsigned long long)c->mem_total << 20;
		d->health = c->health;
		d->links = c->links;
		d->c2c_links = c->c2c_links;
		d->supported_events = c->events;
		if (c->nvlink_version != 0)
			set_nvlink_version(d, c->nvlink_version);
		return 0;
	}
	return -1;
}

void sim_health_defaults(struct nvmlDevice_st *d)
{
	int m;

	for (m = M_H0; m < M_COUNT; m++)
		d->tr[m].def = sim_health_default(m);
	d->health = G_PRO;
	d->links = 0;
	d->c2c_links = 0;
}

/* ---- values -------------------------------------------------------------- */

static unsigned long long u64(double v)
{
	if (!(v > 0))
		return 0;
	if (v >= 18446744073709551615.0)
		return ~0ULL;
	return (unsigned long long)(v + 0.5);
}

/* ber packs a bit error rate as the driver does: mantissa (bits 8-11) x
 * 10^-exponent (bits 0-7). 0 stays 0. */
static unsigned long long ber(double v)
{
	unsigned long long mant;
	int e = 0;

	if (!(v > 0))
		return 0;
	/* the smallest exponent that brings the mantissa to >= 1 (no libm) */
	while (v < 0.95 && e < 255) {
		v *= 10;
		e++;
	}
	mant = (unsigned long long)(v + 0.5);
	if (mant < 1)
		mant = 1;
	if (mant > 15)
		mant = 15;
	return (mant << NVML_NVLINK_BER_MANTISSA_SHIFT) | (unsigned long long)e;
}

/* supported reports whether d answers quantity h; *phantom: it answers, but 0. */
static int supported(const struct nvmlDevice_st *d, const struct hdef *h, int64_t now, int *phantom)
{
	*phantom = 0;
	if (d->health & h->group) {
		/* ECC counters need ECC on (the mode fields answer either way). */
		if (h->group == HG_ECC && h != &hf[HF_ecc_current] && h != &hf[HF_ecc_pending] &&
		    sim_eval(d, M_H0 + HF_ecc_current, now) < 0.5)
			return 0;
		return 1;
	}
	if (h->group == HG_REMAP && (d->health & HG_REMAP_PHANTOM)) {
		*phantom = 1;
		return 1;
	}
	return 0;
}

static void put(nvmlFieldValue_t *v, int type, double x)
{
	if (type == T_U) {
		unsigned long long u = u64(x);
		v->valueType = NVML_VALUE_TYPE_UNSIGNED_INT;
		v->value.uiVal = u > 0xffffffffULL ? 0xffffffffu : (unsigned int)u;
	} else {
		v->valueType = NVML_VALUE_TYPE_UNSIGNED_LONG_LONG;
		v->value.ullVal = type == T_B ? ber(x) : u64(x);
	}
}

/* find_id returns the index of field id's definition in defs[0..n), or -1. */
static int find_id(const struct hdef *defs, int n, unsigned int id)
{
	int i;

	for (i = 0; i < n; i++)
		if (defs[i].id == id)
			return i;
	return -1;
}

nvmlReturn_t sim_health_field(const struct nvmlDevice_st *d, nvmlFieldValue_t *v, int64_t now)
{
	unsigned int id = v->fieldId;
	int i = -1, l = -1, c = -1, phantom;
	const struct hdef *h;

	/* A GPU-level counter (hf[i]), a per-link NVLink one (lf[l]) or a
	   per-link C2C one (cf[c]). */
	if (id == 0)
		return NVML_ERROR_NOT_SUPPORTED;
	if ((i = find_id(hf, HF_COUNT, id)) >= 0)
		h = &hf[i];
	else if ((l = find_id(lf, LF_COUNT, id)) >= 0)
		h = &lf[l];
	else if ((c = find_id(cf, CF_COUNT, id)) >= 0)
		h = &cf[c];
	else
		return NVML_ERROR_NOT_SUPPORTED;
	if (!supported(d, h, now, &phantom))
		return NVML_ERROR_NOT_SUPPORTED;
	if (i >= 0) {
		if (i == HF_nvlink_count)
			put(v, h->type, d->links);
		else if (i == HF_c2c_count)
			put(v, h->type, d->c2c_links);
		else
			put(v, h->type, phantom ? 0 : sim_eval(d, M_H0 + i, now));
		return NVML_SUCCESS;
	}
	if (l >= 0) {
		if (v->scopeId == 0xffffffffu && h->group == HG_NVLINK5 && h->type != T_B) {
			double sum = 0;
			unsigned int k;
			for (k = 0; k < d->links; k++)
				sum += (double)u64(sim_eval(d, M_L0 + (int)k * LF_COUNT + l, now));
			put(v, h->type, sum);
			return NVML_SUCCESS;
		}
		if (v->scopeId >= d->links)
			return NVML_ERROR_INVALID_ARGUMENT;
		put(v, h->type, sim_eval(d, M_L0 + (int)v->scopeId * LF_COUNT + l, now));
		return NVML_SUCCESS;
	}
	if (v->scopeId >= d->c2c_links)
		return NVML_ERROR_INVALID_ARGUMENT;
	put(v, h->type, sim_eval(d, M_C0 + (int)v->scopeId * CF_COUNT + c, now));
	return NVML_SUCCESS;
}

static double hv(const struct nvmlDevice_st *d, int i, int64_t now)
{
	return sim_eval(d, M_H0 + i, now);
}

/* ---- getters ------------------------------------------------------------- */

/* GROUP checks the GPU supports group g. */
#define GROUP(g)                                        \
	do {                                            \
		if (!(d->health & (g)))                 \
			return NVML_ERROR_NOT_SUPPORTED; \
	} while (0)

/* LINK checks the GPU supports group g and has link l. */
#define LINK(g, l)                                      \
	do {                                            \
		GROUP(g);                               \
		if ((l) >= d->links)                    \
			return NVML_ERROR_INVALID_ARGUMENT; \
	} while (0)

nvmlReturn_t nvmlDeviceGetNvLinkState(nvmlDevice_t device, unsigned int link, nvmlEnableState_t *isActive)
{
	ENTER(nvmlDeviceGetNvLinkState);
	NEED(isActive);
	LINK(HG_NVLINK, link);
	*isActive = u64(sim_eval(d, M_L0 + (int)link * LF_COUNT + LF_state, now)) == NVML_NVLINK_STATE_ACTIVE ?
			    NVML_FEATURE_ENABLED :
			    NVML_FEATURE_DISABLED;
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetNvLinkVersion(nvmlDevice_t device, unsigned int link, unsigned int *version)
{
	ENTER(nvmlDeviceGetNvLinkVersion);
	NEED(version);
	LINK(HG_NVLINK, link);
	*version = (unsigned int)u64(sim_eval(d, M_L0 + (int)link * LF_COUNT + LF_version, now));
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetNvLinkErrorCounter(nvmlDevice_t device, unsigned int link, nvmlNvLinkErrorCounter_t counter,
					     unsigned long long *counterValue)
{
	static const int lfs[NVML_NVLINK_ERROR_COUNT] = {
		[NVML_NVLINK_ERROR_DL_REPLAY] = LF_dl_replay,	  [NVML_NVLINK_ERROR_DL_RECOVERY] = LF_dl_recovery,
		[NVML_NVLINK_ERROR_DL_CRC_FLIT] = LF_dl_crc_flit, [NVML_NVLINK_ERROR_DL_CRC_DATA] = LF_dl_crc_data,
		[NVML_NVLINK_ERROR_DL_ECC_DATA] = LF_dl_ecc_data,
	};

	ENTER(nvmlDeviceGetNvLinkErrorCounter);
	NEED(counterValue);
	LINK(HG_NVLINK_LEGACY, link);
	if ((unsigned int)counter >= NVML_NVLINK_ERROR_COUNT)
		return NVML_ERROR_INVALID_ARGUMENT;
	*counterValue = u64(sim_eval(d, M_L0 + (int)link * LF_COUNT + lfs[counter], now));
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetRowRemapperHistogram(nvmlDevice_t device, nvmlRowRemapperHistogramValues_t *values)
{
	ENTER(nvmlDeviceGetRowRemapperHistogram);
	NEED(values);
	GROUP(HG_HISTOGRAM);
	values->max = (unsigned int)u64(hv(d, HF_hist_max, now));
	values->high = (unsigned int)u64(hv(d, HF_hist_high, now));
	values->partial = (unsigned int)u64(hv(d, HF_hist_partial, now));
	values->low = (unsigned int)u64(hv(d, HF_hist_low, now));
	values->none = (unsigned int)u64(hv(d, HF_hist_none, now));
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetRemappedRows(nvmlDevice_t device, unsigned int *corrRows, unsigned int *uncRows,
				       unsigned int *isPending, unsigned int *failureOccurred)
{
	int phantom;

	ENTER(nvmlDeviceGetRemappedRows);
	NEED(corrRows);
	NEED(uncRows);
	NEED(isPending);
	NEED(failureOccurred);
	if (!supported(d, &hf[HF_remap_cor], now, &phantom))
		return NVML_ERROR_NOT_SUPPORTED;
	*corrRows = phantom ? 0 : (unsigned int)u64(hv(d, HF_remap_cor, now));
	*uncRows = phantom ? 0 : (unsigned int)u64(hv(d, HF_remap_unc, now));
	*isPending = phantom ? 0 : (unsigned int)u64(hv(d, HF_remap_pending, now));
	*failureOccurred = phantom ? 0 : (unsigned int)u64(hv(d, HF_remap_failure, now));
	return NVML_SUCCESS;
}

#ifndef SIMNVML_OLD_DRIVER
nvmlReturn_t nvmlDeviceGetRepairStatus(nvmlDevice_t device, nvmlRepairStatus_t *repairStatus)
{
	ENTER(nvmlDeviceGetRepairStatus);
	NEED_VERSION(repairStatus, nvmlRepairStatus_v1);
	GROUP(HG_REPAIR);
	repairStatus->bChannelRepairPending = (unsigned int)u64(hv(d, HF_channel_repair_pending, now));
	repairStatus->bTpcRepairPending = (unsigned int)u64(hv(d, HF_tpc_repair_pending, now));
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetUnrepairableMemoryFlag_v1(nvmlDevice_t device,
						     nvmlUnrepairableMemoryStatus_v1_t *unrepairableMemoryStatus)
{
	ENTER(nvmlDeviceGetUnrepairableMemoryFlag_v1);
	NEED(unrepairableMemoryStatus);
	GROUP(HG_REPAIR);
	unrepairableMemoryStatus->bUnrepairableMemory = (unsigned int)u64(hv(d, HF_unrepairable, now));
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetSramEccErrorStatus(nvmlDevice_t device, nvmlEccSramErrorStatus_t *status)
{
	unsigned int version;

	ENTER(nvmlDeviceGetSramEccErrorStatus);
	NEED_VERSION(status, nvmlEccSramErrorStatus_v1);
	GROUP(HG_SRAM);
	version = status->version;
	memset(status, 0, sizeof(*status));
	status->version = version;
	status->volatileCor = u64(hv(d, HF_sram_vol_cor, now));
	status->volatileUncSecDed = u64(hv(d, HF_sram_vol_unc, now));
	status->aggregateCor = u64(hv(d, HF_sram_agg_cor, now));
	status->aggregateUncSecDed = u64(hv(d, HF_sram_agg_unc, now));
	status->bThresholdExceeded = (unsigned int)u64(hv(d, HF_sram_threshold, now));
	return NVML_SUCCESS;
}

/* The NVLink fabric (HG_FABRIC): the state, status, health mask and summary
 * over time ("gpu 0 fabric_state 2", "at 30s gpu 0 fabric_health_mask
 * 0x1a9a"); one unicast-pointer clique, fabric_clique; the cluster UUID
 * every byte 0x5a. fabric_info answers the three calls into out, for the
 * versions the call takes (SIM_FABRIC_*; the versioned call's struct by its
 * version field): a struct version the driver does not know
 * (fabric_versions), ARGUMENT_VERSION_MISMATCH. Each struct gets the fields
 * it has. A call whose every version the driver does not know is not
 * exported (FABRIC_CALL); one resolved before the scenario was loaded (an
 * executable's start-up relocations: test/csan) answers FUNCTION_NOT_FOUND. */
static nvmlReturn_t fabric_info(const struct nvmlDevice_st *d, int64_t now, unsigned int takes, void *out)
{
	nvmlGpuFabricInfo_t *o1 = out;
	nvmlGpuFabricInfo_v2_t *o2 = out;
	nvmlGpuFabricInfo_v3_t *o3 = out;
	nvmlGpuFabricInfo_v4_t *o4 = out;
	unsigned int v = takes;

	if (!(g_host.fabric & takes))
		return NVML_ERROR_FUNCTION_NOT_FOUND;
	NEED(out);
	if (takes == (SIM_FABRIC_V2 | SIM_FABRIC_V3)) {
		v = o2->version == nvmlGpuFabricInfo_v2 ? SIM_FABRIC_V2 : o2->version == nvmlGpuFabricInfo_v3 ? SIM_FABRIC_V3 : 0;
		if (!(g_host.fabric & v))
			return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
	}
	GROUP(HG_FABRIC);
/* H reads the fabric quantity q; FILL zeroes the struct o and sets what
 * every version has. */
#define H(q) u64(hv(d, HF_fabric_##q, now))
#define FILL(o)                                                                    \
	(memset(o, 0, sizeof(*o)), memset(o->clusterUuid, 0x5a, sizeof(o->clusterUuid)), \
	 o->status = (nvmlReturn_t)H(status), o->state = (nvmlGpuFabricState_t)H(state))
	switch (v) {
	case SIM_FABRIC_V1:
		FILL(o1);
		o1->cliqueId = (unsigned int)H(clique);
		break;
	case SIM_FABRIC_V2:
		FILL(o2);
		o2->version = nvmlGpuFabricInfo_v2;
		o2->cliqueId = (unsigned int)H(clique);
		o2->healthMask = (unsigned int)H(health_mask);
		break;
	case SIM_FABRIC_V3:
		FILL(o3);
		o3->version = nvmlGpuFabricInfo_v3;
		o3->cliqueId = (unsigned int)H(clique);
		o3->healthMask = (unsigned int)H(health_mask);
		o3->healthSummary = (unsigned char)H(health_summary);
		break;
	default: /* SIM_FABRIC_V4 */
		FILL(o4);
		o4->numCliques = 1;
		o4->cliques[0].type = NVML_GPU_FABRIC_CLIQUE_TYPE_UNICAST_POINTER;
		o4->cliques[0].id = (unsigned int)H(clique);
		o4->healthMask = (unsigned int)H(health_mask);
		o4->healthSummary = (unsigned char)H(health_summary);
		break;
	}
#undef FILL
#undef H
	return NVML_SUCCESS;
}

/* FABRIC_CALL defines the fabric call name, taking the versions takes, as
 * a GNU indirect function: its resolver gives the implementation only where
 * the driver knows one of those versions, and NULL otherwise, which dlsym
 * (go-nvml's LookupSymbol, sampler/batch.c) reports as a symbol the library
 * lacks, as a real R535's lacks the _v4 and versioned calls. A caller that
 * calls it anyway jumps to address 0 and dies, as a process calling a
 * symbol the real driver lacks does ("symbol lookup error"). The resolver
 * runs inside the dynamic linker, at each dlsym and the first call of a
 * lazy binding (after nvmlInit loaded the scenario), or in an executable's
 * start-up relocations before the sanitizers start: it reads one word.
 * Before the scenario is loaded g_host.fabric is 0 (fabric_versions names
 * at least one): every call is given, and so is one a non-PIE executable
 * bound at start-up (its dlsym may return that PLT stub). */
#define FABRIC_CALL(name, type, takes)                                                         \
	static nvmlReturn_t name##_impl(nvmlDevice_t device, type *info)                        \
	{                                                                                      \
		ENTER(name);                                                                   \
		return fabric_info(d, now, takes, info);                                       \
	}                                                                                      \
	__attribute__((no_sanitize("address", "undefined"))) static nvmlReturn_t (*name##_resolve(void))(nvmlDevice_t, type *) \
	{                                                                                      \
		unsigned int v = __atomic_load_n(&g_host.fabric, __ATOMIC_RELAXED);            \
		return v == 0 || (v & (takes)) ? name##_impl : NULL;                           \
	}                                                                                      \
	nvmlReturn_t name(nvmlDevice_t, type *) __attribute__((ifunc(#name "_resolve")))

FABRIC_CALL(nvmlDeviceGetGpuFabricInfo_v4, nvmlGpuFabricInfo_v4_t, SIM_FABRIC_V4);
FABRIC_CALL(nvmlDeviceGetGpuFabricInfoV, nvmlGpuFabricInfoV_t, SIM_FABRIC_V2 | SIM_FABRIC_V3);
/* The original call, all an R535 driver has: no health mask or summary. */
FABRIC_CALL(nvmlDeviceGetGpuFabricInfo, nvmlGpuFabricInfo_t, SIM_FABRIC_V1);
#undef FABRIC_CALL
#endif
