package sampler

/*
#cgo LDFLAGS: -ldl -lpthread
#include <stdlib.h>
#include "batch.h"
*/
import "C"

import (
	"errors"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpu-telemetry/gpu-telemetry/reading"
	"github.com/gpu-telemetry/gpu-telemetry/sampler/nvmlapi"
)

// nativeExec makes a sample's calls in one cgo call (batch.c). The batch
// struct lives in C memory so the C side can publish the call in flight
// while Go reads it from another goroutine.
type nativeExec struct {
	dev C.gt_dev
	b   *C.struct_gt_batch
}

// The Go and C numbering and codes must agree (a difference does not compile).
// This is the one pin of nvml_abi.h's codes against NVML (go-nvml's constants
// are generated from nvml.h); its structs are pinned by test/csan/harness.c.
var (
	_ = [1]struct{}{}[int(C.GT_MAXCALLS)-maxCalls]
	_ = [1]struct{}{}[int(C.GT_MAXFIELDS)-maxFields]
	_ = [1]struct{}{}[int(C.GT_MAXVALS)-maxVals]
	_ = [1]struct{}{}[int(C.GT_MAXOUT)-maxOut]
	_ = [1]struct{}{}[int(C.GT_FIELDS)-int(cFields)]
	_ = [1]struct{}{}[int(C.GT_SHAPE_OUT)-int(reading.ShapeOut)]
	_ = [1]struct{}{}[int(C.GT_SHAPE_ARG_OUT)-int(reading.ShapeArgOut)]
	_ = [1]struct{}{}[int(C.GT_SHAPE_OUT_OUT)-int(reading.ShapeOutOut)]
	_ = [1]struct{}{}[int(C.GT_NOT_RUN)-retNotRun]
	_ = [1]struct{}{}[int(C.GT_LOCK_TIMEOUT)-retLockTimeout]
	_ = [1]struct{}{}[int(C.GT_NVML_SUCCESS)-int(nvml.SUCCESS)]
	_ = [1]struct{}{}[int(C.GT_NVML_ERROR_NOT_SUPPORTED)-int(nvml.ERROR_NOT_SUPPORTED)]
	_ = [1]struct{}{}[int(C.GT_NVML_ERROR_TIMEOUT)-int(nvml.ERROR_TIMEOUT)]
	_ = [1]struct{}{}[int(C.GT_NVML_ERROR_FUNCTION_NOT_FOUND)-int(nvml.ERROR_FUNCTION_NOT_FOUND)]
	_ = [1]struct{}{}[int(C.GT_NVML_ERROR_GPU_IS_LOST)-int(nvml.ERROR_GPU_IS_LOST)]
	_ = [1]struct{}{}[int(C.GT_NVML_ERROR_ARGUMENT_VERSION_MISMATCH)-int(nvml.ERROR_ARGUMENT_VERSION_MISMATCH)]
)

// native is a library's side of the batch: its calls (batch.h's gt_lib, in
// C memory) and its device handles.
type native struct {
	lib *C.struct_gt_lib
	nvmlapi.Native
}

// newNative describes callFn's calls with the library's C functions (NULL
// where it lacks one: never called).
func newNative(l Library) *native {
	n := l.Native()
	cl := (*C.struct_gt_lib)(C.calloc(1, C.size_t(unsafe.Sizeof(C.struct_gt_lib{}))))
	cl.fields = n.Symbol(fnInfo[FnFieldValues].symbol, 0)
	cl.ncalls = C.int32_t(numCalls)
	for c := cFields + 1; c < numCalls; c++ {
		cd := &callFn[c]
		cc := &cd.cc
		x := &cl.calls[c]
		x.fn = n.Symbol(fnInfo[cd.fn].symbol, cc.shape)
		x.shape, x.arg, x.size, x.version = C.uint32_t(cc.shape), C.uint32_t(cc.arg), C.uint32_t(cc.size), C.uint32_t(cc.version)
		x.nvals = C.uint32_t(len(cc.vals))
		for i, v := range cc.vals {
			x.off[i], x.width[i] = C.uint32_t(v.off), C.uint32_t(v.size)
		}
	}
	return &native{lib: cl, Native: n}
}

