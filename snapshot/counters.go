package snapshot

import "github.com/gpu-telemetry/gpu-telemetry/internal/counters"

// ManagerCounters are the snapshot writer's counters (RegisterCounters).
var ManagerCounters = []counters.Field[Stats]{
	{Def: counters.Declare(counters.Def{Name: "crash_snapshots_suppressed", Loss: true,
		Help: "crash snapshots not taken because of the per-GPU cooldown"}),
		Get: func(s Stats) uint64 { return s.CrashesSuppressed }},
	{Def: counters.Declare(counters.Def{Name: "spike_snapshots_suppressed", Loss: true,
		Help: "fan spike snapshots not taken because of the cooldown"}),
		Get: func(s Stats) uint64 { return s.SpikesSuppressed }},
	{Def: counters.Declare(counters.Def{Name: "follow_ups_canceled", Loss: true,
		Help: "crash snapshot follow-ups cancelled by a newer incident or shutdown"}),
		Get: func(s Stats) uint64 { return s.FollowUpsCanceled }},
	{Def: counters.Declare(counters.Def{Name: "snapshot_failures", Loss: true,
		Help: "snapshot files that could not be written"}),
		Get: func(s Stats) uint64 { return s.Failures }},
	{Def: counters.Declare(counters.Def{Name: "snapshots_refused_at_shutdown", Loss: true, OwnLog: true,
		Help: "crash and fan spike snapshots not taken because they were asked for after the snapshot writer closed at shutdown (by a sample that came back late from a stuck NVML call)"}),
		Get: func(s Stats) uint64 { return s.RefusedClosed }},
	{Def: counters.Declare(counters.Def{Name: "crash_snapshots",
		Help: "crash snapshots written (the escalations inside an incident included)"}),
		Get: func(s Stats) uint64 { return s.CrashesWritten }},
	{Def: counters.Declare(counters.Def{Name: "crash_incidents",
		Help: "incidents begun: a GPU's critical events from the first until its crash cooldown ends are one incident"}),
		Get: func(s Stats) uint64 { return s.Incidents }},
	{Def: counters.Declare(counters.Def{Name: "crash_escalations",
		Help: "crash snapshots taken inside an incident's cooldown because the event was a worse stage (GSP, off the bus) or asked for more than every event captured before"}),
		Get: func(s Stats) uint64 { return s.Escalations }},
	{Def: counters.Declare(counters.Def{Name: "spike_snapshots",
		Help: "fan spike snapshots written"}),
		Get: func(s Stats) uint64 { return s.SpikesWritten }},
	{Def: counters.Declare(counters.Def{Name: "crash_snapshots_completed",
		Help: "crash snapshots whose full version (every command's output) replaced the first file"}),
		Get: func(s Stats) uint64 { return s.CrashesCompleted }},
	{Def: counters.Declare(counters.Def{Name: "follow_ups",
		Help: "crash snapshot follow-ups written"}),
		Get: func(s Stats) uint64 { return s.FollowUpsWritten }},
}

// RegisterCounters makes the writer's counters (ManagerCounters) part of r.
func (m *Manager) RegisterCounters(r *counters.Registry) {
	counters.Observe(r, m.Stats, ManagerCounters...)
}
