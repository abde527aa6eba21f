// evthread: waits on an NVML event set on a plain pthread and hands each event
// to Go through a socket, so no goroutine ever sits inside a long cgo call.
#ifndef GPU_TELEMETRY_EVTHREAD_H
#define GPU_TELEMETRY_EVTHREAD_H

#include <stdint.h>

// One event as sent over the socket. kind: 0 event, 1 wait error (ret set).
struct gt_event {
	int32_t  kind;
	int32_t  index;  // GPU index, -1 when the device matched none
	int32_t  ret;    // NVML return code for kind 1
	int32_t  pad;
	uint64_t type;
	uint64_t data;
};

// gt_events_start registers the n GPUs (NVML indexes and event masks) on a new
// event set and starts the waiting thread, which writes struct gt_event
// records to fd. It returns 0, or an NVML return code (or -1: a symbol is
// missing, -2: the thread could not start). registered[i] gets the mask
// actually registered for GPU i.
// *alive is set to 1 before the thread starts and to 0 when it has freed the
// set and exited; the caller must keep it allocated until then (or forever if
// the thread stays stuck inside NVML).
int gt_events_start(const int *indexes, const uint64_t *masks, uint64_t *registered, int n, int fd, int32_t *alive);

#endif
