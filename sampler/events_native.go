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
	// opstate is how the GPU operational events' subscription went
	// (evthread.h's GT_OP_*, or the NVML code of the refusal).
	opstate int
	// partial is why the registration left types out otherwise than as
	// not supported (evthread.c's *why); nil when it did not.
	partial error
}

// watchNative opens a set for GPU i's types want, with uuid (its UUID, ""
// when unknown) for its operational events.
func (h *Host) watchNative(i int, want uint64, uuid string) (EventStream, error) {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_SEQPACKET|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("event socket: %w", err)
	}
	closeBoth := func(err error) (EventStream, error) {
		syscall.Close(fds[0])
		syscall.Close(fds[1])
		return nil, err
	}
	if err := syscall.SetNonblock(fds[0], true); err != nil {
		return closeBoth(fmt.Errorf("event socket: %w", err))
	}
	idx, mask, cuuid := C.int(h.GPUs[i].Info().Index), C.uint64_t(want), C.CString(uuid)
	defer C.free(unsafe.Pointer(cuuid))
	var reg C.uint64_t
	var opstate, why C.int
	if ret := C.gt_events_start(&idx, &mask, &cuuid, &reg, 1, C.int(fds[1]), &opstate, &why); ret != 0 {
		return closeBoth(startError(ret, why))
	}
	e := &nativeEvents{f: os.NewFile(uintptr(fds[0]), "nvml-events"), gpus: h.GPUs, masks: make([]uint64, len(h.GPUs)), opstate: int(opstate)}
	e.masks[i] = uint64(reg)
	if why != C.GT_NVML_SUCCESS { // registered, some types left out otherwise than as not supported
		e.partial = fmt.Errorf("register the GPU's NVML events: %s (registered: %s)", retText(nvml.Return(why)), EventTypeNames(e.masks[i]))
	}
	return e, nil
}

// startError is gt_events_start's failure ret (why: the failed call's code
// for GT_EV_NOT_REGISTERED). Only the GPUs' answer that they support none
// of the types, and a driver without event sets, are final: a registration
// that failed otherwise (a GPU lost, an unknown error) is a failed open,
// counted and retried.
func startError(ret, why C.int) error {
	switch ret {
	case C.GT_EV_NO_SYMBOL:
		return errNoEventSets
	case C.GT_EV_NO_THREAD:
		return errors.New("cannot start the event thread")
	case C.GT_EV_NONE_SUPPORTED:
		return errNoneRegistered
	case C.GT_EV_NOT_REGISTERED:
		return fmt.Errorf("register the GPU's NVML events: %s", retText(nvml.Return(why)))
	case C.GT_NVML_ERROR_NOT_SUPPORTED:
		return fmt.Errorf("%w (nvmlEventSetCreate: %s)", errNoEventSets, retText(nvml.Return(ret)))
	}
	return fmt.Errorf("nvmlEventSetCreate: %s", retText(nvml.Return(ret)))
}

func (e *nativeEvents) Masks() []uint64 { return e.masks }

func (e *nativeEvents) unregistered() error { return e.partial }

func (e *nativeEvents) opEvents() error {
	switch e.opstate {
	case C.GT_OP_REGISTERED:
		return nil
	case C.GT_OP_NO_SYMBOL:
		return errNoOpEvents
	}
	return fmt.Errorf("nvmlEventSetRegisterGpuOperationalEvents_v1: %s", retText(nvml.Return(e.opstate)))
}

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
	if r.op != 0 {
		return makeOpEvent(e.gpus, int(r.index), opRecordOf(r)), nil
	}
	return makeEvent(e.gpus, int(r.index), uint64(r._type), uint64(r.data)), nil
}

// opRecordOf copies the operational event of record r.
func opRecordOf(r *C.struct_gt_event) opRecord {
	w := &r.w
	o := opRecord{
		Severity: uint32(w.severity), LogLevel: uint32(w.log_level), Category: uint32(w.category_id),
		Attributes: uint32(w.attributes), GroupAttributes: uint32(w.group_attributes),
		ModuleEventCode: uint32(w.module_event_code), Scope: uint32(w.scope), Originator: uint32(w.originator),
		ModuleInstance: uint32(w.module_instance), Chiplet: uint32(w.chiplet_id),
		GPUInstance: uint32(w.gpu_instance_id), ComputeInstance: uint32(w.compute_instance_id), CperSize: uint32(w.group_cper_size),
		GroupSize: uint8(w.group_size), GroupIndex: uint8(w.group_index),
		GroupCursor: uint64(w.group_cursor), Sequence: uint64(w.instance_id), TimestampUsec: uint64(w.timestamp_usec),
		TraceID:      uint64(w.trace_id),
		SourceModule: C.GoStringN(&w.source_module[0], C.int(len(w.source_module))),
		NContexts:    uint32(r.ncontext),
	}
	for i := range min(int(o.NContexts), len(r.ctx)) {
		c := &r.ctx[i]
		in := &c.info
		o.Contexts = append(o.Contexts, opContext{Ret: int32(c.ret), Type: uint32(in.nvml_type), SourceType: uint32(in.source_type),
			Size: uint32(in.data_size), Version: uint16(in.data_format_version), HasXid: c.has_xid != 0, Xid: uint32(c.xid)})
	}
	return o
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
