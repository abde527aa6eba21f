package fakenvml

/*
#include <stdint.h>
#include <stdlib.h>

void *fake_sym(const char *name);
*/
import "C"

import (
	"runtime/cgo"
	"unsafe"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpu-telemetry/gpu-telemetry/sampler/nvmlapi"
)

// The fake's C side: NVML's C functions of a sample (cabi.c names them by
// their NVML symbols) over a Dev, so that the sampler's one executor
// (sampler/batch.c) calls a fake as it calls the driver. A device's C
// handle is a cgo.Handle of its Dev. Each call is counted, scripted and
// made to block under its NVML name less "nvmlDevice" (Dev.call), as the
// Go methods' calls are.

// Native implements nvmlapi.Library: the fake's C functions (a symbol
// Missing has none) and handles. Batches stay on the calling goroutine.
func (l *Lib) Native() nvmlapi.Native {
	return nvmlapi.Native{
		Symbol: func(name string) unsafe.Pointer {
			if l.Missing[name] {
				return nil
			}
			s := C.CString(name)
			defer C.free(unsafe.Pointer(s))
			return C.fake_sym(s)
		},
		Handle: func(i int) uintptr {
			if i < 0 || i >= len(l.Devs) {
				return 0
			}
			return l.Devs[i].handle()
		},
	}
}

// handle returns the Dev's C handle, made on first use.
func (d *Dev) handle() uintptr {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.h == 0 {
		d.h = cgo.NewHandle(d)
	}
	return uintptr(d.h)
}

func dev(h C.uintptr_t) *Dev { return cgo.Handle(h).Value().(*Dev) }

// ans answers getter fn of device h into out: the call is counted and
// scripted (answer), and get reads the value under the device's lock.
func ans[T any](h C.uintptr_t, out unsafe.Pointer, fn string, get func(*Dev) T) C.int {
	d := dev(h)
	v, r := answer(d, fn, func() T { return get(d) })
	*(*T)(out) = v
	return C.int(r)
}

// opt answers a getter a GPU may lack: NOT_SUPPORTED while get gives nil.
func opt[T any](h C.uintptr_t, out unsafe.Pointer, fn string, get func(*Dev) *T) C.int {
	d := dev(h)
	v, r := optional(d, fn, func() *T { return get(d) })
	*(*T)(out) = v
	return C.int(r)
}

//export fakeGetFieldValues
func fakeGetFieldValues(h C.uintptr_t, n C.int, v unsafe.Pointer) C.int {
	return C.int(dev(h).GetFieldValues(unsafe.Slice((*nvml.FieldValue)(v), int(n))))
}

//export fakeGetTemperature
func fakeGetTemperature(h C.uintptr_t, _ C.uint, out unsafe.Pointer) C.int {
	return ans(h, out, "GetTemperature", func(d *Dev) uint32 { return d.Temp })
}

//export fakeGetPowerManagementLimit
func fakeGetPowerManagementLimit(h C.uintptr_t, out unsafe.Pointer) C.int {
	return ans(h, out, "GetPowerManagementLimit", func(d *Dev) uint32 { return d.Limit })
}

//export fakeGetPerformanceState
func fakeGetPerformanceState(h C.uintptr_t, out unsafe.Pointer) C.int {
	return ans(h, out, "GetPerformanceState", func(d *Dev) nvml.Pstates { return d.Pstate })
}

//export fakeGetClockInfo
func fakeGetClockInfo(h C.uintptr_t, t C.uint, out unsafe.Pointer) C.int {
	return ans(h, out, "GetClockInfo", func(d *Dev) uint32 { return d.Clocks[nvml.ClockType(t)] })
}

//export fakeGetUtilizationRates
func fakeGetUtilizationRates(h C.uintptr_t, out unsafe.Pointer) C.int {
	return ans(h, out, "GetUtilizationRates", func(d *Dev) nvml.Utilization { return d.Util })
}

//export fakeGetMemoryInfo_v2
func fakeGetMemoryInfo_v2(h C.uintptr_t, out unsafe.Pointer) C.int {
	return ans(h, out, "GetMemoryInfo_v2", (*Dev).memoryV2)
}

//export fakeGetMemoryInfo
func fakeGetMemoryInfo(h C.uintptr_t, out unsafe.Pointer) C.int {
	return ans(h, out, "GetMemoryInfo", (*Dev).memory)
}

//export fakeGetCurrentClocksEventReasons
func fakeGetCurrentClocksEventReasons(h C.uintptr_t, out unsafe.Pointer) C.int {
	return ans(h, out, "GetCurrentClocksEventReasons", func(d *Dev) uint64 { return d.Throttle })
}

