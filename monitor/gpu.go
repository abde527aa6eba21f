package monitor

import (
	"context"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/action"
	"github.com/gpu-telemetry/gpu-telemetry/anomaly"
	"github.com/gpu-telemetry/gpu-telemetry/fanguard"
	"github.com/gpu-telemetry/gpu-telemetry/live"
	"github.com/gpu-telemetry/gpu-telemetry/reading"
	"github.com/gpu-telemetry/gpu-telemetry/sampler"
	"github.com/gpu-telemetry/gpu-telemetry/sink"
	"github.com/gpu-telemetry/gpu-telemetry/snapshot"
)

// Back-off as the reference logger gpu-telemetry-deep.py did: after 5
// failed samples in a row a GPU is tried every 5 s, after 10 every 30 s (a
// faulted GPU answers only after long timeouts: polling it at 10 Hz only
// queues calls). A lost GPU is re-probed every 1 s doubling to 60 s.
const (
	failSlowAfter  = 5
	failSlowEvery  = 5 * time.Second
	failStopAfter  = 10
	failStopEvery  = 30 * time.Second
	lostFirstRetry = time.Second
	lostMaxRetry   = time.Minute
)

// gpuState is one GPU's pipeline. Every sample goes one way through it, on
// the GPU's worker goroutine (handle): classify -> detect -> record ->
// publish -> incidents. Readers see only the published view (slot), which
// the poll loop writes too while the worker is stuck (hung).
type gpuState struct {
	m    *Monitor
	g    *sampler.GPU
	w    *sampler.Worker
	tr   *anomaly.Tracker
	idx  int
	log  *slog.Logger
	slot *live.Slot
	pr   *sampler.ProcReader // the slow tier's process reads (procs.go)
	fan  *fanguard.Guard     // --fan-guard (fanguard.go); nil: off
	// The bus id sysfs lists for a GPU stuck at start (busesFromSysfs, in New).
	sysBus reading.Opt[reading.PCIAddr]

	// Worker goroutine only.
	fails     int
	lostRetry time.Duration // the re-probe period while lost; 0: not lost
	known     known         // what the monitor has built from the GPU's static facts (lateFacts)

	// Shared.
	nextTry   atomic.Int64 // Config.mono (ns) before which the poll loop does not dispatch (backOff); 0: none
	delivered atomic.Bool  // at least one row written (readiness)
	sideRows  atomic.Int64 // jobs queued that write this GPU's rows (queueRows)

	// hmu orders a hang's report (hung, poll goroutine) against the return
	// of the sample it reports (classify, worker): either the report comes
	// first and the late row is queued behind the hang's rows, or the sample
	// came back first and there is no hang left to report (locks in the
	// order hmu, the slot's).
	hmu        sync.Mutex
	stalled    bool          // a hang of the sample in flight was reported
	stallStart time.Duration // Config.mono when the hang's sample was dispatched: the hang's age runs from it
	// stallBegan is stallStart on the wall clock, reckoned once at the
	// hang's first report: reckoned at each, a wall clock stepped forward
	// (chrony's makestep) would move the start of the same hang past the
	// last judgement when its stuck call changes (a new occurrence to
	// anomaly.Repair: counted again, an ack of it no longer covering it).
	stallBegan time.Time
	// When the last sample classified was dispatched (Worker.Busy): its
	// identity, compared for equality only; -1 before any.
	finished time.Duration
	// hungLine is closed once the hang's NVML_HUNG line is written (on a
	// goroutine of its own: a stalled disk must not stall the poll loop);
	// classify waits for it before the recovery's line. nil: none pending.
	hungLine chan struct{}

	health atomic.Pointer[HealthView] // written by the worker (health.go)
	// sxid names the fatal SXid that raised nvswitch_fatal (sxid.go), for
	// its HEALTH_CRITICAL line and incident; written before the raise.
	sxid      atomic.Pointer[pendingSXid]
	sxidTaken atomic.Uint64     // the last pending fatal SXid taken (pendingSXid.seq)
	fabric    atomic.Int32      // fabricOn, fabricOff, fabricUnknown: written by the worker (sxid.go)
	repair    repairState       // the repair action (repair.go)
	links     anomaly.LinkWatch // worker only

	reportMu sync.Mutex // an Xid report's de-duplication and incident decision are one step (onEvent)
	// cperQueued: a read of the GPU's CPER records is on the side queue
	// (readCPER): an Xid flood queues one read, not one per Xid, so it
	// never crowds out snapshots.
	cperQueued atomic.Bool

	xids dropQueue[int64] // Xids to flag on the next row; closed at shutdown (closeXids)

	// Poll goroutine only: ticks skipped while the sample in flight was
	// within its deadline, the process read last published, and whether the
	// GPU was backing off when this tick began (procTick goes by it, not by
	// nextTry, which the tick's own sample may have set since).
	skipped    []instant
	procsShown *reading.Procs
	offAtTick  bool
}

