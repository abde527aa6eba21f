// Package nvmlapi declares the part of go-nvml the sampler uses, as small
// interfaces: go-nvml's types satisfy them, and so do the fakes in fakenvml.
package nvmlapi

import (
	"unsafe"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

// Device is the part of go-nvml's nvml.Device the sampler calls from Go: the
// static facts, the slow tier's lists and counters. A sample's calls are made
// in C (Native). nvml.Device satisfies it; tests use small fakes.
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
	// DeviceGetHandleByIndex returns the device.
	DeviceGetHandleByIndex(int) (Device, nvml.Return)
	// LookupSymbol reports whether the loaded library has a symbol. Valid
	// after Init.
	LookupSymbol(string) error
	// Native is how the sample batch (sampler/batch.c) calls the library.
	// Valid after Init.
	Native() Native
}

// Native is how the sample batch, one cgo call a sample, calls a library:
// the C function of each NVML symbol and the C handle of each device.
type Native struct {
	// Symbol returns the C function of an NVML symbol, called with the
	// shape given (the driver's ignores it; a fake answers by it); nil when
	// the library lacks it.
	Symbol func(name string, shape reading.Shape) unsafe.Pointer
	// Handle returns device i's C handle; 0 when it cannot be had.
	Handle func(i int) uintptr
}
