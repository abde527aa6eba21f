package monitor

import (
	"log/slog"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/internal/counters"
	"github.com/gpu-telemetry/gpu-telemetry/live/atop"
	"github.com/gpu-telemetry/gpu-telemetry/reading"
	"github.com/gpu-telemetry/gpu-telemetry/sink"
	"github.com/gpu-telemetry/gpu-telemetry/snapshot"
)

// gpuOutputs is every GPU pipeline's way out, shared by the GPUs: built by
// New, filled in before Run once the sinks exist. The pipeline's methods
// name it m (m := gs.out).
type gpuOutputs struct {
	eventSink
	incidentSink
	sideQueue
	factsSink
	csv rowWriter
	log *slog.Logger // the detectors' notices (each carries its gpu)

	// The host's clocks and facts a sample needs.
	mono       func() time.Duration          // Config.mono
	kernelTime func(time.Time) time.Duration // dmesg_time of a wall time (sampler.Host.KernelTime)
	interval   time.Duration
	hdr        headerFacts
	atop       *atop.Accumulator // nil without --atop

	reg *counters.Registry // where a pipeline counts its lost work (counters.go)
}

// queue runs f on the side queue; what it carries and its GPU (-1: none)
// name it when it is dropped. It reports whether f was queued.
func (o *gpuOutputs) queue(what string, gpu int, f func()) bool {
	return o.enqueue(sideJob{what: what, gpu: gpu, f: f})
}

// A GPU's pipeline (gpuState) hands what a sample leaves behind to the
// outputs below, each a small interface, and never holds the Monitor: what
// the pipeline may reach is written down here.

// rowWriter is the CSV sink (*sink.CSV): the GPU's rows, and the recent
// ones a snapshot shows.
type rowWriter interface {
	Write(s *reading.Sample) error
	Rows(index int) (header string, rows []string)
	Recent(index int) sink.Recent // Rows with the last row's columns and cells
	SetGPU(g sink.GPUColumns)     // its columns and board, once known
}

// eventSink writes events.log lines (and their journal copies): a line,
// or the line of a critical event with the incident and the crash snapshot
// the snapshot Manager decided on for it.
type eventSink interface {
	eventLine(e sink.Event)
	incidentLine(e sink.Event, d snapshot.Decision)
}

// incidentSink takes a GPU's critical events and fan spikes: the crash and
// spike snapshots, the GPU's incident count and the host's last incident
// (incidentDesk).
type incidentSink interface {
	// critical is a critical event known by its reason alone (an NVML hang
	// or failure, the GPU lost, a critical health reason), seen at when;
	// the decision names its incident and snapshot for its events.log line,
	// which is written before the plan (nil: no snapshot) is built or
	// abandoned (crashPlan).
	critical(gs *gpuState, when time.Time, reason string) (snapshot.Decision, *crashPlan)
	// spike asks for a fan spike snapshot of the spike seen at when; fans
	// returns the fans' control policies, from memory.
	spike(gs *gpuState, when time.Time, fans func() []string)
}

// sideQueue runs file work the worker and the poll loop must not wait for
// (Monitor.enqueue): dropped and counted when it is that far behind.
type sideQueue interface {
	enqueue(j sideJob) bool
}

// factsSink is told what a GPU learns about itself after start, for the
// tables built from static facts (Monitor.staticKnown): once, when a GPU
// stuck at start answers; and when its health counter groups are known.
type factsSink interface {
	staticKnown(gs *gpuState)
	healthGroupsKnown(gpu int)
}

// headerFacts are the host's facts a GPU's snapshot headers carry.
type headerFacts struct {
	version string
	host    reading.Identity
	start   time.Time
	// kernelClock says how dmesg_time relates to the kernel log's clock
	// now (kernelClock.line: the estimate and the kernel log's
	// state, both from memory).
	kernelClock func() string
}
