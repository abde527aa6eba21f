package sampler

import "github.com/gpu-telemetry/gpu-telemetry/internal/counters"

// HostCounters are the host's counters (RegisterCounters).
var HostCounters = []counters.Field[*Host]{
	{Def: counters.Declare(counters.Def{Name: "nvml_stretches", Loss: true, OwnLog: true,
		Help: "times NVML was too slow for the interval and the slow tier, then P-state/utilization/memory, were read less often (the sampler logs the first; nvml_level in the status line is the current step)"}),
		Get: func(h *Host) uint64 { return h.Pacer.Stats().Stretches }},
	{Def: counters.Declare(counters.Def{Name: "nvml_event_failures", Loss: true,
		Help: "NVML event sets that could not be opened, failed and were opened again, or left a GPU out (that GPU's NVML events, Xids included, missed until the set was open again; the kernel log still has Xids)"}),
		Get: func(h *Host) uint64 { return h.EventFailures() }},
}

// GPUCounters are a GPU's counters (GPU.RegisterCounters); every GPU's show
// summed.
var GPUCounters = []counters.Field[*GPU]{
	{Def: counters.Declare(counters.Def{Name: "native_exec_failures", Loss: true, OwnLog: true,
		Help: "GPU sample executors (one cgo call a sample) that could not be started, for want of the GPU's NVML handle (the sampler logs the first, with why): that GPU's samples fail, saying why, until the executor starts; tried again with the static facts"}),
		Get: (*GPU).NativeExecFailures},
	{Def: counters.Declare(counters.Def{Name: "health_skips", Loss: true, OwnLog: true,
		Help: "health counter reads put off because another GPU held the field lock, stuck in the driver (the sampler logs the first): the last reading stays, one slow period older"}),
		Get: (*GPU).HealthSkips},
}

// ProcCounters are a GPU's process reader's counters
// (ProcReader.RegisterCounters); every GPU's show summed.
var ProcCounters = []counters.Field[*ProcReader]{
	{Def: counters.Declare(counters.Def{Name: "process_reads_hung", Loss: true,
		Help: "per-GPU process list reads stuck in the driver past the deadline (no process data meanwhile)"}),
		Get: func(p *ProcReader) uint64 { h, _ := p.Counts(); return h }},
	{Def: counters.Declare(counters.Def{Name: "process_reads_failed", Loss: true,
		Help: "per-GPU process list reads that failed (no process data that second)"}),
		Get: func(p *ProcReader) uint64 { _, f := p.Counts(); return f }},
}

// RegisterCounters makes the host's counters (HostCounters) and each of its
// GPUs' (GPUCounters) part of r.
func (h *Host) RegisterCounters(r *counters.Registry) {
	counters.Observe(r, func() *Host { return h }, HostCounters...)
	for _, g := range h.GPUs {
		g.RegisterCounters(r)
	}
}

// RegisterCounters makes the GPU's counters (GPUCounters) part of r.
func (g *GPU) RegisterCounters(r *counters.Registry) {
	counters.Observe(r, func() *GPU { return g }, GPUCounters...)
}

// RegisterCounters makes the reader's counters (ProcCounters) part of r.
func (p *ProcReader) RegisterCounters(r *counters.Registry) {
	counters.Observe(r, func() *ProcReader { return p }, ProcCounters...)
}
