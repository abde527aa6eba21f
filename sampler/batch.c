// See batch.h. The driver's functions are looked up with dlsym in the library
// go-nvml loaded with RTLD_GLOBAL; the Go side plans only calls whose symbol
// exists, and a NULL pointer is still never called (recorded as function not
// found).
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <time.h>

#include "batch.h"

typedef void *dev_t_;
typedef int (*fn_fields)(dev_t_, int, struct gt_nvml_field_value *);

// Serializes GetFieldValues across GPUs (it has been seen to misbehave when
// called concurrently); waiters give up after field_wait_ms.
static pthread_mutex_t field_mu = PTHREAD_MUTEX_INITIALIZER;

void *gt_sym(const char *a, const char *b)
{
	void *p = dlsym(RTLD_DEFAULT, a);
	if (!p && b)
		p = dlsym(RTLD_DEFAULT, b);
	return p;
}

gt_dev gt_batch_handle(unsigned int index)
{
	int (*handle)(unsigned int, dev_t_ *) = gt_sym("nvmlDeviceGetHandleByIndex_v2", "nvmlDeviceGetHandleByIndex");
	dev_t_ d = NULL;
	if (!handle || handle(index, &d) != GT_NVML_SUCCESS)
		return 0;
	return (gt_dev)d;
}

// lock_fields takes the field lock, giving up after wait_ms on the monotonic
// clock (a timed lock on the wall clock would stretch when the clock steps).
static int lock_fields(uint32_t wait_ms)
{
	struct timespec end;
	clock_gettime(CLOCK_MONOTONIC, &end);
	long ns = end.tv_nsec + (long)(wait_ms % 1000) * 1000000L;
	end.tv_sec += wait_ms / 1000 + ns / 1000000000L;
	end.tv_nsec = ns % 1000000000L;
	return pthread_mutex_clocklock(&field_mu, CLOCK_MONOTONIC, &end) == 0;
}

// gt_batch_fields makes one GetFieldValues call, a batch's or outside one
// (the health counters), under the field lock, so that field calls stay
// serialized across GPUs.
int32_t gt_batch_fields(const struct gt_lib *lib, gt_dev dev, int32_t n, struct gt_nvml_field_value *f, uint32_t wait_ms,
			int32_t *cur, int32_t cur_val)
{
	int32_t r;
	if (!lib->fields)
		return GT_NVML_ERROR_FUNCTION_NOT_FOUND;
	if (!lock_fields(wait_ms))
		return GT_LOCK_TIMEOUT;
	if (cur)
		__atomic_store_n(cur, cur_val, __ATOMIC_RELEASE);
	r = ((fn_fields)lib->fields)((dev_t_)dev, n, f);
	pthread_mutex_unlock(&field_mu);
	return r;
}

#define PLANNED(c) (b->plan & (1ULL << (c)))

// The getter shapes. NVML's getters take enums and pointers to its structs;
// they are called through these (an enum is passed as an unsigned int, a
// struct pointer as any pointer: the same registers on every ABI Go runs on).
typedef int (*fn_out)(dev_t_, void *);
typedef int (*fn_arg_out)(dev_t_, unsigned int, void *);
typedef int (*fn_out_out)(dev_t_, void *, void *);

// call_getter makes call c into a zeroed struct (its version set) and copies
// its values out.
static int32_t call_getter(dev_t_ dev, const struct gt_call *c, uint64_t *v)
{
	union {
		unsigned char b[GT_MAXOUT];
		uint64_t align;
	} out;
	int32_t r;

	memset(&out, 0, sizeof(out));
	if (c->version) {
		uint32_t ver = GT_NVML_STRUCT_VERSION(c->size, c->version);
		memcpy(out.b, &ver, sizeof(ver));
	}
	switch (c->shape) {
	case GT_SHAPE_OUT:
		r = ((fn_out)c->fn)(dev, out.b);
		break;
	case GT_SHAPE_ARG_OUT:
		r = ((fn_arg_out)c->fn)(dev, c->arg, out.b);
		break;
	default:
		r = ((fn_out_out)c->fn)(dev, out.b, out.b + GT_MAXOUT / 2);
		break;
	}
	// A value is unsigned, 1 byte (the fabric's state), 4 or 8; NVML runs
	// on little-endian hosts only, so its bytes are x's low ones.
	for (uint32_t i = 0; i < c->nvals && i < GT_MAXVALS; i++) {
		uint32_t w = c->width[i];
		if ((w == 1 || w == 4 || w == 8) && c->off[i] <= GT_MAXOUT - w) {
			uint64_t x = 0;
			memcpy(&x, out.b + c->off[i], w);
			v[i] = x;
		}
	}
	return r;
}

void gt_batch_run(gt_dev dev, struct gt_batch *b)
{
	const struct gt_lib *lib = b->lib;
	if (PLANNED(GT_FIELDS)) {
		b->ret[GT_FIELDS] = gt_batch_fields(lib, dev, b->nfields, b->fields, b->field_wait_ms, &b->cur, GT_FIELDS + 1);
		int lost = b->ret[GT_FIELDS] == GT_NVML_ERROR_GPU_IS_LOST;
		if (b->ret[GT_FIELDS] != GT_NVML_SUCCESS) {
			b->plan |= b->fallback;
		} else {
			// A field the driver refused is read by its own call in
			// this same sample; one entry saying the GPU is lost
			// (the call as a whole succeeded) is the GPU lost, as
			// the Go side reads it (fieldEntry): nothing more is
			// called, not even the refused entries' fallbacks.
			for (int i = 0; i < b->nfields && i < GT_MAXFIELDS; i++) {
				if (b->fields[i].nvml_return == GT_NVML_ERROR_GPU_IS_LOST)
					lost = 1;
				else if (b->fields[i].nvml_return != GT_NVML_SUCCESS)
					b->plan |= b->field_fallback[i];
			}
		}
		if (lost) {
			__atomic_store_n(&b->cur, 0, __ATOMIC_RELEASE);
			return;
		}
	}
	// The getters in call order; after a lost GPU nothing more is called.
	for (int32_t c = GT_FIELDS + 1; c < lib->ncalls && c < GT_MAXCALLS; c++) {
		if (!PLANNED(c))
			continue;
		if (!lib->calls[c].fn) {
			b->ret[c] = GT_NVML_ERROR_FUNCTION_NOT_FOUND;
		} else {
			__atomic_store_n(&b->cur, c + 1, __ATOMIC_RELEASE);
			b->ret[c] = call_getter((dev_t_)dev, &lib->calls[c], b->v[c]);
			if (b->ret[c] == GT_NVML_ERROR_GPU_IS_LOST)
				break;
		}
		// A driver that does not know this call, or a GPU that does not
		// support it, makes an older driver's call of the same readings
		// now, not a sample later (the capability cache keeps the refused
		// call off until its re-probe: the older call stands in each
		// sample until then, and in the re-probe's own).
		if (b->ret[c] == GT_NVML_ERROR_FUNCTION_NOT_FOUND || b->ret[c] == GT_NVML_ERROR_ARGUMENT_VERSION_MISMATCH ||
		    b->ret[c] == GT_NVML_ERROR_NOT_SUPPORTED)
			b->plan |= b->older[c];
	}
	__atomic_store_n(&b->cur, 0, __ATOMIC_RELEASE);
}
