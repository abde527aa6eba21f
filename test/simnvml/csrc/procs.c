/*
 * procs.c - scripted processes per GPU ("gpu SEL proc PID ..." statements)
 * and nvmlDeviceGetProcessUtilization.
 *
 * The count-based "procs"/"gprocs" metrics of device.c invent PIDs; a "proc"
 * statement names a real PID (a test starts a process and scripts it onto a
 * GPU), with its kind, memory and SM/memory busy, from a time, for a while.
 * The table is filled while the scenario is parsed (under the init mutex) and
 * only read afterwards, so the hot path takes no lock.
 */
#include "sim.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SIM_MAX_PROCS 1024

struct sim_proc {
	unsigned int gpu;
	unsigned int pid;
	int kinds; /* SIM_PROC_COMPUTE | SIM_PROC_GRAPHICS */
	unsigned long long mem; /* bytes; ~0ULL: not available */
	int sm, memutil; /* %; -1: no utilization sample (idle) */
	int64_t from, until; /* ns since origin */
};

static struct sim_proc g_procs[SIM_MAX_PROCS];
static unsigned int g_nprocs;

static int perr_(char *err, size_t errlen, const char *msg, const char *word)
{
	snprintf(err, errlen, msg, word);
	return -1;
}

static int num_(const char *s, double lo, double hi, double *out)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (end == s || *end != '\0' || errno == ERANGE || !__builtin_isfinite(v) || v < lo || v > hi)
		return -1;
	*out = v;
	return 0;
}

/*
 * gpu SEL proc PID [compute|graphics|both] [mem MiB|na] [sm PCT] [memutil PCT] [for DURATION]
 * tok[0] is "proc". t is the statement's time.
 */
int sim_stmt_proc(char *err, size_t errlen, uint32_t mask, int64_t t, char **tok, int n)
{
	struct sim_proc p;
	double v;
	unsigned int g;
	int i;

	memset(&p, 0, sizeof(p));
	p.kinds = SIM_PROC_COMPUTE;
	p.mem = 256ULL << 20;
	p.sm = p.memutil = -1;
	p.from = t;
	p.until = SIM_NEVER;
	if (n < 2 || num_(tok[1], 1, 4194304, &v) != 0 || v != (double)(unsigned int)v)
		return perr_(err, errlen, "expected: [at T] gpu SEL proc PID [compute|graphics|both] [mem MiB|na] [sm PCT] [memutil PCT] [for DURATION]%s", "");
	p.pid = (unsigned int)v;
	for (i = 2; i < n; i++) {
		const char *w = tok[i];
		if (strcmp(w, "compute") == 0) {
			p.kinds = SIM_PROC_COMPUTE;
			continue;
		}
		if (strcmp(w, "graphics") == 0) {
			p.kinds = SIM_PROC_GRAPHICS;
			continue;
		}
		if (strcmp(w, "both") == 0) {
			p.kinds = SIM_PROC_COMPUTE | SIM_PROC_GRAPHICS;
			continue;
		}
		if (i + 1 >= n)
			return perr_(err, errlen, "proc: \"%s\" needs a value", w);
		if (strcmp(w, "mem") == 0) {
			if (strcmp(tok[i + 1], "na") == 0)
				p.mem = ~0ULL;
			else if (num_(tok[i + 1], 0, 1 << 30, &v) == 0)
				p.mem = (unsigned long long)(v * 1048576.0 + 0.5);
			else
				return perr_(err, errlen, "proc: bad memory \"%s\" (MiB or na)", tok[i + 1]);
		} else if (strcmp(w, "sm") == 0 || strcmp(w, "memutil") == 0) {
			if (num_(tok[i + 1], 0, 100, &v) != 0)
				return perr_(err, errlen, "proc: bad percentage \"%s\" (0..100)", tok[i + 1]);
			if (w[0] == 's')
				p.sm = (int)(v + 0.5);
			else
				p.memutil = (int)(v + 0.5);
		} else if (strcmp(w, "for") == 0) {
			int64_t d;
			if (sim_parse_duration(tok[i + 1], &d) != 0)
				return perr_(err, errlen, "proc: bad duration \"%s\"", tok[i + 1]);
			p.until = t + d;
		} else {
			return perr_(err, errlen, "proc: unknown word \"%s\"", w);
		}
		i++;
	}
	if (p.sm < 0 && p.memutil >= 0)
		p.sm = 0;
	if (p.memutil < 0 && p.sm >= 0)
		p.memutil = 0;
	for (g = 0; g < g_host.ngpus; g++) {
		if (!(mask & (1u << g)))
			continue;
		if (g_nprocs == SIM_MAX_PROCS)
			return perr_(err, errlen, "too many proc statements (max %s)", "1024");
		p.gpu = g;
		g_procs[g_nprocs++] = p;
	}
	return 0;
}

