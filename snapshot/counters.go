package snapshot

import "github.com/gpu-telemetry/gpu-telemetry/internal/counters"

// ManagerCounters are the snapshot writer's counters (RegisterCounters).
var ManagerCounters = []counters.Field[Stats]{
	{Def: counters.Def{Name: "crash_snapshots_suppressed", Loss: true, Place: 120,
		Help: "crash snapshots not taken because of the per-GPU cooldown"},
		Get: func(s Stats) uint64 { return s.CrashesSuppressed }},
	{Def: counters.Def{Name: "spike_snapshots_suppressed", Loss: true, Place: 130,
		Help: "fan spike snapshots not taken because of the cooldown"},
		Get: func(s Stats) uint64 { return s.SpikesSuppressed }},
	{Def: counters.Def{Name: "follow_ups_canceled", Loss: true, Place: 140,
		Help: "crash snapshot follow-ups cancelled by a newer incident or shutdown"},
		Get: func(s Stats) uint64 { return s.FollowUpsCanceled }},
	{Def: counters.Def{Name: "snapshot_failures", Loss: true, Place: 150,
		Help: "snapshot files that could not be written"},
		Get: func(s Stats) uint64 { return s.Failures }},
	{Def: counters.Def{Name: "snapshots_refused_at_shutdown", Loss: true, OwnLog: true, Place: 160,
		Help: "crash and fan spike snapshots not taken because they were asked for after the snapshot writer closed at shutdown (by a sample that came back late from a stuck NVML call)"},
		Get: func(s Stats) uint64 { return s.RefusedClosed }},
	{Def: counters.Def{Name: "crash_snapshots", Place: 500,
		Help: "crash snapshots written (the escalations inside an incident included)"},
		Get: func(s Stats) uint64 { return s.CrashesWritten }},
	{Def: counters.Def{Name: "crash_incidents", Place: 510,
		Help: "incidents begun: a GPU's critical events from the first until its crash cooldown ends are one incident"},
		Get: func(s Stats) uint64 { return s.Incidents }},
	{Def: counters.Def{Name: "crash_escalations", Place: 520,
		Help: "crash snapshots taken inside an incident's cooldown because the event was a worse stage (GSP, off the bus) or asked for more than every event captured before"},
		Get: func(s Stats) uint64 { return s.Escalations }},
	{Def: counters.Def{Name: "spike_snapshots", Place: 530,
		Help: "fan spike snapshots written"},
		Get: func(s Stats) uint64 { return s.SpikesWritten }},
	{Def: counters.Def{Name: "crash_snapshots_completed", Place: 540,
		Help: "crash snapshots whose full version (every command's output) replaced the first file"},
		Get: func(s Stats) uint64 { return s.CrashesCompleted }},
	{Def: counters.Def{Name: "follow_ups", Place: 550,
		Help: "crash snapshot follow-ups written"},
		Get: func(s Stats) uint64 { return s.FollowUpsWritten }},
}

// RegisterCounters makes the writer's counters (ManagerCounters) part of r.
func (m *Manager) RegisterCounters(r *counters.Registry) { counters.Add(r, m.Stats, ManagerCounters) }
