package sampler

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

	GetSupportedEventTypes() (uint64, nvml.Return)
	RegisterEvents(uint64, nvml.EventSet) nvml.Return
}

// Library is the part of go-nvml's nvml.Interface the sampler uses.
type Library interface {
	Init() nvml.Return
	Shutdown() nvml.Return
	SystemGetDriverVersion() (string, nvml.Return)
	SystemGetNVMLVersion() (string, nvml.Return)
	SystemGetCudaDriverVersion() (int, nvml.Return)
	DeviceGetCount() (int, nvml.Return)
	// DeviceGetHandleByIndex returns the device and the handle that event
	// data carries for it (to map an event back to its GPU).
	DeviceGetHandleByIndex(int) (Device, any, nvml.Return)
	EventSetCreate() (EventSet, nvml.Return)
	// LookupSymbol reports whether the loaded library has a symbol. Valid
	// after Init.
	LookupSymbol(string) error
}

// EventSet is the part of nvml.EventSet the sampler uses, plus a way to hand
// the underlying set to Device.RegisterEvents.
type EventSet interface {
	// Wait waits up to timeoutMs for one event. The handle in the result is
	// compared with the handles DeviceGetHandleByIndex returned.
	Wait(timeoutMs uint32) (handle any, eventType, eventData uint64, ret nvml.Return)
	Free() nvml.Return
	// Raw returns the nvml.EventSet to pass to Device.RegisterEvents.
	Raw() nvml.EventSet
}

// NVML adapts go-nvml's library to Library.
type NVML struct{ Lib nvml.Interface }

// NewNVML returns the real driver library (libnvidia-ml.so.1, loaded on Init).
func NewNVML() *NVML { return &NVML{Lib: nvml.New()} }

// Init implements Library.
func (n *NVML) Init() nvml.Return { return n.Lib.Init() }

// Shutdown implements Library.
func (n *NVML) Shutdown() nvml.Return { return n.Lib.Shutdown() }

// SystemGetDriverVersion implements Library.
func (n *NVML) SystemGetDriverVersion() (string, nvml.Return) {
	return n.Lib.SystemGetDriverVersion()
}

// SystemGetNVMLVersion implements Library.
func (n *NVML) SystemGetNVMLVersion() (string, nvml.Return) { return n.Lib.SystemGetNVMLVersion() }

// SystemGetCudaDriverVersion implements Library.
func (n *NVML) SystemGetCudaDriverVersion() (int, nvml.Return) {
	return n.Lib.SystemGetCudaDriverVersion()
}

// DeviceGetCount implements Library.
func (n *NVML) DeviceGetCount() (int, nvml.Return) { return n.Lib.DeviceGetCount() }

// DeviceGetHandleByIndex implements Library.
func (n *NVML) DeviceGetHandleByIndex(i int) (Device, any, nvml.Return) {
	d, ret := n.Lib.DeviceGetHandleByIndex(i)
	return d, d, ret
}

// EventSetCreate implements Library.
func (n *NVML) EventSetCreate() (EventSet, nvml.Return) {
	s, ret := n.Lib.EventSetCreate()
	if ret != nvml.SUCCESS {
		return nil, ret
	}
	return nvmlEventSet{s}, ret
}

// LookupSymbol implements Library.
func (n *NVML) LookupSymbol(name string) error { return n.Lib.Extensions().LookupSymbol(name) }

type nvmlEventSet struct{ s nvml.EventSet }

func (e nvmlEventSet) Wait(ms uint32) (any, uint64, uint64, nvml.Return) {
	d, ret := e.s.Wait(ms)
	return d.Device, d.EventType, d.EventData, ret
}
func (e nvmlEventSet) Free() nvml.Return  { return e.s.Free() }
func (e nvmlEventSet) Raw() nvml.EventSet { return e.s }
