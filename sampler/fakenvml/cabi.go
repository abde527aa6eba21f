package fakenvml

// #include <stdint.h>
import "C"

import (
	"runtime/cgo"
	"unsafe"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// The fake's C side: NVML's C functions of a sample, each named as NVML's
// with the prefix fake_ (Lib.Native finds them by that name), over a Dev,
// so that the sampler's one executor (sampler/batch.c) calls a fake as it
// calls the driver. A device's C handle is a cgo.Handle of its Dev. Each
// call is counted, scripted and made to block under its NVML name less
// "nvmlDevice" (Dev.call), as the Go methods' calls are.

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

// badVersion refuses a versioned struct (version v, its first field) whose
// version the caller did not set as NVML_STRUCT_VERSION(size, v), as NVML
// does: the call is counted and answers ARGUMENT_VERSION_MISMATCH. 0: the
// version is right.
func badVersion[T any](h C.uintptr_t, out unsafe.Pointer, fn string, v uint32) C.int {
	var z T
	if *(*uint32)(out) == uint32(unsafe.Sizeof(z))|v<<24 {
		return 0
	}
	dev(h).call(fn)
	return C.int(nvml.ERROR_ARGUMENT_VERSION_MISMATCH)
}

//export fake_nvmlDeviceGetFieldValues
func fake_nvmlDeviceGetFieldValues(h C.uintptr_t, n C.int, v unsafe.Pointer) C.int {
	return C.int(dev(h).GetFieldValues(unsafe.Slice((*nvml.FieldValue)(v), int(n))))
}

//export fake_nvmlDeviceGetTemperature
func fake_nvmlDeviceGetTemperature(h C.uintptr_t, _ C.uint, out unsafe.Pointer) C.int {
	return ans(h, out, "GetTemperature", func(d *Dev) uint32 { return d.Temp })
}

//export fake_nvmlDeviceGetPowerManagementLimit
func fake_nvmlDeviceGetPowerManagementLimit(h C.uintptr_t, out unsafe.Pointer) C.int {
	return ans(h, out, "GetPowerManagementLimit", func(d *Dev) uint32 { return d.Limit })
}

//export fake_nvmlDeviceGetPerformanceState
func fake_nvmlDeviceGetPerformanceState(h C.uintptr_t, out unsafe.Pointer) C.int {
	return ans(h, out, "GetPerformanceState", func(d *Dev) nvml.Pstates { return d.Pstate })
}

//export fake_nvmlDeviceGetClockInfo
func fake_nvmlDeviceGetClockInfo(h C.uintptr_t, t C.uint, out unsafe.Pointer) C.int {
	return ans(h, out, "GetClockInfo", func(d *Dev) uint32 { return d.Clocks[nvml.ClockType(t)] })
}

//export fake_nvmlDeviceGetUtilizationRates
func fake_nvmlDeviceGetUtilizationRates(h C.uintptr_t, out unsafe.Pointer) C.int {
	return ans(h, out, "GetUtilizationRates", func(d *Dev) nvml.Utilization { return d.Util })
}

//export fake_nvmlDeviceGetMemoryInfo_v2
func fake_nvmlDeviceGetMemoryInfo_v2(h C.uintptr_t, out unsafe.Pointer) C.int {
	if r := badVersion[nvml.Memory_v2](h, out, "GetMemoryInfo_v2", 2); r != 0 {
		return r
	}
	return ans(h, out, "GetMemoryInfo_v2", (*Dev).memoryV2)
}

//export fake_nvmlDeviceGetMemoryInfo
func fake_nvmlDeviceGetMemoryInfo(h C.uintptr_t, out unsafe.Pointer) C.int {
	return ans(h, out, "GetMemoryInfo", (*Dev).memory)
}

//export fake_nvmlDeviceGetCurrentClocksEventReasons
func fake_nvmlDeviceGetCurrentClocksEventReasons(h C.uintptr_t, out unsafe.Pointer) C.int {
	return ans(h, out, "GetCurrentClocksEventReasons", func(d *Dev) uint64 { return d.Throttle })
}

//export fake_nvmlDeviceGetCurrentClocksThrottleReasons
func fake_nvmlDeviceGetCurrentClocksThrottleReasons(h C.uintptr_t, out unsafe.Pointer) C.int {
	return ans(h, out, "GetCurrentClocksThrottleReasons", func(d *Dev) uint64 { return d.Throttle })
}

//export fake_nvmlDeviceGetFanSpeed
func fake_nvmlDeviceGetFanSpeed(h C.uintptr_t, out unsafe.Pointer) C.int {
	return ans(h, out, "GetFanSpeed", func(d *Dev) uint32 { return d.FanSpeed[0] })
}

// The encoder's and decoder's utilization; their sampling period (out2) is
// not read.
//
//export fake_nvmlDeviceGetEncoderUtilization
func fake_nvmlDeviceGetEncoderUtilization(h C.uintptr_t, out, _ unsafe.Pointer) C.int {
	return ans(h, out, "GetEncoderUtilization", func(d *Dev) uint32 { return d.Enc })
}

//export fake_nvmlDeviceGetDecoderUtilization
func fake_nvmlDeviceGetDecoderUtilization(h C.uintptr_t, out, _ unsafe.Pointer) C.int {
	return ans(h, out, "GetDecoderUtilization", func(d *Dev) uint32 { return d.Dec })
}

//export fake_nvmlDeviceGetCurrPcieLinkGeneration
func fake_nvmlDeviceGetCurrPcieLinkGeneration(h C.uintptr_t, out unsafe.Pointer) C.int {
	return ans(h, out, "GetCurrPcieLinkGeneration", func(d *Dev) uint32 { return uint32(d.Gen) })
}

//export fake_nvmlDeviceGetCurrPcieLinkWidth
func fake_nvmlDeviceGetCurrPcieLinkWidth(h C.uintptr_t, out unsafe.Pointer) C.int {
	return ans(h, out, "GetCurrPcieLinkWidth", func(d *Dev) uint32 { return uint32(d.Width) })
}

//export fake_nvmlDeviceGetThermalSettings
func fake_nvmlDeviceGetThermalSettings(h C.uintptr_t, _ C.uint, out unsafe.Pointer) C.int {
	return ans(h, out, "GetThermalSettings", func(d *Dev) nvml.GpuThermalSettings {
		return nvml.GpuThermalSettings{Count: 1, Sensor: [3]nvml.GpuThermalSettingsSensor{d.Sensor}}
	})
}

//export fake_nvmlDeviceGetSramEccErrorStatus
func fake_nvmlDeviceGetSramEccErrorStatus(h C.uintptr_t, out unsafe.Pointer) C.int {
	if r := badVersion[nvml.EccSramErrorStatus](h, out, "GetSramEccErrorStatus", 1); r != 0 {
		return r
	}
	return opt(h, out, "GetSramEccErrorStatus", func(d *Dev) *nvml.EccSramErrorStatus { return d.SramEcc })
}

//export fake_nvmlDeviceGetRepairStatus
func fake_nvmlDeviceGetRepairStatus(h C.uintptr_t, out unsafe.Pointer) C.int {
	if r := badVersion[nvml.RepairStatus](h, out, "GetRepairStatus", 1); r != 0 {
		return r
	}
	return opt(h, out, "GetRepairStatus", func(d *Dev) *nvml.RepairStatus { return d.Repair })
}

//export fake_nvmlDeviceGetUnrepairableMemoryFlag_v1
func fake_nvmlDeviceGetUnrepairableMemoryFlag_v1(h C.uintptr_t, out unsafe.Pointer) C.int {
	return opt(h, out, "GetUnrepairableMemoryFlag_v1", func(d *Dev) *nvml.UnrepairableMemoryStatus_v1 { return d.Unrepairable })
}

//export fake_nvmlDeviceGetPowerUsage
func fake_nvmlDeviceGetPowerUsage(h C.uintptr_t, out unsafe.Pointer) C.int {
	return ans(h, out, "GetPowerUsage", func(d *Dev) uint32 { return d.Power })
}

//export fake_nvmlDeviceGetEnforcedPowerLimit
func fake_nvmlDeviceGetEnforcedPowerLimit(h C.uintptr_t, out unsafe.Pointer) C.int {
	return ans(h, out, "GetEnforcedPowerLimit", func(d *Dev) uint32 { return d.Enforced })
}

//export fake_nvmlDeviceGetTotalEnergyConsumption
func fake_nvmlDeviceGetTotalEnergyConsumption(h C.uintptr_t, out unsafe.Pointer) C.int {
	return ans(h, out, "GetTotalEnergyConsumption", func(d *Dev) uint64 { return d.Energy })
}

//export fake_nvmlDeviceGetPcieReplayCounter
func fake_nvmlDeviceGetPcieReplayCounter(h C.uintptr_t, out unsafe.Pointer) C.int {
	return ans(h, out, "GetPcieReplayCounter", func(d *Dev) uint32 { return uint32(d.Replay) })
}

//export fake_nvmlDeviceGetFanSpeed_v2
func fake_nvmlDeviceGetFanSpeed_v2(h C.uintptr_t, fan C.uint, out unsafe.Pointer) C.int {
	return ans(h, out, "GetFanSpeed_v2", func(d *Dev) uint32 { return d.FanSpeed[fan] })
}

//export fake_nvmlDeviceGetTargetFanSpeed
func fake_nvmlDeviceGetTargetFanSpeed(h C.uintptr_t, fan C.uint, out unsafe.Pointer) C.int {
	return ans(h, out, "GetTargetFanSpeed", func(d *Dev) uint32 { return uint32(d.FanTarget[fan]) })
}