//export fakeGetCurrentClocksThrottleReasons
func fakeGetCurrentClocksThrottleReasons(h C.uintptr_t, out unsafe.Pointer) C.int {
	return ans(h, out, "GetCurrentClocksThrottleReasons", func(d *Dev) uint64 { return d.Throttle })
}

//export fakeGetFanSpeed
func fakeGetFanSpeed(h C.uintptr_t, out unsafe.Pointer) C.int {
	return ans(h, out, "GetFanSpeed", func(d *Dev) uint32 { return d.FanSpeed[0] })
}

// The encoder's and decoder's utilization; their sampling period (out2) is
// not read.
//
//export fakeGetEncoderUtilization
func fakeGetEncoderUtilization(h C.uintptr_t, out, _ unsafe.Pointer) C.int {
	return ans(h, out, "GetEncoderUtilization", func(d *Dev) uint32 { return d.Enc })
}

//export fakeGetDecoderUtilization
func fakeGetDecoderUtilization(h C.uintptr_t, out, _ unsafe.Pointer) C.int {
	return ans(h, out, "GetDecoderUtilization", func(d *Dev) uint32 { return d.Dec })
}

//export fakeGetCurrPcieLinkGeneration
func fakeGetCurrPcieLinkGeneration(h C.uintptr_t, out unsafe.Pointer) C.int {
	return ans(h, out, "GetCurrPcieLinkGeneration", func(d *Dev) uint32 { return uint32(d.Gen) })
}

//export fakeGetCurrPcieLinkWidth
func fakeGetCurrPcieLinkWidth(h C.uintptr_t, out unsafe.Pointer) C.int {
	return ans(h, out, "GetCurrPcieLinkWidth", func(d *Dev) uint32 { return uint32(d.Width) })
}

//export fakeGetThermalSettings
func fakeGetThermalSettings(h C.uintptr_t, _ C.uint, out unsafe.Pointer) C.int {
	return ans(h, out, "GetThermalSettings", func(d *Dev) nvml.GpuThermalSettings {
		return nvml.GpuThermalSettings{Count: 1, Sensor: [3]nvml.GpuThermalSettingsSensor{d.Sensor}}
	})
}

//export fakeGetSramEccErrorStatus
func fakeGetSramEccErrorStatus(h C.uintptr_t, out unsafe.Pointer) C.int {
	return opt(h, out, "GetSramEccErrorStatus", func(d *Dev) *nvml.EccSramErrorStatus { return d.SramEcc })
}

//export fakeGetRepairStatus
func fakeGetRepairStatus(h C.uintptr_t, out unsafe.Pointer) C.int {
	return opt(h, out, "GetRepairStatus", func(d *Dev) *nvml.RepairStatus { return d.Repair })
}

//export fakeGetUnrepairableMemoryFlag_v1
func fakeGetUnrepairableMemoryFlag_v1(h C.uintptr_t, out unsafe.Pointer) C.int {
	return opt(h, out, "GetUnrepairableMemoryFlag_v1", func(d *Dev) *nvml.UnrepairableMemoryStatus_v1 { return d.Unrepairable })
}

//export fakeGetPowerUsage
func fakeGetPowerUsage(h C.uintptr_t, out unsafe.Pointer) C.int {
	return ans(h, out, "GetPowerUsage", func(d *Dev) uint32 { return d.Power })
}

//export fakeGetEnforcedPowerLimit
func fakeGetEnforcedPowerLimit(h C.uintptr_t, out unsafe.Pointer) C.int {
	return ans(h, out, "GetEnforcedPowerLimit", func(d *Dev) uint32 { return d.Enforced })
}

//export fakeGetTotalEnergyConsumption
func fakeGetTotalEnergyConsumption(h C.uintptr_t, out unsafe.Pointer) C.int {
	return ans(h, out, "GetTotalEnergyConsumption", func(d *Dev) uint64 { return d.Energy })
}

//export fakeGetPcieReplayCounter
func fakeGetPcieReplayCounter(h C.uintptr_t, out unsafe.Pointer) C.int {
	return ans(h, out, "GetPcieReplayCounter", func(d *Dev) uint32 { return uint32(d.Replay) })
}

//export fakeGetFanSpeed_v2
func fakeGetFanSpeed_v2(h C.uintptr_t, fan C.uint, out unsafe.Pointer) C.int {
	return ans(h, out, "GetFanSpeed_v2", func(d *Dev) uint32 { return d.FanSpeed[fan] })
}

//export fakeGetTargetFanSpeed
func fakeGetTargetFanSpeed(h C.uintptr_t, fan C.uint, out unsafe.Pointer) C.int {
	return ans(h, out, "GetTargetFanSpeed", func(d *Dev) uint32 { return uint32(d.FanTarget[fan]) })
}
