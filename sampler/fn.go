package sampler

// Fn identifies one NVML function the sampler calls. It indexes the capability
// cache and names the function a stuck call is in (NVML_HUNG(<function>,...)).
// The functions the sampler calls from its own code are the constants
// below; the getters of reading.Table and reading.FanTable are numbered
// after them as the sample's calls are built (fnOf).
type Fn uint8

// The NVML functions the sampler calls from its own code.
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
	FnFanSpeed
	FnThermalSettings
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
	numStaticFns
)

// maxFns bounds the functions the sampler calls (its own and the tables').
const maxFns = 128

// fnInfo is the C symbol each Fn calls, checked with LookupSymbol before the
// first call: a symbol the installed driver lacks must never be called (the
// process would die with "symbol lookup error"). go-nvml itself picks the
// newest of the versioned names it knows (nvmlInit_v2, ...); the name here is
// the oldest one that works.
var fnInfo = []fnDef{
	FnNone:               {"none", ""},
	FnInit:               {"nvmlInit", "nvmlInit_v2"},
	FnGetCount:           {"nvmlDeviceGetCount", "nvmlDeviceGetCount_v2"},
	FnGetHandle:          {"nvmlDeviceGetHandleByIndex", "nvmlDeviceGetHandleByIndex_v2"},
	FnDriverVersion:      {"nvmlSystemGetDriverVersion", "nvmlSystemGetDriverVersion"},
	FnNVMLVersion:        {"nvmlSystemGetNVMLVersion", "nvmlSystemGetNVMLVersion"},
	FnCudaVersion:        {"nvmlSystemGetCudaDriverVersion", "nvmlSystemGetCudaDriverVersion"},
	FnName:               {"nvmlDeviceGetName", "nvmlDeviceGetName"},
	FnUUID:               {"nvmlDeviceGetUUID", "nvmlDeviceGetUUID"},
	FnSerial:             {"nvmlDeviceGetSerial", "nvmlDeviceGetSerial"},
	FnVbios:              {"nvmlDeviceGetVbiosVersion", "nvmlDeviceGetVbiosVersion"},
	FnPciInfo:            {"nvmlDeviceGetPciInfo", "nvmlDeviceGetPciInfo"},
	FnMinorNumber:        {"nvmlDeviceGetMinorNumber", "nvmlDeviceGetMinorNumber"},
	FnNumFans:            {"nvmlDeviceGetNumFans", "nvmlDeviceGetNumFans"},
	FnThreshold:          {"nvmlDeviceGetTemperatureThreshold", "nvmlDeviceGetTemperatureThreshold"},
	FnGspVersion:         {"nvmlDeviceGetGspFirmwareVersion", "nvmlDeviceGetGspFirmwareVersion"},
	FnGspMode:            {"nvmlDeviceGetGspFirmwareMode", "nvmlDeviceGetGspFirmwareMode"},
	FnDefaultLimit:       {"nvmlDeviceGetPowerManagementDefaultLimit", "nvmlDeviceGetPowerManagementDefaultLimit"},
	FnFieldValues:        {"nvmlDeviceGetFieldValues", "nvmlDeviceGetFieldValues"},
	FnFanSpeed:           {"nvmlDeviceGetFanSpeed", "nvmlDeviceGetFanSpeed"},
	FnThermalSettings:    {"nvmlDeviceGetThermalSettings", "nvmlDeviceGetThermalSettings"},
	FnFanPolicy:          {"nvmlDeviceGetFanControlPolicy_v2", "nvmlDeviceGetFanControlPolicy_v2"},
	FnSupportedEvents:    {"nvmlDeviceGetSupportedEventTypes", "nvmlDeviceGetSupportedEventTypes"},
	FnRegisterEvents:     {"nvmlDeviceRegisterEvents", "nvmlDeviceRegisterEvents"},
	FnEventSetCreate:     {"nvmlEventSetCreate", "nvmlEventSetCreate"},
	FnEventSetWait:       {"nvmlEventSetWait", "nvmlEventSetWait"},
	FnProcesses:          {"nvmlDeviceGetComputeRunningProcesses", "nvmlDeviceGetComputeRunningProcesses"},
	FnGraphicsProcesses:  {"nvmlDeviceGetGraphicsRunningProcesses", "nvmlDeviceGetGraphicsRunningProcesses"},
	FnProcessUtil:        {"nvmlDeviceGetProcessUtilization", "nvmlDeviceGetProcessUtilization"},
	FnHealthFields:       {"nvmlDeviceGetFieldValues/health", "nvmlDeviceGetFieldValues"},
	FnNVLinkFields:       {"nvmlDeviceGetFieldValues/nvlink", "nvmlDeviceGetFieldValues"},
	FnRemapHistogram:     {"nvmlDeviceGetRowRemapperHistogram", "nvmlDeviceGetRowRemapperHistogram"},
	FnNVLinkErrorCounter: {"nvmlDeviceGetNvLinkErrorCounter", "nvmlDeviceGetNvLinkErrorCounter"},
}

// fnDef is an Fn's function name (for logs and NVML_HUNG flags) and the C
// symbol looked up.
type fnDef struct{ name, symbol string }

// fnOf returns the Fn of the NVML function named, numbering it if it is new
// (a table's getter: its name is its symbol). Called only while the
// sample's calls are built, at package init.
func fnOf(name string) Fn {
	for f, d := range fnInfo {
		if d.name == name {
			return Fn(f)
		}
	}
	if len(fnInfo) >= maxFns {
		panic("sampler: more NVML functions than maxFns")
	}
	fnInfo = append(fnInfo, fnDef{name, name})
	return Fn(len(fnInfo) - 1)
}

func (f Fn) String() string {
	if int(f) < len(fnInfo) {
		return fnInfo[f].name
	}
	return "unknown"
}

// Symbols is the set of NVML functions present in the loaded library, looked
// up once at start.
type Symbols struct {
	present [maxFns]bool
}

// LookupSymbols checks every function the sampler may call with lookup
// (go-nvml's Extensions().LookupSymbol).
func LookupSymbols(lookup func(string) error) Symbols {
	var s Symbols
	for f := Fn(1); int(f) < len(fnInfo); f++ {
		s.present[f] = lookup(fnInfo[f].symbol) == nil
	}
	return s
}

// Has reports whether f may be called.
func (s *Symbols) Has(f Fn) bool { return s.present[f] }

// Missing lists the functions the library lacks, for the start-up log.
func (s *Symbols) Missing() []string {
	var out []string
	for f := Fn(1); int(f) < len(fnInfo); f++ {
		if !s.present[f] {
			out = append(out, fnInfo[f].symbol)
		}
	}
	return out
}
