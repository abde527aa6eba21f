// batch: every NVML call of one GPU sample in one cgo call. batch.c knows
// no getter: the Go side describes each call once (sampler/batch.go's
// callFn, built from reading.Table's rows: the function, how it is called, the size and version of the
// struct it fills and where its values are in it, from go-nvml's types) in a
// gt_lib, with the library's function for each; gt_batch_run makes the
// planned ones in call order. A new getter whose signature has one of the
// shapes below is data, not C. The library is the driver's (its functions
// looked up with gt_sym) or, in tests, fakenvml's.
#ifndef GPU_TELEMETRY_BATCH_H
#define GPU_TELEMETRY_BATCH_H

#include <stdint.h>

#include "nvml_abi.h"

#define GT_MAXFIELDS 64 // the field readings a sample can batch (sampler's maxFields)
#define GT_MAXCALLS 64  // the calls of a sample: one bit each in plan (sampler's numCalls at most)
#define GT_MAXVALS 10   // the values one call gives (sampler's maxVals)
#define GT_MAXOUT 640   // bytes of the struct a call fills (sampler's maxOut)

#define GT_FIELDS 0 // call 0: nvmlDeviceGetFieldValues, the batched fields

// How a getter is called (gt_call.shape: reading.Shape's values); out is a
// zeroed buffer.
enum {
	GT_SHAPE_OUT,	  // f(dev, out)
	GT_SHAPE_ARG_OUT, // f(dev, arg, out)
	GT_SHAPE_OUT_OUT, // f(dev, out, out + GT_MAXOUT / 2): the values are in the first
};

#define GT_NOT_RUN (-1)
#define GT_LOCK_TIMEOUT (-2)

// gt_call describes one getter call of a sample.
struct gt_call {
	void *fn; // the NVML function (gt_sym); NULL: absent, never called
	uint32_t shape, arg;
	uint32_t size;	  // bytes of the struct out points to (at most GT_MAXOUT)
	uint32_t version; // if not 0, written at offset 0 as NVML_STRUCT_VERSION(size, version)
	uint32_t nvals;
	uint32_t off[GT_MAXVALS];   // value i: its offset in out
	uint32_t width[GT_MAXVALS]; // and its size: 1, 4 or 8 bytes, unsigned
};

// gt_lib is one library's calls: its GetFieldValues and each getter call
// of a sample (calls[GT_FIELDS] is not used). Filled once, before the first
// batch on it, and never changed.
struct gt_lib {
	void *fields; // nvmlDeviceGetFieldValues; NULL: absent, never called
	int32_t ncalls;
	struct gt_call calls[GT_MAXCALLS];
};

struct gt_batch {
	const struct gt_lib *lib; // the calls; set before the first gt_batch_run
	int32_t cur;            // call in flight + 1, 0 none (read by Go while the batch runs)
	uint32_t field_wait_ms; // longest wait for the process-wide field lock
	uint64_t plan;
	uint64_t fallback;              // calls added to plan when GT_FIELDS fails as a whole
	uint64_t field_fallback[GT_MAXFIELDS]; // call added to plan when field i alone is refused
	// older[c]: the call added to plan when the driver does not know call c
	// (function not found, struct version unknown) or the GPU does not
	// support it: an older driver's call of the same readings, later in
	// call order, made in the same sample.
	uint64_t older[GT_MAXCALLS];
	int32_t ret[GT_MAXCALLS];
	int32_t nfields;
	struct gt_nvml_field_value fields[GT_MAXFIELDS];
	uint64_t v[GT_MAXCALLS][GT_MAXVALS]; // each getter call's values
};

// A device handle: the driver's nvmlDevice_t, or a fake's number.
typedef uintptr_t gt_dev;

// gt_sym returns the driver's NVML function named a, else the one named b
// (an older version; NULL: none), else NULL.
void *gt_sym(const char *a, const char *b);

// gt_batch_handle returns the driver's device handle of index, or 0.
gt_dev gt_batch_handle(unsigned int index);

// gt_batch_fields makes one GetFieldValues call of lib on dev under the
// field lock (GT_LOCK_TIMEOUT: not had within wait_ms), storing cur_val in
// *cur (if not NULL) once the lock is had: a call waiting for the lock is
// not in flight.
int32_t gt_batch_fields(const struct gt_lib *lib, gt_dev dev, int32_t n, struct gt_nvml_field_value *f, uint32_t wait_ms,
			int32_t *cur, int32_t cur_val);

// gt_batch_run makes the planned calls of b->lib on dev; none after the GPU
// said it is lost (GetFieldValues as a whole, one of its entries, or a getter).
void gt_batch_run(gt_dev dev, struct gt_batch *b);

#endif
