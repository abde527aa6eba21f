package monitor

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/internal/events"
	"github.com/gpu-telemetry/gpu-telemetry/kmsg"
	"github.com/gpu-telemetry/gpu-telemetry/live"
	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

// runKmsg follows the kernel log for the driver's lines: NVML events do not
// deliver some Xids (79, 119, 120), so it is the only source for them. The
// records logged before the monitor was ready (and after a restart in the
// same boot, since the previous run's last one) come first, as backlog.
func (m *Monitor) runKmsg(ctx context.Context) {
	r, err := m.klog.r, m.klog.err
	if err != nil {
		if errors.Is(err, kmsg.ErrPermission) {
			m.setState(&m.states.kmsg, "permission denied")
			m.log.Warn("cannot read the kernel log (permission denied); Xids NVML does not report (79, 119, 120) will be missed", "path", m.cfg.KmsgPath)
		} else {
			m.setState(&m.states.kmsg, "unavailable: "+err.Error())
			m.log.Warn("cannot read the kernel log; Xids NVML does not report (79, 119, 120) will be missed", "path", m.cfg.KmsgPath, "error", err)
		}
		return
	}
	r.OnState(func(s string) { m.setState(&m.states.kmsg, s) })
	m.setState(&m.states.kmsg, "following")
	m.log.Info("following the kernel log for Xids", "path", m.cfg.KmsgPath)
	var wg sync.WaitGroup
	defer func() { wg.Wait(); m.saveKmsgSeq() }() // the position at stop
	wg.Go(func() { m.runKernelClock(ctx) })
	// The position is saved on a goroutine of its own (a stalled disk must
	// not stall reading): every kmsgSeqRefresh, at stop, and at once when a
	// replay has been read, so that a restart loop does not replay it again.
	replayed := make(chan struct{}, 1)
	r.OnCaughtUp(func() { nudge(replayed, struct{}{}) })
	wg.Go(func() { every(ctx, kmsgSeqRefresh, replayed, m.saveKmsgSeq) })
	standIn := m.klog.standIn
	err = r.Run(ctx, func(rec kmsg.Record) {
		if standIn != nil {
			rec = standIn(rec)
		}
		m.observeKmsg(rec)
		m.onKernelRecord(rec, time.Now())
	})
	if err != nil && ctx.Err() == nil {
		m.setState(&m.states.kmsg, "stopped: "+err.Error())
		m.log.Warn("kernel log reader stopped", "error", err)
	}
}

// kernelXidEvents are the events of the kernel's Xid record rec (x parsed),
// read at now, on the GPU its bus id names when that GPU is monitored.
func (m *Monitor) kernelXidEvents(x kmsg.XidReport, rec kmsg.Record, now time.Time) []reading.Event {
	evs := x.Events(rec, now)
	if gs := m.gpuByBus(x.Bus); gs != nil {
		for i := range evs {
			evs[i].GPU, evs[i].BusID = gs.idx, gs.busID()
		}
	}
	return evs
}

// onEvent carries out what the event stage (internal/events) makes of one
// GPU event from any source: the GPU's incident and crash snapshot, the live
// view, the Xid flag of the GPU's next row, the daemon's log and the
// events.log lines.
func (m *Monitor) onEvent(e reading.Event) {
	gs := m.byIndex[e.GPU]
	var r events.Record
	var plan crashPlan
	var act judged
	if gs == nil {
		r = m.ev.Handle(e)
	} else {
		// The de-duplication and the first report's incident decision are
		// one step for the GPU (reportMu): a duplicate from the other source
		// then names the incident the first report was counted in, never
		// none or the GPU's previous one.
		gs.reportMu.Lock()
		r = m.ev.Handle(e)
		if r.FlagXid {
			gs.addXid(int64(e.Data))
		}
		if e.Op != nil { // an operational event, Xid or not, duplicate or not
			gs.slot.Update(func(g *live.GPU) { g.OpEvent(e.Time, e.Op, e.Data, e.Kind == reading.EventXid) })
		}
		if r.Wake {
			// Judged in the report's step, so that its crash snapshot
			// shows the action it asks for and the other source's copy
			// does not overtake its line; written after its lines.
			act = gs.wake(r, e.Xid)
		}
		switch {
		case r.Duplicate:
			if r.Joins != nil {
				plan.d.Incident, plan.d.Snapshot = m.snaps.Attach(gs.idx, *r.Joins)
			}
			if plan.d.Incident == "" {
				plan.d.Incident, plan.d.Snapshot = m.snaps.Incident(gs.idx)
			}
		case r.Critical != nil:
			plan = gs.criticalEvent(e.Time, *r.Critical)
		}
		gs.reportMu.Unlock()
	}
	if r.FirstHeld {
		// An application's Xid over its burst limit: the rest are counted
		// and summed up in events.log when their window ends.
		logFirstLoss(m.log, "xid_lines_suppressed", "an Xid line of an application's fault (over "+strconv.Itoa(events.LineBurst)+" of one code per GPU per minute; still counted in xids_total)",
			slog.Int("gpu", e.GPU), slog.String("kind", r.Held))
	}
	switch {
	case r.Alert == events.Quiet:
	case gs == nil:
		m.log.Warn("critical event for a GPU that is not monitored", "bus", e.BusID, "reason", r.Reason)
	case r.Alert == events.Notice:
		gs.log.Warn("GPU event (reports the consequence of other events)", "reason", r.Reason)
	case r.Alert == events.Error:
		gs.log.Error("critical GPU event", "reason", r.Reason)
	}
	m.carryOut(gs, r, plan)
	if gs != nil {
		act.write(gs)
	}
}

// windowsEnded writes the lines that sum up what the burst limits held in
// the windows ended by now (at stop, in every window: Run hands them to
// events.log's Close).
func (m *Monitor) windowsEnded(now time.Time) {
	for _, l := range m.ev.WindowsEnded(now, false) {
		m.eventLine(l)
	}
}

// carryOut writes record r's events.log lines, the last (the event's own)
// naming the incident and snapshot plan decided on, then gathers that
// snapshot for GPU gs (nil: not monitored): it reads the GPU's rows, which
// may wait on the disk, so it comes after the lines.
func (m *Monitor) carryOut(gs *gpuState, r events.Record, plan crashPlan) {
	if r.Burst > 0 {
		m.log.Info("clock event burst", "events", r.Burst, "window", events.ClockBurstWindow)
	}
	for i, l := range r.Lines {
		if i == len(r.Lines)-1 {
			m.incidentLine(l, plan.d)
		} else {
			m.eventLine(l)
		}
	}
	gs.crashSnapshot(plan)
}
