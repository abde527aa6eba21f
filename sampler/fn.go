package sampler

// Fn identifies one NVML function the sampler calls. It indexes the capability
// cache and names the function a stuck call is in (NVML_HUNG(<function>,...)).
type Fn uint8

// The NVML functions the sampler uses.
const (
	FnNone Fn = iota
	FnInit
	FnGetCount
	FnGetHandle
	FnDriverVersion
	FnNVMLVersion
	FnCudaVersion
	FnName
	FnUUID
	FnSerial
	FnVbios
	FnPciInfo
	FnMinorNumber
	FnNumFans
	FnThreshold
	FnGspVersion
	FnGspMode
	FnDefaultLimit
	FnFieldValues
	FnTemperature
	FnPowerLimit
	FnPState
	FnClock
	FnUtilization
	FnMemoryInfoV2
	FnMemoryInfo
	FnPcieGen
	FnPcieWidth
	FnClocksEventReasons
	FnClocksThrottleReasons
	FnFanSpeedV2
	FnFanSpeed
	FnTargetFanSpeed
	FnThermalSettings
	FnEncoderUtil
	FnDecoderUtil
	FnPowerUsage
	FnEnforcedLimit
	FnEnergy
	FnPcieReplay
	FnFanPolicy
	FnSupportedEvents
	FnRegisterEvents
	FnEventSetCreate
	FnEventSetWait
	FnProcesses
	FnGraphicsProcesses
	FnProcessUtil
	FnHealthFields // nvmlDeviceGetFieldValues for the GPU-level health counters
	FnNVLinkFields // nvmlDeviceGetFieldValues for the per-link NVLink and C2C counters
	FnRemapHistogram
	FnNVLinkErrorCounter
	FnSramEcc
	FnRepairStatus
	FnUnrepairable
	numFns
)

