package monitor

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/internal/events"
	"github.com/gpu-telemetry/gpu-telemetry/kmsg"
	"github.com/gpu-telemetry/gpu-telemetry/live"
	"github.com/gpu-telemetry/gpu-telemetry/reading"
	"github.com/gpu-telemetry/gpu-telemetry/sampler"
	"github.com/gpu-telemetry/gpu-telemetry/sink"
	"github.com/gpu-telemetry/gpu-telemetry/snapshot"
	"github.com/gpu-telemetry/gpu-telemetry/xid"
)

// runEvents follows the NVML events of every GPU (sampler.FollowEvents:
// each GPU registered once it answers, a failed set reopened with back-off)
// until ctx is done.
func (m *Monitor) runEvents(ctx context.Context) {
	m.host.FollowEvents(ctx, m.log, func(e reading.Event) {
		m.nvmlEvents.Add(1)
		m.onEvent(e)
	}, func(state string) { m.setState(&m.eventsState, state) })
}

// runKmsg follows the kernel log for NVRM Xid lines. NVML events do not
// deliver some Xids (79, 119, 120), so this is the only source for them.
// The log was opened before the start-up wait (OpenKernelLog), or by Run;
// the records logged before the monitor was ready, and after a restart
// in the same boot those since the previous run's last one, come first,
// marked backlog. The position reached is saved in run-state
// (kernlog.go) every kmsgSeqRefresh, once the backlog is read, and at stop,
// off the reading goroutine.
func (m *Monitor) runKmsg(ctx context.Context) {
	r, err := m.klog.r, m.klog.err
	if err != nil {
		if errors.Is(err, kmsg.ErrPermission) {
			m.setState(&m.kmsgState, "permission denied")
			m.log.Warn("cannot read the kernel log (permission denied); Xids NVML does not report (79, 119, 120) will be missed", "path", m.cfg.KmsgPath)
		} else {
			m.setState(&m.kmsgState, "unavailable: "+err.Error())
			m.log.Warn("cannot read the kernel log; Xids NVML does not report (79, 119, 120) will be missed", "path", m.cfg.KmsgPath, "error", err)
		}
		return
	}
	var kc kmsgCounters = r
	m.kmsgReader.Store(&kc)
	r.OnState(func(s string) { m.setState(&m.kmsgState, s) })
	m.setState(&m.kmsgState, "following")
	m.log.Info("following the kernel log for Xids", "path", m.cfg.KmsgPath)
	clockDone := make(chan struct{})
	defer func() { <-clockDone }()
	go func() { defer close(clockDone); m.runKernelClock(ctx) }()
	// The position is saved on a goroutine of its own (a stalled disk must
	// not stall reading): every kmsgSeqRefresh, and at once when a replay
	// has been read, so that a restart loop does not replay the same
	// records again.
	replayed := make(chan struct{}, 1)
	r.OnCaughtUp(func() {
		select {
		case replayed <- struct{}{}:
		default:
		}
	})
	seqDone := make(chan struct{})
	defer func() { <-seqDone; m.saveKmsgSeq() }() // the position at stop
	go func() { defer close(seqDone); m.refreshKmsgSeq(ctx, replayed) }()
	err = r.Run(ctx, func(rec kmsg.Record) {
		m.observeKmsg(rec)
		x, ok := kmsg.ParseXid(rec.Message)
		if !ok {
			m.onKernelLine(rec, time.Now()) // AER, fallen off the bus, RmInitAdapter, GSP
			return
		}
		m.learnXid(x)
		m.kmsgXids.Add(1)
		if rec.Backlog {
			m.kmsgBacklogXids.Add(1)
		}
		gs := m.gpuByBus(x.Bus)
		for _, e := range x.Events(rec, time.Now()) {
			if gs != nil {
				e.GPU, e.BusID = gs.idx, gs.busID()
			}
			m.onEvent(e)
		}
	})
	if err != nil && ctx.Err() == nil {
		m.setState(&m.kmsgState, "stopped: "+err.Error())
		m.log.Warn("kernel log reader stopped", "error", err)
	}
}

