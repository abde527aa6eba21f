package sampler

/*
#cgo LDFLAGS: -ldl -lpthread
#include <stdint.h>
#include <stdlib.h>
#include "evthread.h"
*/
import "C"

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

// nativeEvents reads the events evthread.c's thread sends over a socket. The
// read goes through Go's poller, so waiting costs no thread and no P; the
// NVML wait itself (which can hang during a GSP fault) runs on a thread the
// Go scheduler never sees.
type nativeEvents struct {
	f     *os.File
	alive *C.int32_t // 1 while the C thread runs (C memory: it may outlive us)
	gpus  []*GPU
	masks []uint64
	buf   [int(unsafe.Sizeof(C.struct_gt_event{}))]byte
}

func (h *Host) watchNative(want []uint64) (EventStream, error) {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_SEQPACKET|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("event socket: %w", err)
	}
	if err := syscall.SetNonblock(fds[0], true); err != nil {
		syscall.Close(fds[0])
		syscall.Close(fds[1])
		return nil, fmt.Errorf("event socket: %w", err)
	}
	n := len(h.GPUs)
	idx := make([]C.int, n)
	masks := make([]C.uint64_t, n)
	reg := make([]C.uint64_t, n)
	for i, g := range h.GPUs {
		idx[i] = C.int(g.Info().Index)
		masks[i] = C.uint64_t(want[i])
	}
	alive := (*C.int32_t)(C.calloc(1, C.size_t(unsafe.Sizeof(C.int32_t(0)))))
	var ret C.int
	if n > 0 {
		ret = C.gt_events_start(&idx[0], &masks[0], &reg[0], C.int(n), C.int(fds[1]), alive)
	}
	if ret != 0 {
		syscall.Close(fds[0])
		syscall.Close(fds[1])
		switch ret {
		case -1:
			return nil, errors.New("the driver lacks NVML event sets")
		case -2:
			return nil, errors.New("cannot start the event thread")
		case 3:
			return nil, errors.New("no GPU supports the watched NVML events")
		}
		return nil, fmt.Errorf("NVML event set: error %d", int(ret))
	}
	e := &nativeEvents{f: os.NewFile(uintptr(fds[0]), "nvml-events"), alive: alive, gpus: h.GPUs, masks: make([]uint64, n)}
	for i := range reg {
		e.masks[i] = uint64(reg[i])
	}
	return e, nil
}

func (e *nativeEvents) Masks() []uint64 { return e.masks }

func (e *nativeEvents) Close() { e.f.Close() }

// Wait waits until the C thread has freed the event set and exited, at most
// d. The thread notices the closed socket within its 1 s wait, unless
// NVML keeps it inside the wait (a GSP fault).
func (e *nativeEvents) Wait(d time.Duration) bool {
	deadline := time.Now().Add(d)
	for atomic.LoadInt32((*int32)(unsafe.Pointer(e.alive))) != 0 {
		if time.Now().After(deadline) {
			return false // stuck in NVML: the tiny state stays allocated
		}
		time.Sleep(10 * time.Millisecond)
	}
	C.free(unsafe.Pointer(e.alive))
	e.alive = nil
	return true
}

func (e *nativeEvents) Next() (reading.Event, error) {
	n, err := e.f.Read(e.buf[:])
	if err != nil {
		if errors.Is(err, os.ErrClosed) {
			return reading.Event{}, ErrEventsClosed
		}
		return reading.Event{}, fmt.Errorf("event socket: %w", err)
	}
	if n != len(e.buf) {
		return reading.Event{}, fmt.Errorf("event socket: short record (%d bytes)", n)
	}
	b := e.buf[:]
	kind := int32(binary.NativeEndian.Uint32(b[0:]))
	index := int32(binary.NativeEndian.Uint32(b[4:]))
	ret := int32(binary.NativeEndian.Uint32(b[8:]))
	if kind == 1 {
		return reading.Event{}, fmt.Errorf("nvmlEventSetWait: NVML error %d", ret)
	}
	return makeEvent(e.gpus, int(index), binary.NativeEndian.Uint64(b[16:]), binary.NativeEndian.Uint64(b[24:])), nil
}
