// Package nvmlapi declares the part of go-nvml the sampler uses, as small
// interfaces: go-nvml's types satisfy them, and so do the fakes in fakenvml.
package nvmlapi

import (
	"unsafe"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

// Device is the part of go-nvml's nvml.Device the sampler calls from Go (a
// sample's calls are made in C: Native).
type Device interface {
	GetName() (string, nvml.Return)
	GetUUID() (string, nvml.Return)
	GetSerial() (string, nvml.Return)
	GetVbiosVersion() (string, nvml.Return)
	GetPciInfo() (nvml.PciInfo, nvml.Return)
	GetMinorNumber() (int, nvml.Return)
	GetNumFans() (int, nvml.Return)
	GetTemperatureThreshold(nvml.TemperatureThresholds) (uint32, nvml.Return)
	GetGspFirmwareVersion() (string, nvml.Return)
	GetGspFirmwareMode() (bool, bool, nvml.Return)
	GetPowerManagementDefaultLimit() (uint32, nvml.Return)

	GetFanSpeed() (uint32, nvml.Return)
	GetFanControlPolicy_v2(int) (nvml.FanControlPolicy, nvml.Return)
	GetComputeRunningProcesses() ([]nvml.ProcessInfo, nvml.Return)
	GetGraphicsRunningProcesses() ([]nvml.ProcessInfo, nvml.Return)
	GetProcessUtilization(lastSeenTimestamp uint64) ([]nvml.ProcessUtilizationSample, nvml.Return)

	GetSupportedEventTypes() (uint64, nvml.Return)

	GetRowRemapperHistogram() (nvml.RowRemapperHistogramValues, nvml.Return)
	GetNvLinkErrorCounter(link int, counter nvml.NvLinkErrorCounter) (uint64, nvml.Return)
}

// Library is the part of go-nvml's nvml.Interface the sampler uses.
type Library interface {
	Init() nvml.Return
	Shutdown() nvml.Return
	SystemGetDriverVersion() (string, nvml.Return)
	SystemGetNVMLVersion() (string, nvml.Return)
	SystemGetCudaDriverVersion() (int, nvml.Return)
	DeviceGetCount() (int, nvml.Return)
	DeviceGetHandleByIndex(int) (Device, nvml.Return)
	// LookupSymbol reports whether the loaded library has a symbol; Native
	// is how sampler/batch.c calls it. Both valid after Init.
	LookupSymbol(string) error
	Native() Native
}

// Native is how the sample batch calls a library: the C function of an
// NVML symbol called with a shape (a fake answers by it; nil: missing),
// and device i's C handle (0: none).
type Native struct {
	Symbol func(name string, shape reading.Shape) unsafe.Pointer
	Handle func(i int) uintptr
}
