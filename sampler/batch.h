// batch: every NVML call of one GPU sample in one cgo call. The call
// numbering and order match sampler/batch.go; NVML's structs come from
// nvml_abi.h.
#ifndef GPU_TELEMETRY_BATCH_H
#define GPU_TELEMETRY_BATCH_H

#include <stdint.h>

#include "nvml_abi.h"

#define GT_MAXFANS 8
#define GT_MAXFIELDS 64 // the field readings a sample can batch (sampler's maxFields)

enum {
	GT_FIELDS, GT_TEMP, GT_POWERLIM, GT_PSTATE, GT_CLK_GFX, GT_CLK_SM, GT_CLK_MEM, GT_UTIL,
	GT_MEMV2, GT_MEM, GT_REASONS, GT_THROTTLE, GT_FANSPEED1, GT_ENC, GT_DEC, GT_PCIEGEN,
	GT_PCIEWIDTH, GT_THERMAL, GT_POWER, GT_ENFORCED, GT_ENERGY, GT_REPLAY,
	GT_FANSPEED, GT_TARGET = GT_FANSPEED + GT_MAXFANS, GT_NCALLS = GT_TARGET + GT_MAXFANS
};

#define GT_NOT_RUN (-1)
#define GT_LOCK_TIMEOUT (-2)

struct gt_batch {
	int32_t cur;            // call in flight + 1, 0 none (read by Go while the batch runs)
	uint32_t field_wait_ms; // longest wait for the process-wide field lock
	uint64_t plan;
	uint64_t fallback;              // calls added to plan when GT_FIELDS fails as a whole
	uint64_t field_fallback[GT_MAXFIELDS]; // call added to plan when field i alone is refused
	int32_t ret[GT_NCALLS];
	int32_t nfields;
	struct gt_nvml_field_value fields[GT_MAXFIELDS];
	uint32_t temp, power_lim, pstate, clk[3], util_gpu, util_mem, fan1, enc, dec, pcie_gen, pcie_width;
	uint32_t th_count;
	int32_t th_controller, th_current, th_target;
	uint32_t power, enforced, replay;
	uint64_t mem_used, reasons, energy;
	uint32_t fan[GT_MAXFANS], target[GT_MAXFANS];
};

// gt_batch_handle returns the NVML device handle of index, or NULL.
void *gt_batch_handle(unsigned int index);

// gt_batch_fields makes one GetFieldValues call on dev under the field lock
// (GT_LOCK_TIMEOUT: not had within wait_ms).
int32_t gt_batch_fields(void *dev, int32_t n, struct gt_nvml_field_value *f, uint32_t wait_ms);

// gt_batch_run makes the planned calls on dev.
void gt_batch_run(void *dev, struct gt_batch *b);

#endif
