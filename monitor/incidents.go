package monitor

import (
	"log/slog"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/live"
	"github.com/gpu-telemetry/gpu-telemetry/snapshot"
)

// fault is the critical event at when of an NVML hang or failure, or of a
// critical health reason: known by its reason alone.
func fault(when time.Time, reason string) snapshot.Event {
	return snapshot.Event{Time: when, Reason: reason, Stage: snapshot.StageFault}
}

// criticalEvent counts the critical event ev in the GPU's incidents and has
// the snapshot Manager decide on its crash snapshot before anything is
// gathered. ev.Time is when it happened, seen when it was seen (a kernel
// record is read after the fact: its header is of then, its processes of
// now). The caller writes the event's line, naming the decision's incident
// and snapshot, then gathers the snapshot or reports it lost. No I/O.
func (gs *gpuState) criticalEvent(seen time.Time, ev snapshot.Event) crashPlan {
	m := gs.m
	var n uint64
	gs.slot.Update(func(g *live.GPU) { n = g.Incident(ev.Time, ev.Reason) })
	d := m.snaps.Decide(gs.idx, ev)
	in := live.Incident{Time: ev.Time, GPU: gs.idx, Reason: ev.Reason}
	if d.Headline != "" {
		in.Time, in.Reason = d.IncidentStart, d.Headline
	}
	m.states.mu.Lock()
	m.states.incident = in
	m.states.mu.Unlock()
	if d.Closed {
		m.refused("a crash snapshot", gs.idx, ev.Reason)
	}
	if d.Accepted {
		msg := "critical event: taking crash snapshot"
		if d.Escalation {
			msg = "critical event: a worse stage of the incident, taking a crash snapshot inside the cooldown"
		}
		gs.log.Error(msg, "reason", ev.Reason, "incident", n, "headline", d.Headline, "snapshot", d.Snapshot)
	}
	m.readCPER(gs)     // the driver may have recorded the fault as a CPER record
	m.readCPERLate(gs) // or may record it in a moment
	return crashPlan{d: d, seen: seen, ev: ev, n: n}
}

// crashPlan is a critical event with the snapshot Manager's decision on it:
// what gathering the snapshot needs after the event's line is written.
type crashPlan struct {
	d    snapshot.Decision
	seen time.Time
	ev   snapshot.Event
	n    uint64 // the GPU's incident count, for the header
}

// crashSnapshot gathers the crash snapshot p accepted (if it did) and hands
// it, complete, to the snapshot Manager, which never calls back for it.
func (gs *gpuState) crashSnapshot(p crashPlan) {
	if !p.d.Accepted {
		return
	}
	hdr, recent := gs.m.csv.Rows(gs.idx)
	h := gs.header(p.ev.Time, p.ev.Reason, p.n)
	if !gs.m.snaps.Crash(snapshot.CrashRequest{Decision: p.d, Header: h, CSVHeader: hdr, Rows: recent,
		Extra: append(gs.procSection(p.seen), snapshot.HealthSection(gs.Health().HealthData, p.seen))}) {
		gs.m.refused("a crash snapshot", gs.idx, p.ev.Reason)
	}
}

// what names the plan's snapshot for a queue that may drop it.
func (p crashPlan) what() string { return "crash snapshot " + p.d.Snapshot }

// spikeSnapshot takes a spike snapshot of the spike seen at when, if the
// cooldown lets it, with the fans' policies fans (from memory, not NVML).
func (gs *gpuState) spikeSnapshot(when time.Time, fans []string) {
	m := gs.m
	d := m.snaps.DecideSpike(gs.idx)
	if d.Closed {
		m.refused("a fan spike snapshot", gs.idx, "FAN_SPIKE")
	}
	if !d.Accepted {
		return
	}
	r := m.csv.Recent(gs.idx) // the spike's row is the last, its cells from the sample
	if !m.snaps.Spike(snapshot.SpikeRequest{Decision: d, Header: gs.header(when, "FAN_SPIKE", 0),
		Columns: r.Columns, Values: r.Last, CSVHeader: r.Header, Rows: r.Rows,
		Thresholds: gs.g.Info().Thresholds, FanPolicies: fans}) {
		m.refused("a fan spike snapshot", gs.idx, "FAN_SPIKE")
		return
	}
	gs.log.Warn("fan spike: snapshot taken", "spikes", gs.tr.Counters().Total.Spikes())
}

// refused logs the first snapshot request the snapshot Manager refused,
// closed at shutdown (it counts them all; watchLosses has stopped by then).
func (m *Monitor) refused(what string, gpu int, reason string) {
	if m.states.refusedLogged.CompareAndSwap(false, true) {
		logFirstLoss(m.log, "snapshots_refused_at_shutdown", what+" asked for after the snapshot writer closed at shutdown",
			slog.Int("gpu", gpu), slog.String("reason", reason))
	}
}
