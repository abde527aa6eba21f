package monitor

import (
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/anomaly"
	"github.com/gpu-telemetry/gpu-telemetry/live"
	"github.com/gpu-telemetry/gpu-telemetry/sink"
	"github.com/gpu-telemetry/gpu-telemetry/snapshot"
)

// incidentDesk turns critical events and fan spikes into snapshots: it
// counts the GPU's incident, asks the snapshot manager (whose cooldowns and
// stages decide), and keeps the host's last incident for the host view. It
// is the GPUs' and the event paths' (NVML events, the kernel
// log) way to a crash snapshot.
type incidentDesk struct {
	snaps *snapshot.Manager
	rows  *sink.CSV // the GPUs' recent rows, for the snapshots
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

// critical counts an incident on a GPU for an event known by its reason
// alone (an NVML hang or failure, the GPU lost): a fault, or the GPU lost.
// See criticalEvent.
func (d *incidentDesk) critical(gs *gpuState, when time.Time, reason string) (snapshot.Decision, *crashPlan) {
	ev := snapshot.Event{Time: when, Reason: reason, Stage: snapshot.StageFault}
	if reason == lostReason {
		ev.What, ev.Stage = "GPU lost", snapshot.StageLost
	}
	return d.criticalEvent(gs, when, ev)
}

// criticalEvent counts a critical event on a GPU, decides on a crash
// snapshot (the snapshot Manager decides by the event's stage whether the
// cooldown holds it back) and publishes the incident by its headline. ev.Time
// is when it happened, seen when it was seen: earlier for a kernel record
// read after the fact, whose incident and snapshot header are of when the
// kernel logged it, while the snapshot's process section is of now. The
// decision names the incident and the snapshot for the event's events.log
// line, which the caller writes at once; then it builds the plan (nil when
// no snapshot is taken), which reads the GPU's recent rows (and so may wait
// on the CSV file), or abandons it when the work that was to build it is
// dropped. It does no I/O but the log.
func (d *incidentDesk) criticalEvent(gs *gpuState, seen time.Time, ev snapshot.Event) (snapshot.Decision, *crashPlan) {
	var n uint64
	gs.slot.Update(func(g *live.GPU) { n = g.Incident(ev.Time, ev.Reason) })
	dec, p := d.snaps.Decide(gs.idx, ev)
	in := live.Incident{Time: ev.Time, GPU: gs.idx, Reason: ev.Reason}
	if dec.Headline != "" {
		in.Time, in.Reason = dec.IncidentStart, dec.Headline
	}
	d.mu.Lock()
	d.last = in
	d.mu.Unlock()
	if dec.Accepted {
		msg := "critical event: taking crash snapshot"
		if dec.Escalation {
			msg = "critical event: a worse stage of the incident, taking a crash snapshot inside the cooldown"
		}
		gs.log.Error(msg, "reason", ev.Reason, "incident", n, "headline", dec.Headline, "snapshot", dec.Snapshot)
	}
	if dec.Closed {
		d.refused("a crash snapshot", gs.idx, ev.Reason)
	}
	if p == nil {
		return dec, nil
	}
	return dec, &crashPlan{seen: seen, ev: ev, n: n, p: p, path: dec.Snapshot}
}

// crashPlan is a crash snapshot the snapshot Manager accepted for a GPU's
// critical event and that is still to be built from the GPU's recent rows
// and state (gpuState.crashSnapshot): after the event's line is written,
// and for a sample whose row waits on the side goroutine, behind that row.
// Its methods do nothing on a nil plan (no snapshot taken).
type crashPlan struct {
	seen time.Time
	ev   snapshot.Event
	n    uint64 // the GPU's incident count, for the header
	p    *snapshot.Pending
	path string // the snapshot's file, for the loss when dropped
}

// build hands the snapshot's request, gathered by its GPU
// (gpuState.crashSnapshot), to the snapshot Manager, which writes the file
// in the background.
func (c *crashPlan) build(req snapshot.CrashRequest) {
	if c != nil {
		c.p.Build(func() snapshot.CrashRequest { return req })
	}
}

// crashSnapshot gathers the crash snapshot c (nil: none taken) from the
// GPU's recent rows and state and hands it to the snapshot Manager
// (crashPlan.build): the GPU's evidence goes down to the writer, which
// never calls back for it.
func (gs *gpuState) crashSnapshot(c *crashPlan) {
	if c == nil {
		return
	}
	hdr, recent := gs.m.csv.Rows(gs.idx)
	c.build(snapshot.CrashRequest{Header: gs.header(c.ev.Time, c.ev.Reason, c.n), CSVHeader: hdr, Rows: recent,
		Extra: append(gs.procSection(c.seen), gs.healthSection(c.seen)...)})
}

// abandon gives the snapshot up: the work that was to build it was dropped
// (why). The snapshot Manager counts it in snapshot_failures and logs it.
func (c *crashPlan) abandon(why string) {
	if c != nil {
		c.p.Abandon(why)
	}
}

// what names the plan's snapshot for a queue that may drop it.
func (c *crashPlan) what() string { return "crash snapshot " + c.path }

// lostReason is the reason of the critical event of a GPU NVML reports lost.
const lostReason = "GPU lost: NVML_ERROR_GPU_IS_LOST"

// spike asks for a spike snapshot of the spike seen at when (rate-limited by
// the snapshot manager). fans returns the fans' control policies; it is
// called only for a snapshot the manager accepts, and must not call NVML.
func (d *incidentDesk) spike(gs *gpuState, when time.Time, fans func() []string) {
	dec := d.snaps.Spike(gs.idx, func() snapshot.SpikeRequest {
		r := d.rows.Recent(gs.idx) // the spike's row is the last, its cells from the sample
		info := gs.info()
		return snapshot.SpikeRequest{
			Header:      gs.header(when, "FAN_SPIKE", 0),
			Columns:     r.Columns,
			Values:      r.Last,
			CSVHeader:   r.Header,
			Rows:        r.Rows,
			Thresholds:  info.Thresholds,
			FanPolicies: fans(),
		}
	})
	if dec.Accepted {
		gs.log.Warn("fan spike: snapshot taken", "spikes", gs.tr.Counters().Total[anomaly.CountSpikes])
	}
	if dec.Closed {
		d.refused("a fan spike snapshot", gs.idx, "FAN_SPIKE")
	}
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
