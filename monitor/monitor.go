package monitor

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/action/board"
	"github.com/gpu-telemetry/gpu-telemetry/internal/counters"
	"github.com/gpu-telemetry/gpu-telemetry/internal/events"
	"github.com/gpu-telemetry/gpu-telemetry/internal/kclock"
	"github.com/gpu-telemetry/gpu-telemetry/live"
	"github.com/gpu-telemetry/gpu-telemetry/reading"
	"github.com/gpu-telemetry/gpu-telemetry/runstate"
	"github.com/gpu-telemetry/gpu-telemetry/sampler"
	"github.com/gpu-telemetry/gpu-telemetry/sink"
	"github.com/gpu-telemetry/gpu-telemetry/snapshot"
)

// Rotation sizes for the line logs: gpu-telemetry-deep.py's (the reference
// logger), which operators' disk budgets were sized for.
const (
	eventsLogMB  = 50
	summaryLogMB = 10
	logBackups   = 5
)

// Monitor is the running logger: the GPUs' pipelines, the parts that
// write what they leave behind, the poll loop, and the listeners beside it.
type Monitor struct {
	cfg     Config
	log     *slog.Logger
	host    *sampler.Host
	ident   reading.Identity // the host's name, machine id and boot id, read once at start
	start   time.Time
	gpus    []*gpuState
	byIndex map[int]*gpuState

	csv             *sink.CSV
	events, summary lineLog
	snaps           *snapshot.Manager
	ev              *events.Stage      // every NVML, kernel log and poll event
	reg             *counters.Registry // every part's counters
	board           *live.Board        // what the live readers read

	loop     pollLoop
	side     sideQueue // file work the poll loop and the workers must not wait for
	cper     cperReader
	kern     kernelGPUs
	sxid     atomic.Pointer[pendingSXid] // the host's latest fatal SXid (sxid.go)
	klog     *KernelLog                  // nil: no kernel log
	kclock   *kernelClock
	runState runstate.Saver
	procs    procParts
	journal  journalForwarder // events.log lines for the journal (Config.Journal)
	states   hostStates

	enumerating atomic.Bool // a GPU enumeration is inside the driver
}

// pollLoop is the poll loop's state (its counts are in the registry), and
// the periodic work it paces so that it runs while the process is awake for
// a tick, not on timers of its own.
type pollLoop struct {
	ready                 bool      // poll goroutine only: every GPU has written a row
	lastSummary, lastSync time.Time // poll goroutine only
	syncTick, secondTick  chan time.Time
	windowStart           atomic.Int64 // Config.mono (ns) when the summary window began

	cadence *cadence
	// For the watchdog pinger: when the current or last tick began
	// (Config.mono, ns), and whether the loop is in it.
	began    atomic.Int64
	inTick   atomic.Bool
	tickHook func(now time.Time) // tests: runs at the end of every tick
}

// hostStates are the kernel log's and the NVML event stream's states, the
// recent row drops and the last incident on any GPU, for the host view; and
// whether a snapshot request refused at shutdown was logged.
type hostStates struct {
	mu           sync.Mutex
	kmsg, events string
	drops        dropHistory
	incident     live.Incident
	missing      []*board.Missing // set once at start (Monitor.missingBoard)
	// boardsMissing are the boards raised missing (raiseMissing,
	// missingFromState); shortfall is how many fewer GPUs than
	// --expect-gpus were enumerated. gpus_missing is the larger: the
	// shortfall may count the same boards.
	boardsMissing, shortfall atomic.Int64
	// compared are the UUIDs the start compared with the previous run's
	// boards (startBootCheck): a GPU identified later is compared once
	// (lateBoard) unless it is one of them. Set before any sample.
	compared map[string]bool
	// unsure are the previous run's boards the start could not tell from a
	// GPU --gpu did not select that had no UUID (compareInventory); while
	// owed, missingUnselected judges them once every such GPU has one.
	unsure        []sink.InventoryChange
	owed          atomic.Bool             // an unselected GPU had no UUID at start (startBootCheck)
	bert          *live.LastCPER          // the host's boot error record, once read (startCPER)
	fabric        []reading.FabricService // the fabric daemons' last scan (fabric.go); nil: no fabric
	fabricAt      time.Time
	refusedLogged atomic.Bool
	// bootUnknown: the UUIDs of the boards counted in repair_boots_unknown
	// (newBoard), each once, however often its history is read.
	bootUnknown sync.Map
}