func newGPUState(m *Monitor, g *sampler.GPU) *gpuState {
	idx, cfg := g.Info().Index, &m.cfg
	// Room for the ticks a stuck sample can skip before its deadline.
	skips := min(int(cfg.Deadline/cfg.Interval)+2, 1024)
	gs := &gpuState{m: m, g: g, idx: idx, tr: anomaly.NewTracker(idx, cfg.Anomaly),
		log: m.log.With("gpu", idx), xids: dropQueue[int64]{jobs: make(chan int64, 8)}, skipped: make([]instant, 0, skips),
		slot: live.NewSlot(g.Info()), finished: -1}
	if g.FactsKnown() {
		info := g.Info()
		// A GPU whose UUID or bus id did not read may stand in for a --gpu
		// selector pending (sampler.Open): judged once they read (lateFacts).
		gs.known = known{facts: true, uuid: info.UUID != "", bus: info.BusID != "", named: info.UUID != "" && info.BusID != ""}
	}
	gs.w = sampler.NewWorker(g, gs.handle, cfg.mono())
	gs.fan = m.newFanGuard(gs)
	return gs
}

// addXid queues an Xid flag for the GPU's next row.
func (gs *gpuState) addXid(code int64) {
	switch closed, full := gs.xids.put(code); {
	case closed:
		gs.dropXid(code, "an XID flag reported after shutdown, when no row follows")
	case full:
		gs.dropXid(code, "an XID flag for the next row, with too many already waiting (the Xid is in events.log, or counted in its XID_LINES_SUPPRESSED line)")
	}
}

// closeXids runs at shutdown, once the GPU writes no more rows: the flags
// still waiting, and any reported later, are counted as dropped. Like
// takeXids it drains under the queue's lock: a flag a late row takes is
// not also counted.
func (gs *gpuState) closeXids() {
	gs.xids.mu.Lock()
	defer gs.xids.mu.Unlock()
	gs.xids.closed = true
	gs.xids.drain(func(code int64) {
		gs.dropXid(code, "an XID flag waiting for the GPU's next row, which did not come before shutdown (the Xid is in events.log, or counted in its XID_LINES_SUPPRESSED line)")
	})
}

// dropXid counts an Xid flag no row carries; the first is logged (gs.log names the GPU).
func (gs *gpuState) dropXid(code int64, what string) {
	lose(gs.m.reg, gs.log, xidFlagsDropped, what, slog.Int64("xid", code))
}

func (gs *gpuState) takeXids(s *reading.Sample) {
	gs.xids.mu.Lock()
	defer gs.xids.mu.Unlock()
	gs.xids.drain(func(x int64) { s.Flags.Add(reading.Flag{Kind: reading.FlagXid, A: x}) })
}

// handle is the per-sample pipeline, on the GPU's worker goroutine. The
// snapshots come last, once the sample is a row and published: their rows
// end with it and their headers count it.
func (gs *gpuState) handle(s *reading.Sample) {
	if k := gs.known; !k.facts || !k.uuid || !k.bus { // something left to learn
		gs.m.lateFacts(gs)
	}
	stalled, critical := gs.classify(s)
	gs.takeXids(s)
	gs.fabricSample(s)
	r := gs.tr.Observe(s, s.Time)
	if gs.fan != nil {
		gs.fan.Observe(s, gs.m.cfg.mono()) // after the detectors (an inversion), before the row (its flag)
	}
	if critical.ev.Reason == "" {
		critical = gs.healthCritical(s.Time, &r)
	}
	queued := gs.record(s, &r, stalled, critical)
	gs.publish(s)
	// The repair action is judged before the incident's snapshot is
	// gathered (its header shows it); its line follows the incident's.
	j := gs.judge(s.Time, s.Status != reading.StatusAnswered, nil)
	gs.incidents(s.Time, queued, critical, r.Spike)
	j.write(gs)
}

