// evthread: waits on an NVML event set on a plain pthread and hands each event
// to Go through a socket, so no goroutine ever sits inside a long cgo call.
#ifndef GPU_TELEMETRY_EVTHREAD_H
#define GPU_TELEMETRY_EVTHREAD_H

#include <stdint.h>

#include "nvml_abi.h"

// Record kinds.
#define GT_EV_EVENT 0 // an event: index, type, data
#define GT_EV_ERROR 1 // nvmlEventSetWait failed with ret; the thread then ends

// gt_events_start's results besides NVML's return codes. No GPU could be
// registered: GT_EV_NONE_SUPPORTED when each refused every type as not
// supported (an answer about the GPUs, final), GT_EV_NOT_REGISTERED when a
// handle or a registration failed otherwise (GPU lost, unknown error: the
// caller opens a set again later), *why then being that call's NVML code.
#define GT_EV_NO_SYMBOL (-1)      // the library lacks an event-set function
#define GT_EV_NO_THREAD (-2)      // the thread could not be started
#define GT_EV_NONE_SUPPORTED (-3) // no GPU supports any of the types asked
#define GT_EV_NOT_REGISTERED (-4) // no GPU registered: a call failed (*why)

// gt_events_start's *opstate besides NVML's return codes (the first
// registration's refusal when no GPU took the subscription).
#define GT_OP_REGISTERED 0 // at least one GPU's operational events are subscribed
#define GT_OP_NO_SYMBOL (-1) // the driver lacks them (before R615)

// The most context records of an operational event read per record: all
// the driver reports up to this bound (NVML's events carry a few: a legacy
// Xid, the source's own records), its count (ncontext) says how many it
// had, and the Go side counts the rest as not read.
#define GT_EV_MAXCTX 32

// One context record of an operational event (nvmlEventSetGetContextInfo_v1,
// and for a legacy-Xid context nvmlEventSetGetGpuOperationalEventContextLegacyXid_v1).
struct gt_ev_context {
	int32_t ret; // the info call's NVML return code: the rest is valid only when 0
	struct gt_nvml_context_info info;
	uint32_t has_xid; // xid was decoded
	uint32_t xid;
};

// One record as sent over the socket (SOCK_SEQPACKET: one record per
// message). Go decodes it through this struct. op says which half is
// filled: an NVML event bit (type, data) or a GPU operational event (w, as
// nvmlEventSetWait_v3 gave it, and the context calls' records).
struct gt_event {
	int32_t kind;
	int32_t index; // GPU index, -1 when the device matched none
	int32_t ret;   // NVML return code for GT_EV_ERROR
	int32_t op;    // 1: a GPU operational event
	uint64_t type;
	uint64_t data;
	struct gt_nvml_wait_v3 w; // its source_module is not NUL-terminated when full
	uint32_t ncontext;
	struct gt_ev_context ctx[GT_EV_MAXCTX];
};

// gt_events_start registers the n GPUs (NVML indexes and event masks; a zero
// mask is skipped) on a new event set and starts the waiting thread, which
// writes struct gt_event records to fd. It returns 0, an NVML return code
// (nvmlEventSetCreate failed), GT_EV_NONE_SUPPORTED, GT_EV_NOT_REGISTERED
// (the failed call's NVML code in *why), GT_EV_NO_SYMBOL or GT_EV_NO_THREAD.
// registered[i] gets the mask actually registered for GPU i. On success too
// *why is the first handle or registration call that failed otherwise than
// NOT_SUPPORTED (a type left out that the GPU may support: the caller opens
// the set again later), GT_NVML_SUCCESS when none did. A GPU that says it is
// lost is not called again.
//
// From a successful start on, the thread owns fd. It ends after a failed wait
// (one GT_EV_ERROR record), when the peer shuts down its sending side or
// closes (noticed within the 1 s wait), or when a send fails. Ending, it frees
// the set and then closes fd as its last use of NVML or fd: the peer reading
// end-of-file knows that the set is freed and the thread is out of NVML.
//
// Where the driver has nvmlEventSetRegisterGpuOperationalEvents_v1 and
// nvmlEventSetWait_v3 (R615+), each registered GPU whose uuids[i] is given
// is also subscribed to its operational events (no filter) and the thread
// waits with nvmlEventSetWait_v3, matching an event's GPU by its UUID;
// *opstate says how that went (GT_OP_*, or the NVML code of the refusal).
// Without them the set is the event bits alone, waited on as before.
int gt_events_start(const int *indexes, const uint64_t *masks, const char *const *uuids, uint64_t *registered, int n, int fd,
		    int *opstate, int *why);

// gt_events_running returns how many event threads have not ended yet (they
// may be inside NVML: nvmlShutdown must wait for them).
int gt_events_running(void);

#endif
