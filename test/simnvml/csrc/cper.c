/*
 * cper.c - CPER records behind nvmlSystemGetCPER_v1's cursor (driver R610+).
 *
 *   at 5 gpu 0 cper fatal [section pcie|nvidia|memory|processor|unknown] [corrupt]
 *
 * makes one record of that GPU visible from scenario time 5 on: a UEFI
 * CPER record (Appendix N: 128-byte header, one 72-byte section descriptor,
 * a 16-byte section body), record id 1000 + its order in the scenario, the
 * time stamp of when it appears. "corrupt" spoils its signature. A call
 * returns one record at a time: the handle counts the GPU's records
 * returned, so a later process passing the same handle resumes after them.
 * The old-driver build lacks the symbol (old_driver.txt).
 */
#include "sim.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#define SIM_MAX_CPER 64
#define CPER_LEN (128 + 72 + 16)

struct sim_cper {
	int64_t t;
	unsigned int gpu;
	unsigned int severity;
	const unsigned char *section; /* GUID as stored */
	int corrupt;
};

static struct sim_cper g_cpers[SIM_MAX_CPER];
static unsigned int g_ncpers;

/* GUIDs as stored (first three fields little-endian). */
static const unsigned char sec_pcie[16] = {0x54, 0xe9, 0x95, 0xd9, 0xc1, 0xbb, 0x0f, 0x43,
					   0xad, 0x91, 0xb4, 0x4d, 0xcb, 0x3c, 0x6f, 0x35};
static const unsigned char sec_nvidia[16] = {0xf2, 0x44, 0x52, 0x6d, 0x12, 0x27, 0xec, 0x11,
					     0xbe, 0xa7, 0xcb, 0x3f, 0xdb, 0x95, 0xc7, 0x86};
static const unsigned char sec_memory[16] = {0x14, 0x11, 0xbc, 0xa5, 0x64, 0x6f, 0xde, 0x4e,
					     0xb8, 0x63, 0x3e, 0x83, 0xed, 0x7c, 0x83, 0xb1};
static const unsigned char sec_processor[16] = {0xad, 0xcc, 0x76, 0x98, 0xb4, 0x47, 0xdb, 0x4b,
						0xb6, 0x5e, 0x16, 0xf1, 0x93, 0xc4, 0xf3, 0xdb};
static const unsigned char sec_unknown[16] = {0x67, 0x45, 0x23, 0x01, 0xab, 0x89, 0xef, 0xcd,
					      0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef};

static const struct {
	const char *name;
	unsigned int v;
} severities[] = {{"recoverable", 0}, {"fatal", 1}, {"corrected", 2}, {"informational", 3}};

int sim_stmt_cper(char *err, size_t errlen, uint32_t mask, int64_t t, char **tok, int n)
{
	struct sim_cper c = {.t = t, .severity = 1, .section = sec_nvidia};
	unsigned int g, k;
	int i;

	for (i = 1; i < n; i++) {
		int found = 0;
		for (k = 0; k < sizeof(severities) / sizeof(severities[0]); k++)
			if (strcmp(tok[i], severities[k].name) == 0) {
				c.severity = severities[k].v;
				found = 1;
			}
		if (found)
			continue;
		if (strcmp(tok[i], "corrupt") == 0) {
			c.corrupt = 1;
		} else if (strcmp(tok[i], "section") == 0 && i + 1 < n) {
			const char *s = tok[++i];
			if (strcmp(s, "pcie") == 0)
				c.section = sec_pcie;
			else if (strcmp(s, "nvidia") == 0)
				c.section = sec_nvidia;
			else if (strcmp(s, "memory") == 0)
				c.section = sec_memory;
			else if (strcmp(s, "processor") == 0)
				c.section = sec_processor;
			else if (strcmp(s, "unknown") == 0)
				c.section = sec_unknown;
			else {
				snprintf(err, errlen, "bad cper section \"%s\" (pcie, nvidia, memory, processor, unknown)", s);
				return -1;
			}
		} else {
			snprintf(err, errlen, "expected: cper [recoverable|fatal|corrected|informational] [section S] [corrupt], not \"%s\"", tok[i]);
			return -1;
		}
	}
	for (g = 0; g < g_host.ngpus; g++) {
		if (!(mask & (1u << g)))
			continue;
		if (g_ncpers >= SIM_MAX_CPER) {
			snprintf(err, errlen, "more than %d cper records", SIM_MAX_CPER);
			return -1;
		}
		c.gpu = g;
		g_cpers[g_ncpers++] = c;
	}
	return 0;
}

