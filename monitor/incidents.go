package monitor

import (
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/anomaly"
	"github.com/gpu-telemetry/gpu-telemetry/live"
	"github.com/gpu-telemetry/gpu-telemetry/snapshot"
)

// incidentDesk is the GPUs' way to the snapshot Manager (their
// incidentSink): it asks the Manager's decisions, hands it the requests the
// GPUs gather, keeps the host's last incident for the host view, and logs
// the first request refused at shutdown.
type incidentDesk struct {
	snaps *snapshot.Manager
	log   *slog.Logger

	refusedLogged atomic.Bool // refused logged the first

	mu   sync.Mutex
	last live.Incident // the last critical event on any GPU
}

// lastIncident returns the last critical event on any GPU.
func (d *incidentDesk) lastIncident() live.Incident {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.last
}

// decide decides on a crash snapshot for the critical event ev of the GPU
// gpu (the snapshot Manager's cooldown and the incident's stages decide)
// and publishes the incident by its headline. It does no I/O but the log.
func (d *incidentDesk) decide(gpu int, ev snapshot.Event) snapshot.Decision {
	dec := d.snaps.Decide(gpu, ev)
	in := live.Incident{Time: ev.Time, GPU: gpu, Reason: ev.Reason}
	if dec.Headline != "" {
		in.Time, in.Reason = dec.IncidentStart, dec.Headline
	}
	d.mu.Lock()
	d.last = in
	d.mu.Unlock()
	if dec.Closed {
		d.refused("a crash snapshot", gpu, ev.Reason)
	}
	return dec
}

// crash hands a crash snapshot's request, complete, to the snapshot
// Manager, which writes it in the background.
func (d *incidentDesk) crash(req snapshot.CrashRequest) {
	if !d.snaps.Crash(req) {
		d.refused("a crash snapshot", req.Header.GPUIndex, req.Header.Reason)
	}
}

// lost tells the snapshot Manager that the crash snapshot it accepted will
// not come (why): it counts it in snapshot_failures and logs it.
func (d *incidentDesk) lost(dec snapshot.Decision, why string) { d.snaps.Lost(dec, why) }

// decideSpike decides on a spike snapshot of the GPU gpu (rate-limited by
// the snapshot Manager).
func (d *incidentDesk) decideSpike(gpu int) snapshot.Decision {
	dec := d.snaps.DecideSpike(gpu)
	if dec.Closed {
		d.refused("a fan spike snapshot", gpu, "FAN_SPIKE")
	}
	return dec
}

// spike hands a spike snapshot's request, complete, to the snapshot Manager.
func (d *incidentDesk) spike(req snapshot.SpikeRequest) {
	if !d.snaps.Spike(req) {
		d.refused("a fan spike snapshot", req.Header.GPUIndex, "FAN_SPIKE")
	}
}

// critical counts an incident on the GPU for an event known by its reason
// alone (an NVML hang or failure, the GPU lost): a fault, or the GPU lost.
// See criticalEvent.
func (gs *gpuState) critical(when time.Time, reason string) crashPlan {
	ev := snapshot.Event{Time: when, Reason: reason, Stage: snapshot.StageFault}
	if reason == lostReason {
		ev.What, ev.Stage = "GPU lost", snapshot.StageLost
	}
	return gs.criticalEvent(when, ev)
}