// onEvent handles one GPU event from either source.
func (m *Monitor) onEvent(e reading.Event) {
	gs := m.byIndex[e.GPU]
	line := sink.Event{Time: e.Time, GPU: e.GPU, Bus: e.BusID, Source: e.Source.String()}
	data := strconv.FormatUint(e.Data, 10)
	switch e.Kind {
	case reading.EventClock:
		n, alone, burst := m.clocks.Add(e.Time)
		if alone {
			line.Type, line.Fields = sink.TypeClock, sink.KV("data", data)
			m.eventLine(line)
		}
		if burst {
			m.log.Info("clock event burst", "events", n, "window", events.ClockBurstWindow)
			line.Type, line.Fields = sink.TypeClockBurst, sink.KV("events", strconv.Itoa(n), "window", "1s")
			m.eventLine(line)
		}
		return
	case reading.EventPState:
		line.Type, line.Fields = sink.TypePState, sink.KV("data", data)
		m.eventLine(line)
		return
	case reading.EventOther:
		line.Type, line.Fields = "0x"+strconv.FormatUint(e.NVMLType, 16), sink.KV("data", data)
		m.eventLine(line)
		return
	case reading.EventHealth:
		h, _ := sampler.HealthEvent(e.NVMLType)
		sev := "notable"
		if h.Critical {
			sev = "critical"
		}
		line.Type, line.Fields = sink.TypeHealthEvent, sink.KV("event", h.Name, "severity", sev, "data", data)
		var d snapshot.Decision
		var plan *crashPlan
		if h.Critical && gs != nil {
			d, plan = m.inc.critical(gs, e.Time, "NVML event: "+h.Name)
		}
		m.incidentLine(line, d)
		plan.build() // after the line: it reads the GPU's rows, which may wait on the disk
		return
	}

	// The de-duplication and the first report's incident decision are one
	// step for the GPU (reportMu): a duplicate from the other source,
	// arriving on its own goroutine, then names the incident the first
	// report was counted in, never none or the GPU's previous one.
	if gs != nil {
		gs.reportMu.Lock()
	}
	dup, first := m.dedup.Duplicate(e)
	var reason string
	var ev snapshot.Event
	// A record read after the fact still takes its snapshot (the GPU may
	// still be broken: its state now is the evidence left), and says so.
	from := e.Source.String()
	if e.Backlog {
		kt := kernelTimeField(e.KernelTime)
		from += " backlog, logged at " + kt.Key + "=" + kt.Value
	}
	switch e.Kind {
	case reading.EventXid:
		// The catalog reads the driver's text after the code (NVLink 5
		// fields, Xid 154's action); an NVML report has none.
		ex := xid.ExplainDetail(int(e.Data), e.Xid)
		line.Type, line.Fields = sink.TypeXid, sink.KV(ex.Fields()...)
		reason = ex.Reason(from)
		ev = snapshot.XidEvent(e.Time, ex, reason)
	case reading.EventRecovery:
		words := e.Xid.RecoveryWords
		line.Type, line.Fields = sink.TypeRecoveryAction, sink.KV(xid.RecoveryFields(e.Data, words)...)
		reason = xid.RecoveryReason(e.Data, words, from)
		ev = snapshot.RecoveryEvent(e.Time, e.Data, reason)
	case reading.EventLost:
		line.Type = sink.TypeGPULost
		reason = "GPU lost (" + e.Source.String() + ")"
		ev = snapshot.Event{Time: e.Time, What: "GPU lost", Reason: reason, Stage: snapshot.StageLost}
	}
	if e.Source == reading.SourceKmsg {
		// The record's own timestamp, whatever it reads: 0.000000 is a
		// time (logged before the kernel's clock ran), not "none".
		line.Fields = append(line.Fields, kernelTimeField(e.KernelTime))
	}
	if e.Text != "" {
		// As the kernel printed it (\xNN kept): events.log is UTF-8.
		line.Fields = append(line.Fields, sink.Field{Key: "text", Value: kmsg.Printed(e.Text)})
	}
	if dup {
		m.dupXids.Add(1)
		line.Fields = append(line.Fields, sink.Field{Key: "duplicate_of", Value: first.String()})
	}
	if e.Backlog {
		line.Fields = append(line.Fields, backlogField)
	}
	if dup {
		// The first report's incident.
		if gs != nil {
			line.Incident, line.Snapshot = m.snaps.Incident(gs.idx)
			gs.reportMu.Unlock()
		}
		m.eventLine(line)
		return
	}
	if gs == nil {
		m.eventLine(line)
		m.log.Warn("critical event for a GPU that is not monitored", "bus", e.BusID, "reason", reason)
		return
	}
	at := m.happenedAt(e)
	switch e.Kind {
	case reading.EventXid:
		if !e.Backlog {
			// A record read after the fact does not flag the row being
			// written now: it was logged before it (events.log has it,
			// with its ktime, and report places it by that).
			gs.addXid(int64(e.Data))
		}
		name := xid.Name(int(e.Data))
		gs.slot.Update(func(g *live.GPU) { g.Xid(e.Data, at, name) })
	case reading.EventRecovery:
		name := xid.RecoveryActionName(e.Data)
		gs.slot.Update(func(g *live.GPU) { g.Recovery(e.Data, at, name) })
	case reading.EventLost:
		gs.slot.Update(func(g *live.GPU) { g.Lost(e.Time) })
	}
	// Sample the GPU at the next tick even if it is backing off after
	// failures: the row right after an Xid shows the state it left behind
	// (and carries the XID flag without waiting out the back-off).
	gs.nextTry.Store(0)
	ev.Time = at
	// The line after the snapshot's decision: it names the incident and
	// the snapshot. The snapshot is built after the line: it reads the
	// GPU's rows, which may wait on the disk.
	d, plan := m.inc.criticalEvent(gs, e.Time, ev)
	gs.reportMu.Unlock()
	if ev.Stage == snapshot.StageNotice {
		// Xid 45 or 154, a recovery action: the consequence of other
		// events, which are the critical ones.
		gs.log.Warn("GPU event (reports the consequence of other events)", "reason", reason)
	} else {
		gs.log.Error("critical GPU event", "reason", reason)
	}
	m.incidentLine(line, d)
	plan.build()
}

// happenedAt is when e happened, for the live view (last Xid, last recovery
// action, and their age in status and the check): its receipt time, or for
// a kernel record read after the fact (Backlog) when the kernel logged it,
// its printk time through the kernel log clock (the estimate once a fresh
// record has been read; before that CLOCK_MONOTONIC, unchecked, as
// dmesg_time), and never later than when it was read. Like e.Time it
// carries Go's monotonic reading, so its age is measured on that clock.
func (m *Monitor) happenedAt(e reading.Event) time.Time {
	return m.loggedAt(e.Time, e.KernelTime, e.Backlog)
}

// loggedAt is when a kernel record read at read, with printk time ktime,
// happened: read, or for a record read after the fact (backlog) ktime
// through the kernel log clock, never later than read (see happenedAt).
func (m *Monitor) loggedAt(read time.Time, ktime time.Duration, backlog bool) time.Time {
	if !backlog {
		return read
	}
	if t := m.kclock.clock.Wall(ktime); t.Before(read) {
		return t
	}
	return read
}