static int live(const struct sim_proc *p, const struct nvmlDevice_st *d, int64_t now)
{
	return p->gpu == d->index && now >= p->from && now < p->until;
}

unsigned int sim_procs_count(const struct nvmlDevice_st *d, int64_t now, int kind)
{
	unsigned int i, n = 0;

	for (i = 0; i < g_nprocs; i++)
		n += live(&g_procs[i], d, now) && (g_procs[i].kinds & kind);
	return n;
}

void sim_procs_fill(const struct nvmlDevice_st *d, int64_t now, int kind, void *infos, unsigned int first, int v1)
{
	unsigned int i, k = first;

	for (i = 0; i < g_nprocs; i++) {
		const struct sim_proc *p = &g_procs[i];
		if (!live(p, d, now) || !(p->kinds & kind))
			continue;
		if (v1) {
			nvmlProcessInfo_v1_t *o = (nvmlProcessInfo_v1_t *)infos + k;
			o->pid = p->pid;
			o->usedGpuMemory = p->mem;
		} else {
			nvmlProcessInfo_v2_t *o = (nvmlProcessInfo_v2_t *)infos + k;
			o->pid = p->pid;
			o->usedGpuMemory = p->mem;
			o->gpuInstanceId = 0xFFFFFFFFu;
			o->computeInstanceId = 0xFFFFFFFFu;
		}
		k++;
	}
}

/*
 * One sample per scripted process that ran (sm or memutil given), stamped with
 * the current wall-clock time in microseconds. Only samples newer than
 * lastSeenTimeStamp are returned; none: NVML_ERROR_NOT_FOUND, as the driver
 * does. utilization == NULL: count query (INSUFFICIENT_SIZE with the count).
 */
nvmlReturn_t nvmlDeviceGetProcessUtilization(nvmlDevice_t device, nvmlProcessUtilizationSample_t *utilization,
					     unsigned int *processSamplesCount, unsigned long long lastSeenTimeStamp)
{
	struct nvmlDevice_st *d;
	int64_t now;
	nvmlReturn_t rc;
	unsigned long long ts;
	unsigned int i, n = 0, k = 0;

	SIM_COUNT(nvmlDeviceGetProcessUtilization);
	rc = sim_dev_enter(FN_nvmlDeviceGetProcessUtilization, device, &d, &now);
	if (rc != NVML_SUCCESS)
		return rc;
	if (processSamplesCount == NULL)
		return NVML_ERROR_INVALID_ARGUMENT;
	ts = (unsigned long long)((now + g_t0 + g_real_offset) / 1000);
	if (ts > lastSeenTimeStamp)
		for (i = 0; i < g_nprocs; i++)
			n += live(&g_procs[i], d, now) && g_procs[i].sm >= 0;
	if (n == 0) {
		*processSamplesCount = 0;
		return NVML_ERROR_NOT_FOUND;
	}
	if (utilization == NULL || *processSamplesCount < n) {
		*processSamplesCount = n;
		return NVML_ERROR_INSUFFICIENT_SIZE;
	}
	for (i = 0; i < g_nprocs; i++) {
		const struct sim_proc *p = &g_procs[i];
		if (!live(p, d, now) || p->sm < 0)
			continue;
		memset(&utilization[k], 0, sizeof(utilization[k]));
		utilization[k].pid = p->pid;
		utilization[k].timeStamp = ts;
		utilization[k].smUtil = (unsigned int)p->sm;
		utilization[k].memUtil = (unsigned int)p->memutil;
		k++;
	}
	*processSamplesCount = k;
	return NVML_SUCCESS;
}