// criticalEvent counts the critical event ev in the GPU's incidents and
// asks for the crash snapshot decision, before anything is gathered. ev.Time
// is when it happened, seen when it was seen: earlier for a kernel record
// read after the fact, whose incident and snapshot header are of when the
// kernel logged it, while the snapshot's process section is of now. The
// plan's decision names the incident and the snapshot for the event's
// events.log line, which the caller writes at once; then it gathers the
// snapshot (crashSnapshot), which reads the GPU's recent rows (and so may
// wait on the CSV file), or reports it lost when the work that was to
// gather it is dropped. It does no I/O but the log.
func (gs *gpuState) criticalEvent(seen time.Time, ev snapshot.Event) crashPlan {
	var n uint64
	gs.slot.Update(func(g *live.GPU) { n = g.Incident(ev.Time, ev.Reason) })
	d := gs.m.inc.decide(gs.idx, ev)
	if d.Accepted {
		msg := "critical event: taking crash snapshot"
		if d.Escalation {
			msg = "critical event: a worse stage of the incident, taking a crash snapshot inside the cooldown"
		}
		gs.log.Error(msg, "reason", ev.Reason, "incident", n, "headline", d.Headline, "snapshot", d.Snapshot)
	}
	return crashPlan{d: d, seen: seen, ev: ev, n: n}
}

// crashPlan is a GPU's critical event with the snapshot Manager's decision
// on it: a value, with what the GPU needs to gather the snapshot the
// decision accepted (crashSnapshot) after the event's line is written, and
// for a sample whose row waits on the side goroutine, behind that row.
type crashPlan struct {
	d    snapshot.Decision
	seen time.Time
	ev   snapshot.Event
	n    uint64 // the GPU's incident count, for the header
}

// crashSnapshot gathers the crash snapshot p's decision accepted (if it
// did) from the GPU's recent rows and state and hands it, complete, to the
// snapshot Manager: the GPU's evidence goes down to the writer, which never
// calls back for it.
func (gs *gpuState) crashSnapshot(p crashPlan) {
	if !p.d.Accepted {
		return
	}
	hdr, recent := gs.m.csv.Rows(gs.idx)
	gs.m.inc.crash(snapshot.CrashRequest{Decision: p.d, Header: gs.header(p.ev.Time, p.ev.Reason, p.n),
		CSVHeader: hdr, Rows: recent, Extra: append(gs.procSection(p.seen), gs.healthSection(p.seen)...)})
}

// crashLost reports the plan's snapshot (if any) lost: the work that was to
// gather it was dropped (why).
func (gs *gpuState) crashLost(p crashPlan, why string) { gs.m.inc.lost(p.d, why) }

// what names the plan's snapshot for a queue that may drop it.
func (p crashPlan) what() string { return "crash snapshot " + p.d.Snapshot }

// lostReason is the reason of the critical event of a GPU NVML reports lost.
const lostReason = "GPU lost: NVML_ERROR_GPU_IS_LOST"

// spikeSnapshot asks for a spike snapshot of the spike seen at when and,
// when the snapshot Manager's cooldown lets it through, gathers it (fans
// returns the fans' control policies, from memory: it must not call NVML)
// and hands it over.
func (gs *gpuState) spikeSnapshot(when time.Time, fans func() []string) {
	m := gs.m
	d := m.inc.decideSpike(gs.idx)
	if !d.Accepted {
		return
	}
	r := m.csv.Recent(gs.idx) // the spike's row is the last, its cells from the sample
	m.inc.spike(snapshot.SpikeRequest{
		Decision:    d,
		Header:      gs.header(when, "FAN_SPIKE", 0),
		Columns:     r.Columns,
		Values:      r.Last,
		CSVHeader:   r.Header,
		Rows:        r.Rows,
		Thresholds:  gs.info().Thresholds,
		FanPolicies: fans(),
	})
	gs.log.Warn("fan spike: snapshot taken", "spikes", gs.tr.Counters().Total[anomaly.CountSpikes])
}

// refused logs the first snapshot request (what: which snapshot) that the
// snapshot manager refused because it was closed, with the GPU and the
// reason it was asked for. The manager counts them all
// (snapshots_refused_at_shutdown); watchLosses has stopped by then.
func (d *incidentDesk) refused(what string, gpu int, reason string) {
	if d.refusedLogged.CompareAndSwap(false, true) {
		logFirstLoss(d.log, "snapshots_refused_at_shutdown", what+" asked for after the snapshot writer closed at shutdown",
			slog.Int("gpu", gpu), slog.String("reason", reason))
	}
}