// lineLog is an append-only text log (sink.LineLog; tests replace it).
type lineLog interface {
	Line(s string) error // nil also when the line was kept to be written later
	Reopen() error
	// Close writes last, the lines the stop writes itself, within its
	// bound (a write stuck on a stalled disk does not hold up the exit:
	// what it gives up on is counted in log_lines_lost_at_exit, logged).
	Close(last ...string) error
	Waiting() int // lines kept, not yet written
}

// New builds the monitor's parts for an opened host and writes
// system-info.txt.
func New(cfg Config, host *sampler.Host) (*Monitor, error) {
	cfg.defaults() // cmd validated the flags it was made from (CLI.Validate)
	if cfg.Interval <= 0 {
		return nil, errors.New("monitor.Config.Interval must be > 0")
	}
	// One registry: the sampler's counters (nvml_stretches, health_skips,
	// process_reads_*) would otherwise reach no output.
	if host.Counters() != counters.Need(cfg.Counters, "monitor.Config.Counters") {
		return nil, errors.New("monitor.Config.Counters is not the registry the sampler was opened with (sampler.OpenOptions.Counters)")
	}
	m := &Monitor{cfg: cfg, log: cfg.Logger, host: host, byIndex: map[int]*gpuState{}, start: time.Now(), reg: host.Counters(),
		kclock: &kernelClock{clock: host.KernelClock(), est: kclock.NewEstimator(kclock.Config{})}, runState: runstate.Saver{Dir: cfg.LogDir}}
	m.loop.syncTick, m.loop.secondTick = make(chan time.Time, 1), make(chan time.Time, 1)
	m.loop.cadence = &cadence{step: max(cfg.Interval/100, time.Microsecond)}
	m.side.log, m.side.jobs, m.side.reg = m.log, make(chan sideJob, 256), m.reg
	m.journal.jobs = make(chan journalEntry, journalQueue)
	m.states.kmsg, m.states.events = "disabled", "starting"
	// The same Xid on a GPU from another source (NVML events, the kernel
	// log) within 10 s is one incident.
	m.ev = events.NewStage(events.Config{DedupWindow: 10 * time.Second, KernelClock: m.kclock.clock, HealthEvent: func(typ uint64) (string, bool) {
		h, _ := sampler.HealthEvent(typ)
		return h.Name, h.Critical
	}, Counters: m.reg})
	m.ident = readIdentity(cfg.Host, cfg.HostRoot, m.log)
	if cfg.KmsgPath != "" {
		m.states.kmsg = "starting"
		m.klog = cfg.KernelLog
		if m.klog == nil {
			m.klog = planKernelLog(cfg)
		}
	}
	m.loop.windowStart.Store(int64(cfg.mono())) // until Run begins the first window
	var cols []sink.GPUColumns
	var slots []*live.Slot
	m.kern.byBus = map[reading.PCIAddr]*gpuState{}
	for _, g := range host.GPUs {
		gs := newGPUState(m, g)
		m.gpus = append(m.gpus, gs)
		slots = append(slots, gs.slot)
		m.byIndex[gs.idx] = gs
		info := g.Info()
		if a, err := reading.ParsePCIAddr(info.BusID); err == nil {
			m.kern.byBus[a.Slot()] = gs
		}
		cols = append(cols, csvColumns(gs.idx, info))
	}
	m.busesFromSysfs()
	m.board = live.NewPublishedBoard(slots, cfg.mono) // hangs begin on it (stallStart)
	m.setupProcs()
	cc := cfg.CSV
	cc.Dir, cc.Logger, cc.Tick, cc.Counters = cfg.LogDir, m.log, m.loop.syncTick, m.reg
	var err error
	if m.csv, err = sink.NewCSV(cc, cols); err != nil {
		return nil, err
	}
	m.events = cfg.openLog(cfg.LogDir, EventsLog, eventsLogMB, m.reg)
	m.summary = cfg.openLog(cfg.LogDir, SummaryLog, summaryLogMB, m.reg)
	sc := cfg.Snapshots
	sc.Dir, sc.Logger, sc.Counters, sc.Flush = cfg.LogDir, m.log, m.reg, m.csv.Sync
	sc.Written, sc.HostRoot, sc.KernelWall = m.snapshotWritten, cfg.HostRoot, m.kclock.clock.Wall
	m.snaps = snapshot.New(sc)
	m.writeSystemInfo()
	m.board.PublishHost(m.hostView()) // the first host view, before Run
	return m, nil
}

