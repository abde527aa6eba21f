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
)

// nativeExec makes a sample's calls in one cgo call (batch.c). The batch
// struct lives in C memory so the C side can publish the call in flight while
// Go reads it from another goroutine.
type nativeExec struct {
	dev unsafe.Pointer
	b   *C.struct_gt_batch
	th  batchThread // the GPU's C thread for a slow driver (batchthread.go)
	// threadFailed counts (and logs the first) a batch thread that could
	// not be started.
	threadFailed func()
}

// The Go and C numbering and codes must agree (a difference does not compile).
// This is the one pin of nvml_abi.h's codes against NVML (go-nvml's constants
// are generated from nvml.h); its structs are pinned by test/csan/harness.c.
var (
	_ = [1]struct{}{}[int(C.GT_NCALLS)-int(numCalls)]
	_ = [1]struct{}{}[int(C.GT_MAXFIELDS)-maxFields]
	_ = [1]struct{}{}[int(C.GT_MAXFANS)-reading.MaxFans]
	_ = [1]struct{}{}[int(C.GT_NOT_RUN)-retNotRun]
	_ = [1]struct{}{}[int(C.GT_LOCK_TIMEOUT)-retLockTimeout]
	_ = [1]struct{}{}[int(C.GT_NVML_SUCCESS)-int(nvml.SUCCESS)]
	_ = [1]struct{}{}[int(C.GT_NVML_ERROR_NOT_SUPPORTED)-int(nvml.ERROR_NOT_SUPPORTED)]
	_ = [1]struct{}{}[int(C.GT_NVML_ERROR_TIMEOUT)-int(nvml.ERROR_TIMEOUT)]
	_ = [1]struct{}{}[int(C.GT_NVML_ERROR_FUNCTION_NOT_FOUND)-int(nvml.ERROR_FUNCTION_NOT_FOUND)]
	_ = [1]struct{}{}[int(C.GT_NVML_ERROR_GPU_IS_LOST)-int(nvml.ERROR_GPU_IS_LOST)]
	_ = [1]struct{}{}[int(C.GT_NVML_TEMPERATURE_GPU)-int(nvml.TEMPERATURE_GPU)]
	_ = [1]struct{}{}[int(C.GT_NVML_CLOCK_GRAPHICS)-int(nvml.CLOCK_GRAPHICS)]
	_ = [1]struct{}{}[int(C.GT_NVML_CLOCK_SM)-int(nvml.CLOCK_SM)]
	_ = [1]struct{}{}[int(C.GT_NVML_CLOCK_MEM)-int(nvml.CLOCK_MEM)]
)

func newNativeExec(index int, fieldWait time.Duration, threadFailed func()) (*nativeExec, error) {
	dev := C.gt_batch_handle(C.uint(index))
	if dev == nil {
		return nil, errors.New("no NVML handle for the GPU")
	}
	b := (*C.struct_gt_batch)(C.calloc(1, C.size_t(unsafe.Sizeof(C.struct_gt_batch{}))))
	b.field_wait_ms = C.uint32_t(max(fieldWait/time.Millisecond, 1))
	return &nativeExec{dev: dev, b: b, threadFailed: threadFailed}, nil
}

// The health counters' field values are passed to C as they are.
var _ = [1]struct{}{}[unsafe.Sizeof(nvml.FieldValue{})-unsafe.Sizeof(C.struct_gt_nvml_field_value{})]

func (x *nativeExec) fields(fv []nvml.FieldValue) (nvml.Return, bool) {
	if len(fv) == 0 {
		return nvml.ERROR_INVALID_ARGUMENT, true
	}
	r := C.gt_batch_fields(x.dev, C.int32_t(len(fv)), (*C.struct_gt_nvml_field_value)(unsafe.Pointer(&fv[0])), x.b.field_wait_ms)
	if int(r) == retLockTimeout {
		return 0, false
	}
	return nvml.Return(r), true
}

func (x *nativeExec) current() int32 {
	return atomic.LoadInt32((*int32)(unsafe.Pointer(&x.b.cur)))
}

func (x *nativeExec) run(r *raw) {
	b := x.b
	b.plan, b.fallback = C.uint64_t(r.plan), C.uint64_t(r.fallback)
	for i := range b.ret {
		b.ret[i] = C.GT_NOT_RUN
	}
	b.nfields = C.int32_t(r.nfields)
	for i := 0; i < r.nfields; i++ {
		b.fields[i] = C.struct_gt_nvml_field_value{field_id: C.uint32_t(r.fields[i].FieldId)}
		b.field_fallback[i] = C.uint64_t(r.fieldFallback[i])
	}
	x.call() // C.gt_batch_run, directly or on the GPU's thread
	for i := range r.ret {
		r.ret[i] = int32(b.ret[i])
	}
	r.plan = uint64(b.plan) // the fallback calls were added if the batch failed
	for i := 0; i < r.nfields; i++ {
		f := &b.fields[i]
		r.fields[i].ValueType = uint32(f.value_type)
		r.fields[i].NvmlReturn = uint32(f.nvml_return)
		r.fields[i].Value = *(*[8]byte)(unsafe.Pointer(&f.value))
	}
	v := func(c call, x ...uint64) { copy(r.v[c][:], x) }
	v(cTemp, uint64(b.temp))
	v(cPowerLim, uint64(b.power_lim))
	v(cPState, uint64(b.pstate))
	for i := range 3 {
		v(cClockGfx+call(i), uint64(b.clk[i]))
	}
	v(cUtil, uint64(b.util_gpu), uint64(b.util_mem))
	v(cMemV2, uint64(b.mem_used))
	v(cMem, uint64(b.mem_used))
	v(cReasons, uint64(b.reasons))
	v(cThrottle, uint64(b.reasons))
	v(cFanSpeed1, uint64(b.fan1))
	v(cEnc, uint64(b.enc))
	v(cDec, uint64(b.dec))
	v(cPcieGen, uint64(b.pcie_gen))
	v(cPcieWidth, uint64(b.pcie_width))
	r.thCount = uint32(b.th_count)
	r.th = nvml.GpuThermalSettingsSensor{Controller: int32(b.th_controller), CurrentTemp: int32(b.th_current), Target: int32(b.th_target)}
	v(cPower, uint64(b.power))
	v(cEnforced, uint64(b.enforced))
	v(cEnergy, uint64(b.energy))
	v(cReplay, uint64(b.replay))
	for i := range reading.MaxFans {
		v(cFanSpeed+call(i), uint64(b.fan[i]))
		v(cTarget+call(i), uint64(b.target[i]))
	}
}