// Native implements Library: dlsym in the library go-nvml loaded.
func (n *NVML) Native() nvmlapi.Native {
	return nvmlapi.Native{
		Symbol: func(name string, _ reading.Shape) unsafe.Pointer {
			s := C.CString(name)
			defer C.free(unsafe.Pointer(s))
			return C.gt_sym(s, nil)
		},
		Handle: func(i int) uintptr { return uintptr(C.gt_batch_handle(C.uint(i))) },
	}
}

func newNativeExec(n *native, index int, fieldWait time.Duration) (*nativeExec, error) {
	dev := n.Handle(index)
	if dev == 0 {
		return nil, errors.New("no NVML handle for the GPU")
	}
	b := (*C.struct_gt_batch)(C.calloc(1, C.size_t(unsafe.Sizeof(C.struct_gt_batch{}))))
	b.lib = n.lib
	b.field_wait_ms = C.uint32_t(max(fieldWait/time.Millisecond, 1))
	return &nativeExec{dev: C.gt_dev(dev), b: b}, nil
}

// Field values are passed to C as they are (the health counters' call) or
// copied whole (the batch's).
var _ = [1]struct{}{}[unsafe.Sizeof(nvml.FieldValue{})-unsafe.Sizeof(C.struct_gt_nvml_field_value{})]

// fields makes one GetFieldValues call (fv not empty) outside the batch,
// under the field lock, storing fn in *cur once the lock is had; false: not
// had within FieldWait (another GPU is stuck in it).
func (x *nativeExec) fields(fv []nvml.FieldValue, cur *atomic.Int32, fn Fn) (nvml.Return, bool) {
	r := C.gt_batch_fields(x.b.lib, x.dev, C.int32_t(len(fv)), (*C.struct_gt_nvml_field_value)(unsafe.Pointer(unsafe.SliceData(fv))), x.b.field_wait_ms,
		(*C.int32_t)(unsafe.Pointer(cur)), C.int32_t(fn))
	if int(r) == retLockTimeout {
		return 0, false
	}
	return nvml.Return(r), true
}

// current returns the call in flight + 1, or 0; safe from any goroutine.
func (x *nativeExec) current() int32 {
	return atomic.LoadInt32((*int32)(unsafe.Pointer(&x.b.cur)))
}

// run makes r's calls (r.plan, then r.fallback, r.fieldFallback and r.older
// when raw says), recording every result in r.ret; none after
// NVML_ERROR_GPU_IS_LOST (the field batch's, an entry's or a getter's).
func (x *nativeExec) run(r *raw) {
	b := x.b
	b.plan, b.fallback = C.uint64_t(r.plan), C.uint64_t(r.fallback)
	b.older = *(*[maxCalls]C.uint64_t)(unsafe.Pointer(&r.older))
	for i := range b.ret {
		b.ret[i] = C.GT_NOT_RUN
	}
	b.nfields = C.int32_t(r.nfields)
	for i := 0; i < r.nfields; i++ {
		b.fields[i] = *(*C.struct_gt_nvml_field_value)(unsafe.Pointer(&r.fields[i]))
		b.field_fallback[i] = C.uint64_t(r.fieldFallback[i])
	}
	C.gt_batch_run(x.dev, b)
	r.ret = *(*[maxCalls]int32)(unsafe.Pointer(&b.ret))
	r.plan = uint64(b.plan) // the fallback calls were added if the batch failed
	for i := 0; i < r.nfields; i++ {
		r.fields[i] = *(*nvml.FieldValue)(unsafe.Pointer(&b.fields[i]))
	}
	for c := cFields + 1; c < numCalls; c++ {
		if r.plan&(1<<c) != 0 {
			r.v[c] = *(*[maxVals]uint64)(unsafe.Pointer(&b.v[c]))
		}
	}
}