// csvColumns describes GPU index's CSV files from its static facts.
func csvColumns(index int, info reading.GPU) sink.GPUColumns {
	return sink.GPUColumns{Index: index, Fans: info.NumFans,
		Board: sink.Board{Index: index, UUID: info.UUID, Serial: info.Serial, Bus: info.BusID, Name: info.Name}}
}

func (m *Monitor) writeSystemInfo() {
	si := sink.SystemInfo{Version: m.cfg.Version, Generated: time.Now(), Identity: m.ident, Host: sink.CollectHost(m.cfg.HostRoot),
		System: m.host.System, Notes: map[int]string{}, Health: map[int]string{}, KernelClock: m.kernelClockLine()}
	for _, gs := range m.gpus {
		si.GPUs = append(si.GPUs, gs.g.Info())
		if h := gs.Health(); !h.At.IsZero() {
			si.Health[gs.idx] = healthGroupsText(gs.g.HealthGroups(), h.Links.N)
			if si.Fabric == nil && gs.g.HealthGroups()[reading.GroupFabric] {
				si.Fabric = m.scanFabricServices()
			}
		}
		if why, stuck := gs.g.StaticProblem(); stuck {
			si.Notes[gs.idx] = "static facts not read yet: " + why
		} else if why != "" {
			si.Notes[gs.idx] = "static facts not read: " + why
		}
	}
	written, err := sink.WriteSystemInfo(m.cfg.LogDir, si)
	switch {
	case err != nil:
		m.log.Warn("cannot write system-info.txt", "error", err)
	case written:
		m.log.Info("system info written", "path", m.cfg.LogDir+"/system-info.txt")
	}
}

