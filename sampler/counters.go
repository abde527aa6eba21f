package sampler

import "github.com/gpu-telemetry/gpu-telemetry/internal/counters"

// The sampler's counters, counted in the registry Open is given
// (OpenOptions.Counters: the host's, its GPUs' and their process
// readers'). They are declared in this one file, not beside each count,
// because the outputs show a package's counters in declaration order.
var (
	nvmlStretches = counters.Declare(counters.Def{Name: "nvml_stretches", Loss: true, OwnLog: true, // pacer.go
		Help: "times NVML was too slow for the interval and the slow tier, then P-state/utilization/memory, were read less often (the sampler logs the first; nvml_level in the status line is the current step)"})
	eventFailures = counters.Declare(counters.Def{Name: "nvml_event_failures", Loss: true, // events.go
		Help: "NVML event sets that could not be opened, failed and were opened again, or left a GPU out (that GPU's NVML events, Xids included, missed until the set was open again; the kernel log still has Xids)"})
	nativeExecFailures = counters.Declare(counters.Def{Name: "native_exec_failures", Loss: true, OwnLog: true, // open.go
		Help: "GPU sample executors (one cgo call a sample) that could not be started, for want of the GPU's NVML handle (the sampler logs the first, with why): that GPU's samples fail, saying why, until the executor starts; tried again with the static facts"})
	healthSkips = counters.Declare(counters.Def{Name: "health_skips", Loss: true, OwnLog: true, // health.go
		Help: "health counter reads put off because another GPU held the field lock, stuck in the driver (the sampler logs the first): the last reading stays, one slow period older"})
	procReadsHung = counters.Declare(counters.Def{Name: "process_reads_hung", Loss: true, // procs.go
		Help: "per-GPU process list reads stuck in the driver past the deadline (no process data meanwhile)"})
	procReadsFailed = counters.Declare(counters.Def{Name: "process_reads_failed", Loss: true, // procs.go
		Help: "per-GPU process list reads that failed (no process data that second)"})
)
