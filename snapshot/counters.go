package snapshot

import "github.com/gpu-telemetry/gpu-telemetry/internal/counters"

// The snapshot writer's counters, counted in the registry it is given
// (Config.Counters).
var (
	crashesSuppressed = counters.Declare(counters.Def{Name: "crash_snapshots_suppressed", Loss: true,
		Help: "crash snapshots not taken because of the per-GPU cooldown"})
	spikesSuppressed = counters.Declare(counters.Def{Name: "spike_snapshots_suppressed", Loss: true,
		Help: "fan spike snapshots not taken because of the cooldown"})
	followUpsCanceled = counters.Declare(counters.Def{Name: "follow_ups_canceled", Loss: true,
		Help: "crash snapshot follow-ups cancelled by a newer incident, shutdown, or no snapshot of their incident being written"})
	snapshotFailures = counters.Declare(counters.Def{Name: "snapshot_failures", Loss: true,
		Help: "snapshot files that could not be written"})
	refusedClosed = counters.Declare(counters.Def{Name: "snapshots_refused_at_shutdown", Loss: true, OwnLog: true,
		Help: "crash and fan spike snapshots not taken because they were asked for after the snapshot writer closed at shutdown (by a sample that came back late from a stuck NVML call)"})
	crashesWritten = counters.Declare(counters.Def{Name: "crash_snapshots",
		Help: "crash snapshots written (the escalations inside an incident included)"})
	incidentsBegun = counters.Declare(counters.Def{Name: "crash_incidents",
		Help: "incidents begun: a GPU's critical events from the first until its crash cooldown ends are one incident"})
	escalations = counters.Declare(counters.Def{Name: "crash_escalations",
		Help: "crash snapshots taken inside an incident's cooldown because the event was a worse stage (GSP, off the bus) or asked for more than every event captured before"})
	spikesWritten = counters.Declare(counters.Def{Name: "spike_snapshots",
		Help: "fan spike snapshots written"})
	crashesCompleted = counters.Declare(counters.Def{Name: "crash_snapshots_completed",
		Help: "crash snapshots whose full version (every command's output) replaced the first file"})
	followUpsWritten = counters.Declare(counters.Def{Name: "follow_ups",
		Help: "crash snapshot follow-ups written"})
)