// Run samples until ctx is cancelled, then shuts down in a fixed order.
// SIGUSR1 on sigs logs a status line, SIGHUP reopens every log file.
func (m *Monitor) Run(ctx context.Context, sigs <-chan os.Signal) error {
	bg, stopBG := context.WithCancel(context.Background())
	defer stopBG()
	for _, gs := range m.gpus {
		// Not awaited: a sample or process read stuck in the driver never
		// returns. The poll loop kicks both (tick, procTick).
		go gs.w.Run(bg)
		go gs.pr.Run(bg)
		if gs.fan != nil {
			go gs.fan.Run(bg.Done())
		}
	}
	var listeners sync.WaitGroup
	listeners.Go(func() { // every GPU's NVML events
		m.host.FollowEvents(bg, m.log, m.onEvent, func(state string) { m.setState(&m.states.events, state) })
	})
	listeners.Go(func() { m.runInventory(bg) })
	if m.cfg.KmsgPath != "" {
		m.klog.open(m.log) // unless OpenKernelLog did, before the start-up wait
		listeners.Go(func() { m.runKmsg(bg) })
	}
	listeners.Go(func() { m.watchLosses(bg) })
	if srv := m.procs.srv; srv != nil { // the atopgpud protocol
		listeners.Go(func() {
			srv.Start(bg)
			<-bg.Done()
			srv.Close()
		})
	}
	journalStop := make(chan struct{})
	var journal sync.WaitGroup
	if m.cfg.Journal != nil {
		journal.Go(func() { m.runJournal(journalStop) })
	}
	m.startBootCheck(bg, &listeners)
	names := make([]string, len(m.gpus))
	for i, gs := range m.gpus {
		names[i] = strconv.Itoa(gs.idx)
	}
	m.log.Info("polling", "interval", m.cfg.Interval, "deadline", m.cfg.Deadline, "gpus", strings.Join(names, ","), "dir", m.cfg.LogDir)

	sideCtx, stopSide := context.WithCancel(context.Background())
	var side sync.WaitGroup
	side.Go(func() { m.side.serve(sideCtx.Done(), func(j sideJob) { j.f() }) })
	m.startCPER(bg, &listeners)

	m.poll(ctx, sigs)

	// Shutdown, in this order: stop producers, wait for them (bounded), hand
	// the fans the fan guard holds back to the firmware (--fan-guard:
	// fans-handed-back), flush and close the sinks (the journal's forwarder
	// once events.log is closed: shutdown's own lines reach it too),
	// report, release the hardware. The side goroutine
	// stops last of the producers: a sample that comes back while the
	// workers are waited for still has its late row written.
	//
	// Every step that can still count lost work (side queue drain, Xid
	// flags, snapshot writer, CSV fsync, events.log close) runs before the
	// final summary.log line, so that line holds the totals. What is counted
	// after it (summary.log's own close) is in the final status line on
	// stderr. A sample that comes back from a stuck call after that has its
	// loss counted and the first logged, but no status line follows.
	m.cfg.trace("stop-sampling")
	m.cfg.Notifier.Stopping()
	stopBG()
	waitBounded(&listeners, 3*time.Second)
	m.cfg.trace("listeners-stopped")
	stuck := m.waitWorkers(2 * time.Second)
	m.cfg.trace("workers-stopped")
	if m.cfg.FanGuard != nil {
		// The fans go back to the firmware once no sample can change them,
		// while events.log is open for their lines and before nvmlShutdown.
		stuck = append(stuck, m.handBackFans(stuck)...)
	}
	m.side.close() // from here queue drops and counts
	stopSide()
	if !waitBounded(&side, 2*time.Second) {
		m.log.Warn("queued file work still running at shutdown; what has not started is dropped, counted in side_drops",
			"dropped", m.side.dropQueued())
	}
	for _, gs := range m.gpus {
		gs.closeXids() // no row follows now: their flags are lost, counted
	}
	m.saveBoardsAtExit(2*time.Second, (*board.Board).Save) // no judgement follows now to write what a busy write left
	// The side queue is run or dropped before the snapshot writer closes:
	// a crash snapshot queued behind its rows was handed over or reported
	// lost; a request handed after Close is refused.
	sctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	if err := m.snaps.Close(sctx); err != nil {
		m.log.Warn("snapshots cut short at shutdown", "error", err)
	}
	cancel()
	m.cfg.trace("snapshots-closed")
	m.csv.Close() // an fsync it abandons is counted and logged there, with what it costs
	// What the burst limits hold is summed up in events.log's last lines,
	// written by its Close, within its bound, as summary.log's final line is.
	var last []string
	for _, l := range m.ev.WindowsEnded(time.Now(), true) {
		last = append(last, m.eventText(l))
	}
	m.events.Close(last...)
	m.stopJournal(journalStop, &journal)
	m.writeSummary(time.Now(), m.cfg.mono()-time.Duration(m.loop.windowStart.Load()), true) // and closes summary.log
	m.cfg.trace("summary-written")
	m.cfg.trace("files-closed")
	m.markCleanStop()                 // once every file is closed
	m.board.PublishHost(m.hostView()) // the final counts, for a reader still asking
	m.status("final status")
	if inside := m.inDriver(); len(stuck) > 0 || len(inside) > 0 {
		// nvmlShutdown with a call inside the driver can block for as long
		// as the fault lasts, or pull the library from under the call.
		m.log.Warn("NVML calls still stuck at exit; skipping nvmlShutdown", "gpus", strings.Join(stuck, ","),
			"calls", strings.Join(inside, ","))
	} else if !m.host.Close(2 * time.Second) {
		m.log.Warn("nvmlShutdown did not return within 2s")
	}
	m.cfg.trace("nvml-closed")
	m.log.Info("stopped")
	return nil
}

// inDriver names the NVML calls other than the GPUs' samples and process
// reads (waitWorkers) still inside the driver at exit: the event wait
// (given 2 s to return), a GPU enumeration, a CPER read (one abandoned
// after its deadline included), a read of a GPU --gpu did not select.
func (m *Monitor) inDriver() []string {
	var out []string
	if !sampler.EventsIdle(2 * time.Second) {
		out = append(out, "event_wait")
	}
	if m.enumerating.Load() {
		out = append(out, "enumeration")
	}
	if m.cper.r != nil && m.cper.r.InDriver() {
		out = append(out, "cper_read")
	}
	return append(out, m.unselectedInDriver()...)
}

// waitBounded waits for wg, at most d; it reports whether wg is done.
func waitBounded(wg *sync.WaitGroup, d time.Duration) bool {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
		return true
	case <-time.After(d):
		return false
	}
}