// event is an events.log line of the GPU at t; kv alternates keys and values.
func (gs *gpuState) event(t time.Time, typ string, kv ...string) sink.EventLine {
	return sink.EventLine{Time: t, GPU: gs.idx, Bus: gs.g.Info().BusID, Type: typ, Fields: sink.KV(kv...)}
}

// sampleIncident is the critical event a sample raises (its crash
// snapshot's reason and stage) and its events.log line. Zero: none.
type sampleIncident struct {
	ev   snapshot.Event
	line sink.EventLine
}

// incidents raises the sample's critical event (its line at once) and asks
// for a spike snapshot. When the sample's row was queued, the snapshots are
// gathered behind it, since their rows end with it.
func (gs *gpuState) incidents(when time.Time, queued bool, critical sampleIncident, spike bool) {
	m := gs.m
	if critical.ev.Reason != "" {
		plan := gs.criticalEvent(when, critical.ev)
		m.incidentLine(critical.line, plan.d)
		if plan.d.Accepted && queued {
			m.side.enqueue(sideJob{what: "the " + plan.what() + " (" + critical.ev.Reason + ")", gpu: gs.idx,
				f: func() { gs.crashSnapshot(plan) }, dropped: func(why string) { gs.m.snaps.Lost(plan.d, why) }})
		} else {
			gs.crashSnapshot(plan)
		}
	}
	if spike {
		// The fans' policies are the worker's, from memory (no NVML call
		// after classify, where a hang could not be reported): read here,
		// also for a queued request.
		fans := gs.g.FanPolicies()
		if queued {
			m.side.queue("a fan spike snapshot request", gs.idx, func() { gs.spikeSnapshot(when, fans) })
		} else {
			gs.spikeSnapshot(when, fans)
		}
	}
}

// classify looks at the sample's status: recovery after a hang, back-off
// after failures, loss. It reports whether the sample ends a hang, and its
// critical event.
func (gs *gpuState) classify(s *reading.Sample) (stalled bool, critical sampleIncident) {
	m := gs.m
	gs.hmu.Lock()
	stalled, st, hungLine := gs.stalled, gs.stallStart, gs.hungLine
	gs.stalled, gs.hungLine = false, nil
	if since, busy := gs.w.Busy(); busy {
		gs.finished = since
	}
	gs.hmu.Unlock()
	if hungLine != nil {
		<-hungLine // the hang's line first
	}
	if stalled {
		// The sample began before the hang rows written while it was stuck;
		// its readings are of when the driver answered, so it is stamped
		// then: rows never go back in time.
		s.Time = time.Now()
		s.KernelTime = m.host.KernelTime(s.Time)
		stall := m.cfg.mono() - st
		gs.log.Warn("NVML answered again after a hang", "stall", stall.Round(time.Millisecond), "hung_rows", gs.slot.Get().HungRows)
		m.eventLine(gs.event(s.Time, sink.TypeNVMLRecovered, "stall_ms", strconv.FormatInt(stall.Milliseconds(), 10)))
		gs.tr.Forget()
	}
	now := s.Time
	switch s.Status {
	case reading.StatusAnswered:
		if gs.fails > 0 || gs.lostRetry > 0 {
			gs.log.Info("GPU answers again", "after_failures", gs.fails, "was_lost", gs.lostRetry > 0)
			m.eventLine(gs.event(now, sink.TypeNVMLRecovered, "failures", strconv.Itoa(gs.fails)))
		}
		gs.fails, gs.lostRetry = 0, 0
		gs.nextTry.Store(0)
	case reading.StatusLost:
		s.Flags.Add(reading.Flag{Kind: reading.FlagGPULost})
		if gs.lostRetry == 0 {
			gs.lostRetry = lostFirstRetry
			gs.log.Error("GPU is lost (NVML_ERROR_GPU_IS_LOST); re-probing with back-off")
			line := gs.event(now, sink.TypeGPULost)
			line.Source = "poll"
			critical = sampleIncident{snapshot.Event{Time: now, Reason: "GPU lost: NVML_ERROR_GPU_IS_LOST", What: "GPU lost", Stage: snapshot.StageLost}, line}
		} else {
			gs.lostRetry = min(2*gs.lostRetry, lostMaxRetry)
		}
		gs.backOff(gs.lostRetry)
	case reading.StatusFailed:
		gs.fails++
		s.Flags.Add(reading.Flag{Kind: reading.FlagNVMLFailed, S: s.Err[:min(len(s.Err), 80)]})
		if gs.fails == 1 {
			gs.log.Error("NVML failed: GPU crash?", "error", s.Err)
			critical = sampleIncident{fault(now, "NVML_FAILED: "+s.Err), gs.event(now, sink.TypeNVMLFailed, "error", s.Err)}
		}
		switch {
		case gs.fails > failStopAfter:
			gs.backOff(failStopEvery)
		case gs.fails >= failSlowAfter:
			if gs.fails == failSlowAfter {
				gs.log.Warn("GPU still failing; backing off", "failures", gs.fails)
			}
			gs.backOff(failSlowEvery)
		}
	}
	return stalled, critical
}