#ifndef SIMNVML_OLD_DRIVER

static void put16(unsigned char *p, unsigned int v)
{
	p[0] = v & 0xff;
	p[1] = (v >> 8) & 0xff;
}

static void put32(unsigned char *p, unsigned int v)
{
	put16(p, v & 0xffff);
	put16(p + 2, v >> 16);
}

static unsigned char bcd(int v)
{
	return (unsigned char)(((v / 10) << 4) | (v % 10));
}

static void fill_record(unsigned char *b, unsigned int idx)
{
	const struct sim_cper *c = &g_cpers[idx];
	time_t secs = (time_t)((c->t + g_t0 + g_real_offset) / 1000000000LL);
	struct tm tm;

	memset(b, 0, CPER_LEN);
	memcpy(b, c->corrupt ? "XPER" : "CPER", 4);
	put16(b + 4, 0x0101);
	put32(b + 6, 0xffffffffu);
	put16(b + 10, 1);
	put32(b + 12, c->severity);
	put32(b + 16, 1u << 1); /* time stamp valid */
	put32(b + 20, CPER_LEN);
	gmtime_r(&secs, &tm);
	b[24] = bcd(tm.tm_sec);
	b[25] = bcd(tm.tm_min);
	b[26] = bcd(tm.tm_hour);
	b[27] = 1; /* precise */
	b[28] = bcd(tm.tm_mday);
	b[29] = bcd(tm.tm_mon + 1);
	b[30] = bcd((tm.tm_year + 1900) % 100);
	b[31] = bcd((tm.tm_year + 1900) / 100);
	memcpy(b + 64, sec_nvidia, 16); /* creator */
	put32(b + 96, 1000 + idx);      /* record id, low half */
	/* the section descriptor */
	put32(b + 128, 128 + 72);
	put32(b + 132, 16);
	put16(b + 136, 0x0300);
	memcpy(b + 144, c->section, 16);
	put32(b + 176, c->severity);
}

nvmlReturn_t nvmlSystemGetCPER_v1(nvmlGetCPER_v1_t *cper)
{
	int64_t now;
	unsigned int i, k = 0, next = SIM_MAX_CPER;

	SIM_COUNT(nvmlSystemGetCPER_v1);
	if (!sim_initialized())
		return NVML_ERROR_UNINITIALIZED;
	if (cper == NULL || (cper->buffer == NULL && cper->bufferSize != 0))
		return NVML_ERROR_INVALID_ARGUMENT;
	if (!(cper->cursor.cperTypeMask & NVML_CPER_ACCESS_TYPE_GPU))
		return NVML_ERROR_INVALID_ARGUMENT;
	if (g_host.nonroot)
		return NVML_ERROR_NO_PERMISSION;
	now = sim_now();
	/* The handle is how many of this filter's records were returned. */
	for (i = 0; i < g_ncpers; i++) {
		const char *u = g_devs[g_cpers[i].gpu].uuid;
		if (cper->cursor.uuid[0] != '\0' && strcmp(cper->cursor.uuid, u) != 0)
			continue;
		if (k++ == cper->cursor.handle) {
			next = i;
			break;
		}
	}
	if (next == SIM_MAX_CPER || g_cpers[next].t > now) {
		cper->bufferSize = 0;
		return NVML_SUCCESS;
	}
	if (cper->buffer == NULL || cper->bufferSize < CPER_LEN) {
		cper->bufferSize = CPER_LEN;
		return NVML_ERROR_INSUFFICIENT_SIZE;
	}
	fill_record(cper->buffer, next);
	cper->bufferSize = CPER_LEN;
	cper->cursor.handle++;
	return NVML_SUCCESS;
}

#endif