// waitWorkers waits, at most d, until no sample is in flight; it returns the
// GPUs still stuck, then those whose process read is inside the driver.
func (m *Monitor) waitWorkers(d time.Duration) []string {
	deadline := time.Now().Add(d)
	for {
		var busy []string
		for _, gs := range m.gpus {
			if _, b := gs.w.Busy(); b {
				busy = append(busy, strconv.Itoa(gs.idx))
			}
		}
		if len(busy) == 0 || time.Now().After(deadline) {
			for _, gs := range m.gpus {
				if _, in := gs.pr.Busy(); in {
					busy = append(busy, strconv.Itoa(gs.idx)+" (process list)")
				}
			}
			return busy
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// poll is the fixed-rate poll loop: tick k fires at start + k x interval
// (ticker). Signals are handled on their own goroutine so the loop only
// ever waits for its ticker.
func (m *Monitor) poll(ctx context.Context, sigs <-chan os.Signal) {
	tk := m.cfg.newTicker(m.cfg.Interval)
	m.loop.lastSummary = time.Now()
	m.loop.windowStart.Store(int64(m.cfg.mono()))
	ctx, stop := context.WithCancel(ctx)
	// Only the watchdog's goroutine is waited for: the signals' goroutine may
	// be inside a handler stuck on the disk (SIGHUP's reopen syncs the CSVs),
	// and shutdown must go on without it (its waits are bounded).
	var wg sync.WaitGroup
	defer wg.Wait()
	defer stop()
	context.AfterFunc(ctx, tk.Stop)
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case sig := <-sigs:
				if ctx.Err() != nil { // select picks at random when both are ready
					return
				}
				m.signal(sig)
			}
		}
	}()
	if m.cfg.WatchdogEvery > 0 {
		wd := m.cfg.newTicker(m.cfg.WatchdogEvery)
		context.AfterFunc(ctx, wd.Stop)
		wg.Go(func() { m.keepAlive(wd) })
	}
	m.loop.lastSync = time.Now() // the first sync round one FsyncEvery after the start
	for missed := uint64(0); ; {
		m.reg.Add(tickOverruns, missed)
		m.tick(time.Now())
		m.reg.Inc(ticksRun)
		var ok bool
		if missed, ok = tk.Next(); !ok || ctx.Err() != nil {
			return
		}
	}
}

// tick dispatches a sample to every GPU free and not backing off, and
// reports those stuck past the deadline; the watchdog pinger sees it run.
func (m *Monitor) tick(now time.Time) {
	lp := &m.loop
	at := instant{Wall: now, Mono: m.cfg.mono()}
	lp.began.Store(int64(at.Mono)) // before inTick: loopAlive reads them the other way round
	lp.inTick.Store(true)
	defer lp.inTick.Store(false)
	if lp.tickHook != nil {
		defer lp.tickHook(now)
	}
	lp.cadence.tick(now)
	for _, gs := range m.gpus {
		// Backing off (nextTry): neither sampled nor its processes read.
		nt := gs.nextTry.Load()
		if gs.offAtTick = nt != 0 && int64(at.Mono) < nt; gs.offAtTick {
			continue
		}
		if gs.w.Dispatch(at.Mono) {
			gs.skipped = gs.skipped[:0]
			continue
		}
		if fn, since, stuck := gs.w.Stuck(at.Mono, m.cfg.Deadline); stuck && gs.hung(at, since, fn) {
			continue
		}
		// Within its deadline, late outside NVML, or already classified
		// (hung declines): the tick is skipped, and counted.
		m.reg.Inc(busySkips)
		if len(gs.skipped) < cap(gs.skipped) {
			gs.skipped = append(gs.skipped, at)
		}
	}
	if !lp.ready && !slices.ContainsFunc(m.gpus, func(gs *gpuState) bool { return !gs.delivered.Load() }) {
		lp.ready = true
		m.cfg.Notifier.Ready()
		m.log.Info("first sample of every GPU written")
		m.side.queue("run-state and INVENTORY: the GPUs' maximum PCIe links", -1, m.recordMaxLinks)
	}
	k := m.reg.Load(ticksRun)
	m.procTick(at, k)
	if now.Sub(lp.lastSync) >= m.cfg.CSV.FsyncEvery {
		lp.lastSync = now
		nudge(lp.syncTick, now)
	}
	if k%uint64(m.procs.ticks) == 0 {
		nudge(lp.secondTick, now)
	}
	if elapsed := now.Sub(lp.lastSummary); elapsed >= m.cfg.SummaryEvery {
		lp.lastSummary = now
		lp.windowStart.Store(int64(at.Mono))
		m.side.queue("a summary.log line", -1, func() { m.writeSummary(now, elapsed, false) })
	}
}