// backOff keeps the poll loop from dispatching the GPU for d, on the
// monotonic clock: a step of the wall clock does not move the next try.
func (gs *gpuState) backOff(d time.Duration) {
	gs.nextTry.Store(int64(gs.m.cfg.mono() + d))
}

// record writes the sample's log notices, events.log lines and CSV row; it
// reports whether the row was queued rather than written.
func (gs *gpuState) record(s *reading.Sample, r *anomaly.Result, stalled bool, critical sampleIncident) (queued bool) {
	m := gs.m
	now := s.Time
	for i := range r.NumNotices() {
		n := r.Notice(i)
		msg, attrs := n.LogAttrs()
		m.log.LogAttrs(context.Background(), n.Level(), msg, attrs...) // the notice carries the gpu
	}
	if t, ok := r.TDP.Get(); ok {
		m.eventLine(gs.event(now, sink.TypeTDPChange,
			"from", strconv.FormatUint(uint64(t.FromW()), 10)+"W", "to", strconv.FormatUint(uint64(t.ToW()), 10)+"W",
			"delta", strconv.FormatInt(t.DeltaW(), 10)+"W"))
	}
	gs.recordHealth(s, r, critical)
	for range s.Flags.Dropped {
		lose(m.reg, gs.log, flagsDropped, "flags beyond the row's capacity (the row keeps the first ones)",
			slog.Int("gpu", gs.idx), slog.String("kept", s.Flags.String()))
	}
	defer gs.delivered.Store(true)
	if queued = stalled || gs.sideRows.Load() > 0; !queued {
		m.csv.Write(s)
		return false
	}
	// Rows of this GPU are queued (this stall's hang rows, at least): this
	// one goes after them.
	what := "a row queued behind the GPU's earlier rows"
	if stalled {
		what = "the late row of a sample that was stuck in the driver"
	}
	cp := *s
	gs.queueRows(what, nil, func() { m.csv.Write(&cp) })
	return true
}

// queueRows queues f, which writes the GPU's rows, counted in sideRows
// until it has run or was dropped. While any are queued the worker queues
// its rows behind them, so the file stays in time order.
func (gs *gpuState) queueRows(what string, dropped func(why string), f func()) {
	gs.sideRows.Add(1)
	gs.m.side.enqueue(sideJob{what: what, gpu: gs.idx, rows: &gs.sideRows, dropped: dropped, f: func() {
		defer gs.sideRows.Add(-1)
		f()
	}})
}

// publish updates the GPU's published view. Per-sample accumulators for the
// live readers belong in live.GPU.Observe, which runs here under the slot's
// lock.
func (gs *gpuState) publish(s *reading.Sample) {
	info, interval := gs.g.Info(), gs.m.cfg.Interval
	hv := gs.health.Load()
	fv := gs.fanView()
	gs.slot.Update(func(g *live.GPU) {
		g.Info = info
		g.FanGuard = fv
		g.Observe(s, interval)
		if hv != nil {
			g.HealthLevel, g.HealthReasons = hv.Level, hv.Reasons
			g.Links = nil
			if hv.Links.N > 0 {
				g.Links = &hv.Links
			}
			g.RemapHist = hv.RemapHist
		}
	})
	gs.slot.Record(s) // the history ring the terminal charts (live.History)
	if a := gs.m.procs.atop; a != nil {
		a.Sample(s) // atop's per-second figures from the rows: no NVML call of its own
	}
}

// instant is one tick's time, the repair action's Instant: the wall clock
// stamps rows, the monotonic one measures hangs.
type instant = anomaly.Instant