// fnInfo is the C symbol each Fn calls, checked with LookupSymbol before the
// first call: a symbol the installed driver lacks must never be called (the
// process would die with "symbol lookup error"). go-nvml itself picks the
// newest of the versioned names it knows (nvmlInit_v2, ...); the name here is
// the oldest one that works.
var fnInfo = [numFns]struct {
	name   string // function name for logs and NVML_HUNG flags
	symbol string // C symbol to look up
}{
	FnNone:                  {"none", ""},
	FnInit:                  {"nvmlInit", "nvmlInit_v2"},
	FnGetCount:              {"nvmlDeviceGetCount", "nvmlDeviceGetCount_v2"},
	FnGetHandle:             {"nvmlDeviceGetHandleByIndex", "nvmlDeviceGetHandleByIndex_v2"},
	FnDriverVersion:         {"nvmlSystemGetDriverVersion", "nvmlSystemGetDriverVersion"},
	FnNVMLVersion:           {"nvmlSystemGetNVMLVersion", "nvmlSystemGetNVMLVersion"},
	FnCudaVersion:           {"nvmlSystemGetCudaDriverVersion", "nvmlSystemGetCudaDriverVersion"},
	FnName:                  {"nvmlDeviceGetName", "nvmlDeviceGetName"},
	FnUUID:                  {"nvmlDeviceGetUUID", "nvmlDeviceGetUUID"},
	FnSerial:                {"nvmlDeviceGetSerial", "nvmlDeviceGetSerial"},
	FnVbios:                 {"nvmlDeviceGetVbiosVersion", "nvmlDeviceGetVbiosVersion"},
	FnPciInfo:               {"nvmlDeviceGetPciInfo", "nvmlDeviceGetPciInfo"},
	FnMinorNumber:           {"nvmlDeviceGetMinorNumber", "nvmlDeviceGetMinorNumber"},
	FnNumFans:               {"nvmlDeviceGetNumFans", "nvmlDeviceGetNumFans"},
	FnThreshold:             {"nvmlDeviceGetTemperatureThreshold", "nvmlDeviceGetTemperatureThreshold"},
	FnGspVersion:            {"nvmlDeviceGetGspFirmwareVersion", "nvmlDeviceGetGspFirmwareVersion"},
	FnGspMode:               {"nvmlDeviceGetGspFirmwareMode", "nvmlDeviceGetGspFirmwareMode"},
	FnDefaultLimit:          {"nvmlDeviceGetPowerManagementDefaultLimit", "nvmlDeviceGetPowerManagementDefaultLimit"},
	FnFieldValues:           {"nvmlDeviceGetFieldValues", "nvmlDeviceGetFieldValues"},
	FnTemperature:           {"nvmlDeviceGetTemperature", "nvmlDeviceGetTemperature"},
	FnPowerLimit:            {"nvmlDeviceGetPowerManagementLimit", "nvmlDeviceGetPowerManagementLimit"},
	FnPState:                {"nvmlDeviceGetPerformanceState", "nvmlDeviceGetPerformanceState"},
	FnClock:                 {"nvmlDeviceGetClockInfo", "nvmlDeviceGetClockInfo"},
	FnUtilization:           {"nvmlDeviceGetUtilizationRates", "nvmlDeviceGetUtilizationRates"},
	FnMemoryInfoV2:          {"nvmlDeviceGetMemoryInfo_v2", "nvmlDeviceGetMemoryInfo_v2"},
	FnMemoryInfo:            {"nvmlDeviceGetMemoryInfo", "nvmlDeviceGetMemoryInfo"},
	FnPcieGen:               {"nvmlDeviceGetCurrPcieLinkGeneration", "nvmlDeviceGetCurrPcieLinkGeneration"},
	FnPcieWidth:             {"nvmlDeviceGetCurrPcieLinkWidth", "nvmlDeviceGetCurrPcieLinkWidth"},
	FnClocksEventReasons:    {"nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksEventReasons"},
	FnClocksThrottleReasons: {"nvmlDeviceGetCurrentClocksThrottleReasons", "nvmlDeviceGetCurrentClocksThrottleReasons"},
	FnFanSpeedV2:            {"nvmlDeviceGetFanSpeed_v2", "nvmlDeviceGetFanSpeed_v2"},
	FnFanSpeed:              {"nvmlDeviceGetFanSpeed", "nvmlDeviceGetFanSpeed"},
	FnTargetFanSpeed:        {"nvmlDeviceGetTargetFanSpeed", "nvmlDeviceGetTargetFanSpeed"},
	FnThermalSettings:       {"nvmlDeviceGetThermalSettings", "nvmlDeviceGetThermalSettings"},
	FnEncoderUtil:           {"nvmlDeviceGetEncoderUtilization", "nvmlDeviceGetEncoderUtilization"},
	FnDecoderUtil:           {"nvmlDeviceGetDecoderUtilization", "nvmlDeviceGetDecoderUtilization"},
	FnPowerUsage:            {"nvmlDeviceGetPowerUsage", "nvmlDeviceGetPowerUsage"},
	FnEnforcedLimit:         {"nvmlDeviceGetEnforcedPowerLimit", "nvmlDeviceGetEnforcedPowerLimit"},
	FnEnergy:                {"nvmlDeviceGetTotalEnergyConsumption", "nvmlDeviceGetTotalEnergyConsumption"},
	FnPcieReplay:            {"nvmlDeviceGetPcieReplayCounter", "nvmlDeviceGetPcieReplayCounter"},
	FnFanPolicy:             {"nvmlDeviceGetFanControlPolicy_v2", "nvmlDeviceGetFanControlPolicy_v2"},
	FnSupportedEvents:       {"nvmlDeviceGetSupportedEventTypes", "nvmlDeviceGetSupportedEventTypes"},
	FnRegisterEvents:        {"nvmlDeviceRegisterEvents", "nvmlDeviceRegisterEvents"},
	FnEventSetCreate:        {"nvmlEventSetCreate", "nvmlEventSetCreate"},
	FnEventSetWait:          {"nvmlEventSetWait", "nvmlEventSetWait"},
	FnProcesses:             {"nvmlDeviceGetComputeRunningProcesses", "nvmlDeviceGetComputeRunningProcesses"},
	FnGraphicsProcesses:     {"nvmlDeviceGetGraphicsRunningProcesses", "nvmlDeviceGetGraphicsRunningProcesses"},
	FnProcessUtil:           {"nvmlDeviceGetProcessUtilization", "nvmlDeviceGetProcessUtilization"},
	FnHealthFields:          {"nvmlDeviceGetFieldValues/health", "nvmlDeviceGetFieldValues"},
	FnNVLinkFields:          {"nvmlDeviceGetFieldValues/nvlink", "nvmlDeviceGetFieldValues"},
	FnRemapHistogram:        {"nvmlDeviceGetRowRemapperHistogram", "nvmlDeviceGetRowRemapperHistogram"},
	FnNVLinkErrorCounter:    {"nvmlDeviceGetNvLinkErrorCounter", "nvmlDeviceGetNvLinkErrorCounter"},
	FnSramEcc:               {"nvmlDeviceGetSramEccErrorStatus", "nvmlDeviceGetSramEccErrorStatus"},
	FnRepairStatus:          {"nvmlDeviceGetRepairStatus", "nvmlDeviceGetRepairStatus"},
	FnUnrepairable:          {"nvmlDeviceGetUnrepairableMemoryFlag_v1", "nvmlDeviceGetUnrepairableMemoryFlag_v1"},
}

func (f Fn) String() string {
	if f < numFns {
		return fnInfo[f].name
	}
	return "unknown"
}

// Symbols is the set of NVML functions present in the loaded library, looked
// up once at start.
type Symbols struct {
	present [numFns]bool
}

// LookupSymbols checks every function the sampler may call with lookup
// (go-nvml's Extensions().LookupSymbol).
func LookupSymbols(lookup func(string) error) Symbols {
	var s Symbols
	for f := Fn(1); f < numFns; f++ {
		s.present[f] = lookup(fnInfo[f].symbol) == nil
	}
	return s
}

// Has reports whether f may be called.
func (s *Symbols) Has(f Fn) bool { return s.present[f] }

// Missing lists the functions the library lacks, for the start-up log.
func (s *Symbols) Missing() []string {
	var out []string
	for f := Fn(1); f < numFns; f++ {
		if !s.present[f] {
			out = append(out, fnInfo[f].symbol)
		}
	}
	return out
}
