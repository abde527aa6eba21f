package sampler

import (
	"slices"
	"strings"
)

// Fn identifies one NVML function the sampler calls: it indexes the
// capability cache and names the function a stuck call is in. Each is
// numbered as it is declared (fnOf): those below, then the tables' getters.
type Fn uint8

// FnNone is no function.
const FnNone Fn = 0

// The NVML functions the sampler calls from its own code, but for nvmlInit,
// nvmlDeviceGetCount and nvmlSystemGetDriverVersion, which every driver
// has. Each symbol is checked with LookupSymbol first: calling one the
// driver lacks kills the process ("symbol lookup error"). Where go-nvml
// picks the newest versioned name it knows (nvmlDeviceGetHandleByIndex_v2),
// the symbol here is the oldest that works.
var (
	FnGetHandle          = fnSym("nvmlDeviceGetHandleByIndex", "nvmlDeviceGetHandleByIndex_v2")
	FnNVMLVersion        = fnOf("nvmlSystemGetNVMLVersion")
	FnCudaVersion        = fnOf("nvmlSystemGetCudaDriverVersion")
	FnName               = fnOf("nvmlDeviceGetName")
	FnUUID               = fnOf("nvmlDeviceGetUUID")
	FnSerial             = fnOf("nvmlDeviceGetSerial")
	FnVbios              = fnOf("nvmlDeviceGetVbiosVersion")
	FnPciInfo            = fnOf("nvmlDeviceGetPciInfo")
	FnMinorNumber        = fnOf("nvmlDeviceGetMinorNumber")
	FnNumFans            = fnOf("nvmlDeviceGetNumFans")
	FnThreshold          = fnOf("nvmlDeviceGetTemperatureThreshold")
	FnGspVersion         = fnOf("nvmlDeviceGetGspFirmwareVersion")
	FnGspMode            = fnOf("nvmlDeviceGetGspFirmwareMode")
	FnDefaultLimit       = fnOf("nvmlDeviceGetPowerManagementDefaultLimit")
	FnFieldValues        = fnOf("nvmlDeviceGetFieldValues")
	FnFanSpeed           = fnOf("nvmlDeviceGetFanSpeed")
	FnThermalSettings    = fnOf("nvmlDeviceGetThermalSettings")
	FnFanPolicy          = fnOf("nvmlDeviceGetFanControlPolicy_v2")
	FnSupportedEvents    = fnOf("nvmlDeviceGetSupportedEventTypes")
	FnRegisterEvents     = fnOf("nvmlDeviceRegisterEvents")
	FnEventSetCreate     = fnOf("nvmlEventSetCreate")
	FnEventSetWait       = fnOf("nvmlEventSetWait")
	FnProcesses          = fnOf("nvmlDeviceGetComputeRunningProcesses")
	FnGraphicsProcesses  = fnOf("nvmlDeviceGetGraphicsRunningProcesses")
	FnProcessUtil        = fnOf("nvmlDeviceGetProcessUtilization")
	FnHealthFields       = fnSym("nvmlDeviceGetFieldValues/health", "nvmlDeviceGetFieldValues") // the GPU-level health counters
	FnNVLinkFields       = fnSym("nvmlDeviceGetFieldValues/nvlink", "nvmlDeviceGetFieldValues") // the per-link NVLink and C2C counters
	FnRemapHistogram     = fnOf("nvmlDeviceGetRowRemapperHistogram")
	FnNVLinkErrorCounter = fnOf("nvmlDeviceGetNvLinkErrorCounter")
	// The fan guard's (fanctl.go): the only calls that change a GPU.
	FnMinMaxFanSpeed     = fnOf("nvmlDeviceGetMinMaxFanSpeed")
	FnSetFanSpeed        = fnOf("nvmlDeviceSetFanSpeed_v2")
	FnSetDefaultFanSpeed = fnOf("nvmlDeviceSetDefaultFanSpeed_v2")
)

// maxFns bounds the functions the sampler calls (its own and the tables').
const maxFns = 128

// fnInfo is each Fn's name (for logs and NVML_HUNG flags) and C symbol.
var fnInfo = []struct{ name, symbol string }{FnNone: {"none", ""}}

// fnOf returns the Fn of the NVML function named (its name is its symbol,
// up to a "/": "nvmlDeviceGetGpuFabricInfoV/v2" is that function asked
// for another struct, refused or answered on its own), numbering it if it
// is new. Called only at package init.
func fnOf(name string) Fn {
	sym, _, _ := strings.Cut(name, "/")
	return fnSym(name, sym)
}

// fnSym is fnOf for a function whose symbol is not its name.
func fnSym(name, symbol string) Fn {
	for f, d := range fnInfo {
		if d.name == name {
			return Fn(f)
		}
	}
	if len(fnInfo) >= maxFns {
		panic("sampler: more NVML functions than maxFns")
	}
	fnInfo = append(fnInfo, struct{ name, symbol string }{name, symbol})
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
type Symbols struct{ present [maxFns]bool }

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
		if !s.present[f] && !slices.Contains(out, fnInfo[f].symbol) {
			out = append(out, fnInfo[f].symbol)
		}
	}
	return out
}
