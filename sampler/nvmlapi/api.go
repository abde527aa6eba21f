// Package nvmlapi declares the part of go-nvml the sampler uses, as small
// interfaces: go-nvml's types satisfy them, and so do the fakes in fakenvml.
package nvmlapi

import "github.com/NVIDIA/go-nvml/pkg/nvml"

// Device is the part of go-nvml's nvml.Device the sampler uses. nvml.Device
// satisfies it; tests use small fakes.
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

	GetFieldValues([]nvml.FieldValue) nvml.Return
	GetTemperature(nvml.TemperatureSensors) (uint32, nvml.Return)
	GetPowerManagementLimit() (uint32, nvml.Return)
	GetPerformanceState() (nvml.Pstates, nvml.Return)
	GetClockInfo(nvml.ClockType) (uint32, nvml.Return)
	GetUtilizationRates() (nvml.Utilization, nvml.Return)
	GetMemoryInfo_v2() (nvml.Memory_v2, nvml.Return)
	GetMemoryInfo() (nvml.Memory, nvml.Return)
	GetCurrPcieLinkGeneration() (int, nvml.Return)
	GetCurrPcieLinkWidth() (int, nvml.Return)
	GetCurrentClocksEventReasons() (uint64, nvml.Return)
	GetCurrentClocksThrottleReasons() (uint64, nvml.Return)
	GetFanSpeed() (uint32, nvml.Return)
	GetFanSpeed_v2(int) (uint32, nvml.Return)
	GetTargetFanSpeed(int) (int, nvml.Return)
	GetThermalSettings(uint32) (nvml.GpuThermalSettings, nvml.Return)
	GetEncoderUtilization() (uint32, uint32, nvml.Return)
	GetDecoderUtilization() (uint32, uint32, nvml.Return)
	GetPowerUsage() (uint32, nvml.Return)
	GetEnforcedPowerLimit() (uint32, nvml.Return)
	GetTotalEnergyConsumption() (uint64, nvml.Return)
	GetPcieReplayCounter() (int, nvml.Return)
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
}
