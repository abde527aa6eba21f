// evthread: waits on an NVML event set on a plain pthread and hands each event
// to Go through a socket, so no goroutine ever sits inside a long cgo call.
#ifndef GPU_TELEMETRY_EVTHREAD_H
#define GPU_TELEMETRY_EVTHREAD_H

#include <stdint.h>

// Record kinds.
#define GT_EV_EVENT 0 // an event: index, type, data
#define GT_EV_ERROR 1 // nvmlEventSetWait failed with ret; the thread then ends

// gt_events_start's results besides NVML's return codes.
#define GT_EV_NO_SYMBOL (-1) // the library lacks an event-set function
#define GT_EV_NO_THREAD (-2) // the thread could not be started

// One record as sent over the socket (SOCK_SEQPACKET: one record per
// message). Go decodes it through this struct.
struct gt_event {
	int32_t kind;
	int32_t index; // GPU index, -1 when the device matched none
	int32_t ret;   // NVML return code for GT_EV_ERROR
	int32_t pad;
	uint64_t type;
	uint64_t data;
};

// gt_events_start registers the n GPUs (NVML indexes and event masks; a zero
// mask is skipped) on a new event set and starts the waiting thread, which
// writes struct gt_event records to fd. It returns 0, an NVML return code
// (nvmlEventSetCreate failed, or NOT_SUPPORTED: no GPU could be registered),
// GT_EV_NO_SYMBOL or GT_EV_NO_THREAD. registered[i] gets the mask actually
// registered for GPU i.
//
// From a successful start on, the thread owns fd. It ends after a failed wait
// (one GT_EV_ERROR record), when the peer shuts down its sending side or
// closes (noticed within the 1 s wait), or when a send fails. Ending, it frees
// the set and then closes fd as its last use of NVML or fd: the peer reading
// end-of-file knows that the set is freed and the thread is out of NVML.
int gt_events_start(const int *indexes, const uint64_t *masks, uint64_t *registered, int n, int fd);

// gt_events_running returns how many event threads have not ended yet (they
// may be inside NVML: nvmlShutdown must wait for them).
int gt_events_running(void);

#endif