// hung reports a GPU whose sample has been stuck in the driver since the
// monotonic reading since: on a stall's first report it backfills NVML_HUNG
// rows for the ticks skipped within the deadline (the timeline shows the
// hang, not a gap) and takes a crash snapshot while the call is stuck; then
// one row per tick. On the poll goroutine, it only queues the file work. A
// sample that came back meanwhile (hmu) is not reported: false.
func (gs *gpuState) hung(now instant, since time.Duration, fn sampler.Fn) (reported bool) {
	m := gs.m
	gs.hmu.Lock()
	defer gs.hmu.Unlock()
	if gs.finished == since {
		return false // the sample came back (classify) since the poll loop saw it stuck
	}
	times, first := []instant{now}, !gs.stalled
	if first {
		gs.stalled, gs.stallStart, gs.stallBegan = true, since, now.Wall.Add(since-now.Mono)
		times = append(slices.Clone(gs.skipped), now)
	}
	start, began := gs.stallStart, gs.stallBegan
	gs.skipped = gs.skipped[:0]
	// Published by the poll loop, the worker being stuck, on the wall clock.
	gs.slot.Update(func(g *live.GPU) { g.Hung(fn.String(), began, start) })
	fans := min(gs.g.Info().NumFans, reading.MaxFans)
	what := "NVML_HUNG rows"
	var plan crashPlan
	if first {
		// The hang's line is written now, not behind the rows on the side
		// goroutine, which may lag or drop them; the snapshot is built
		// behind the rows, which it ends with.
		elapsed := now.Mono - start
		gs.log.Error("GPU not answering: NVML call stuck", "function", fn.String(), "elapsed", elapsed.Round(time.Millisecond))
		line := sink.EventLine{Time: now.Wall, GPU: gs.idx, Bus: gs.busID(), Type: sink.TypeNVMLHung,
			Fields: sink.KV("function", fn.String(), "elapsed_ms", strconv.FormatInt(elapsed.Milliseconds(), 10))}
		plan = gs.criticalEvent(now.Wall, fault(now.Wall, "NVML_HUNG("+fn.String()+","+strconv.FormatInt(elapsed.Milliseconds(), 10)+"ms)"))
		written := make(chan struct{})
		gs.hungLine = written
		go func() { defer close(written); m.incidentLine(line, plan.d) }()
		what = "the first NVML_HUNG rows of a hang"
		if plan.d.Accepted {
			what += " and its " + plan.what()
		}
	}
	gs.queueRows(what, func(why string) { gs.m.snaps.Lost(plan.d, why) }, func() {
		for _, t := range times {
			elapsed := t.Mono - start
			s := reading.Sample{GPU: gs.idx, Time: t.Wall, KernelTime: m.host.KernelTime(t.Wall), Status: reading.StatusHung,
				Err: fn.String(), HungFor: elapsed, NumFans: fans}
			s.Flags.Add(reading.Flag{Kind: reading.FlagNVMLHung, S: fn.String(), A: elapsed.Milliseconds()})
			gs.takeXids(&s)
			m.csv.Write(&s)
		}
		n := uint64(len(times))
		gs.slot.Update(func(g *live.GPU) { g.HungRows += n })
		gs.delivered.Store(true)
		gs.crashSnapshot(plan)
	})
	return true
}

// header builds a snapshot header from the GPU's state.
func (gs *gpuState) header(when time.Time, reason string, event uint64) snapshot.Header {
	m, info, c, v := gs.m, gs.g.Info(), gs.tr.Counters(), gs.slot.Get()
	h := snapshot.Header{Time: when, GPUIndex: gs.idx, Version: "gpu-telemetry " + m.cfg.Version, Host: m.ident,
		GPUName: info.Name, BusID: gs.busID(), UUID: info.UUID, Serial: info.Serial, Reason: reason,
		KernelClock: m.kernelClockLine(), Uptime: time.Since(m.start), Samples: v.Samples, PeakTempC: c.PeakTempC, EventNumber: event}
	if gs.fan != nil {
		h.FanGuard = gs.fan.View().String()
	}
	if a := v.Action; a.Action != action.None {
		h.Action = a.Action.String() + ": " + a.Reason()
	}
	// The detectors' counters headers show, then the GPU's own.
	for i, d := range anomaly.CounterDefs {
		if d.Snapshot != "" {
			h.Counters = append(h.Counters, snapshot.Counter{Name: d.Snapshot, Total: c.Total[i]})
		}
	}
	h.Counters = append(h.Counters,
		snapshot.Counter{Name: "nvml_failures", Total: v.Failures},
		snapshot.Counter{Name: "hung_rows", Total: v.HungRows})
	if p, ok := c.PeakPowerMW.Get(); ok {
		h.PeakPowerW = reading.Some(float64(p) / 1000)
	}
	return h
}