// nudge hands v to periodic work on ch without waiting: work still busy
// with the last value skips this one.
func nudge[T any](ch chan<- T, v T) {
	select {
	case ch <- v:
	default:
	}
}

// signal handles SIGUSR1 and SIGHUP.
func (m *Monitor) signal(sig os.Signal) {
	switch sig {
	case syscall.SIGUSR1:
		m.status("status")
	case syscall.SIGHUP:
		m.log.Info("SIGHUP: reopening log files")
		m.csv.Reopen()
		for _, l := range []lineLog{m.events, m.summary} {
			if err := l.Reopen(); err != nil {
				m.log.Warn("reopening a log file failed", "error", err)
			}
		}
	}
}

// eventLine writes e to events.log (and the journal) with the host, the
// GPU's UUID and, on an incident line, the job on the GPU (from memory).
func (m *Monitor) eventLine(e sink.EventLine) {
	line := m.eventText(e)
	if err := m.events.Line(line); err != nil {
		lose(m.reg, m.log, lineFails, "an events.log line", slog.String("line", line), slog.String("error", err.Error()))
	}
}

// eventText is e's events.log line (eventLine), handed to the journal and
// the live board.
func (m *Monitor) eventText(e sink.EventLine) string {
	e.Host = m.ident.Host
	if gs := m.byIndex[e.GPU]; gs != nil {
		e.UUID = gs.g.Info().UUID
		if e.Class() == sink.EventIncident {
			e.Job = gs.jobs()
		}
	}
	line := e.Line()
	m.queueJournal(line)
	m.board.Event(line) // the last lines a status request may ask for (status events=N)
	return line
}

// incidentLine writes e, a critical event's line, with the incident and
// the crash snapshot d names.
func (m *Monitor) incidentLine(e sink.EventLine, d snapshot.Decision) {
	e.Incident, e.Snapshot = d.Incident, d.Snapshot
	m.eventLine(e)
}

// Board returns what the live readers (control socket, metrics) read.
func (m *Monitor) Board() *live.Board { return m.board }

// setState records a listener's state (a hostStates field) for the host view.
func (m *Monitor) setState(field *string, v string) {
	m.states.mu.Lock()
	*field = v
	m.states.mu.Unlock()
}

// snapshotWritten publishes the newest crash snapshot's path.
func (m *Monitor) snapshotWritten(kind string, gpu int, path string) {
	if gs := m.byIndex[gpu]; gs != nil && kind == "crash" {
		gs.slot.Update(func(g *live.GPU) { g.NewestSnapshot = path })
	}
}

// hostView assembles the host view, published at New, once a second
// (watchLosses) and at stop; readers take the latest and never call back
// in. Counts go in h.Counters only.
func (m *Monitor) hostView() live.Host {
	ps := m.host.Pacer.Stats() // its steps up are the counter nvml_stretches
	h := live.Host{Now: time.Now(), Start: m.start, Version: m.cfg.Version, System: m.host.System, Identity: m.ident,
		Interval: m.cfg.Interval, Deadline: m.cfg.Deadline, DiskPaused: m.csv.Stats().Paused, Counters: m.counters(),
		Pacer: live.Pacer{Level: ps.Level, TickNVML: ps.TickNVML, LastLate: ps.LastLate}}
	m.loop.cadence.get(&h.Cadence)
	h.LogLines.Waiting = m.events.Waiting() + m.summary.Waiting()
	m.states.mu.Lock()
	h.Kmsg, h.Events, h.LastIncident = m.states.kmsg, m.states.events, m.states.incident
	for _, b := range m.states.missing {
		h.Missing = append(h.Missing, live.MissingBoard{Index: b.Index, UUID: b.UUID(), Action: b.Action}) // a copy: an ack changes b.Action under the lock
	}
	h.GPUsMissing = int(max(m.states.boardsMissing.Load(), m.states.shortfall.Load()))
	h.BERT = m.states.bert
	h.Fabric = slices.Clone(m.states.fabric)
	dropped, _ := h.Counter(live.CounterRowsDropped) // registered by sink (TestViewCountersAreInTheTable)
	h.RowsDroppedRecent = m.states.drops.recent(h.Now, dropped)
	m.states.mu.Unlock()
	return h
}
