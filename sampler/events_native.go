package sampler

/*
#cgo LDFLAGS: -ldl -lpthread
#include <stdint.h>
#include <stdlib.h>
#include "evthread.h"
#include "nvml_abi.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
	"time"
	"unsafe"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

// nativeEvents reads the records evthread.c's thread sends over a socket:
// waiting costs Go no thread (the poller), the NVML wait (which can hang
// in a GSP fault) runs on a thread Go never sees, and end-of-file means the
// thread has freed its set and left NVML.
type nativeEvents struct {
	f     *os.File
	gpus  []*GPU
	masks []uint64
	rec   C.struct_gt_event
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
	ret := C.gt_events_start(&idx[0], &masks[0], &reg[0], C.int(n), C.int(fds[1]))
	if ret != 0 {
		syscall.Close(fds[0])
		syscall.Close(fds[1])
		switch ret {
		case C.GT_EV_NO_SYMBOL:
			return nil, errNoEventSets
		case C.GT_EV_NO_THREAD:
			return nil, errors.New("cannot start the event thread")
		case C.GT_NVML_ERROR_NOT_SUPPORTED:
			return nil, errNoneRegistered
		}
		return nil, fmt.Errorf("nvmlEventSetCreate: %s", retText(nvml.Return(ret)))
	}
	e := &nativeEvents{f: os.NewFile(uintptr(fds[0]), "nvml-events"), gpus: h.GPUs, masks: make([]uint64, n)}
	for i := range reg {
		e.masks[i] = uint64(reg[i])
	}
	return e, nil
}

func (e *nativeEvents) Masks() []uint64 { return e.masks }

// Close shuts down Go's sending side: the thread sees it after its current
// wait and ends, which Next then reads as end-of-file.
func (e *nativeEvents) Close() {
	if rc, err := e.f.SyscallConn(); err == nil {
		rc.Control(func(fd uintptr) { syscall.Shutdown(int(fd), syscall.SHUT_WR) })
	}
}

func (e *nativeEvents) Next() (reading.Event, error) {
	buf := unsafe.Slice((*byte)(unsafe.Pointer(&e.rec)), unsafe.Sizeof(e.rec))
	n, err := e.f.Read(buf)
	if err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, os.ErrClosed) {
			e.f.Close()
			return reading.Event{}, ErrEventsClosed
		}
		return reading.Event{}, fmt.Errorf("event socket: %w", err)
	}
	if n != len(buf) {
		return reading.Event{}, fmt.Errorf("event socket: short record (%d bytes)", n)
	}
	r := &e.rec
	if r.kind == C.GT_EV_ERROR {
		return reading.Event{}, fmt.Errorf("nvmlEventSetWait: %s", retText(nvml.Return(r.ret)))
	}
	return makeEvent(e.gpus, int(r.index), uint64(r._type), uint64(r.data)), nil
}

// EventsIdle waits at most d until no event thread and no registration is
// left inside NVML (nvmlShutdown must not run before), and reports whether
// that happened.
func EventsIdle(d time.Duration) bool {
	deadline := time.Now().Add(d)
	for registering.Load() != 0 || C.gt_events_running() != 0 {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
	return true
}
