package monitor

import (
	"context"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/internal/counters"
	"github.com/gpu-telemetry/gpu-telemetry/internal/events"
	"github.com/gpu-telemetry/gpu-telemetry/live"
	"github.com/gpu-telemetry/gpu-telemetry/reading"
	"github.com/gpu-telemetry/gpu-telemetry/sampler"
	"github.com/gpu-telemetry/gpu-telemetry/sink"
	"github.com/gpu-telemetry/gpu-telemetry/snapshot"
)

// Rotation sizes for the line logs (seed: EVENTS_LOG_MAX_BYTES,
// SUMMARY_LOG_MAX_BYTES).
const (
	eventsLogMB  = 50
	summaryLogMB = 10
	logBackups   = 5
)

// Monitor is the running logger.
type Monitor struct {
	cfg     Config
	log     *slog.Logger
	host    *sampler.Host
	ident   reading.Identity // the host's name, machine id and boot id, read once at start
	gpus    []*gpuState
	byIndex map[int]*gpuState
	kern    kernelGPUs // which GPU a kernel line names (kernel.go)

	csv     *sink.CSV
	events  lineLog
	summary lineLog
	snaps   *snapshot.Manager
	inc     *incidentDesk // critical events and spikes to snapshots

	start       time.Time
	ticks       atomic.Uint64
	overruns    atomic.Uint64
	busySkips   atomic.Uint64
	ev          *events.Stage // the event path: every NVML, kernel log and poll event
	ready       bool
	lastSummary time.Time

	tickHook func(now time.Time) // tests: runs at the end of every tick

	side chan sideJob // file work queued by the poll loop
	// sideMu orders every queue against the side goroutine's last drain at
	// shutdown: work queued before sideClosed is set is in side when the
	// drain begins, so it runs (or, if the drain is cut short, is counted
	// and dropped); work queued after is counted and dropped.
	sideMu     sync.Mutex
	sideClosed bool

	// Lost work the monitor itself drops (see monitorCounters).
	sideDrops, lineFails, flagsDropped, xidFlagsDropped lossCounter
	journalDrops                                        lossCounter
	badXids                                             lossCounter // the driver's Xid lines that could not be read
	journalQ                                            chan journalEntry

	reg      *counters.Registry // every part's counters (counters.go)
	klog     *KernelLog         // nil: no kernel log (kernlog.go)
	runState runState           // this run's run-state, with the kernel log position
	// kmsgSaveFailed: a failure to save the kernel log position was logged.
	kmsgSaveFailed atomic.Bool
	kclock         *kernelClock // dmesg_time on the kernel log's clock

	board   *live.Board
	cadence *cadence

	procs procParts // the process reads and atop's protocol (procs.go)

	// Periodic work paced by the poll loop, so that it runs while the
	// process is awake for a tick rather than on timers of its own: the
	// CSV's sync round every FsyncEvery, the loss check every second.
	syncTick, secondTick chan time.Time
	lastSync             time.Time // poll goroutine only

	smu         sync.Mutex // guards the fields below
	kmsgState   string
	eventsState string
	drops       dropHistory

	// The monotonic reading (Config.mono, ns) the current summary window
	// began at: the status line's window is measured from it.
	windowStart atomic.Int64

	enumerating atomic.Bool // a GPU enumeration is inside the driver

	beat loopBeat // the poll loop's progress, for the watchdog pinger (watchdog.go)
}

// lineLog is an append-only text log (sink.LineLog).
type lineLog interface {
	Line(s string) error // nil also when the line was kept to be written later
	Reopen() error
	Close() error
	Stats() sink.LineLogStats
}

// New builds the monitor's parts for an opened host: the CSV sink, the line
// logs, the snapshot manager and one pipeline per GPU. It writes
// system-info.txt.
func New(cfg Config, host *sampler.Host) (*Monitor, error) {
	cfg.defaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	m := &Monitor{cfg: cfg, log: cfg.Logger, host: host, byIndex: map[int]*gpuState{},
		start: time.Now(), side: make(chan sideJob, 256),
		syncTick: make(chan time.Time, 1), secondTick: make(chan time.Time, 1),
		cadence: newCadence(cfg.Interval), kmsgState: "disabled", eventsState: "starting",
		kclock: newKernelClock(host.KernelClock()), journalQ: make(chan journalEntry, journalQueue),
		reg: counters.New()}
	m.ev = events.NewStage(events.Config{DedupWindow: cfg.XidDedupe, KernelClock: m.kclock.clock, HealthEvent: healthEvent})
	m.ident = readIdentity(cfg.Host, cfg.HostRoot, m.log)
	if cfg.KmsgPath != "" {
		m.kmsgState = "starting"
		m.kclock.readable.Store(true)
		m.klog = cfg.KernelLog
		if m.klog == nil {
			m.klog = planKernelLog(cfg)
		}
	}
	m.windowStart.Store(int64(cfg.mono())) // until Run begins the first window
	var cols []sink.GPUColumns
	var slots []*live.Slot
	byBus := map[reading.PCIAddr]*gpuState{}
	for _, g := range host.GPUs {
		gs := newGPUState(m, g)
		m.gpus = append(m.gpus, gs)
		slots = append(slots, gs.slot)
		m.byIndex[gs.idx] = gs
		info := g.Info()
		if a, err := reading.ParsePCIAddr(info.BusID); err == nil {
			byBus[a.Slot()] = gs
		}
		cols = append(cols, csvColumns(gs.idx, info))
	}
	m.busesFromSysfs(byBus)
	m.kern.byBus.Store(&byBus)
	m.board = live.NewPublishedBoard(slots)
	m.setupProcs()
	csv, err := sink.NewCSV(sink.CSVConfig{
		Dir: cfg.LogDir, RetentionDays: cfg.RetentionDays, FsyncEvery: cfg.FsyncEvery,
		MinFreeMB: cfg.MinFreeMB, Compress: cfg.Compress, Logger: m.log, Tick: m.syncTick,
	}, cols)
	if err != nil {
		return nil, err
	}
	m.csv = csv
	m.events = cfg.openLog(cfg.LogDir, EventsLog, eventsLogMB)
	m.summary = cfg.openLog(cfg.LogDir, SummaryLog, summaryLogMB)
	m.snaps = snapshot.New(snapshot.Config{
		Dir: cfg.LogDir, Runner: cfg.Runner, Logger: m.log,
		CrashCooldown: cfg.CrashCooldown, SpikeCooldown: cfg.SpikeCooldown,
		FollowUps: cfg.FollowUps, CommandTimeout: cfg.CommandTimeout,
		Flush: m.csv.Sync, Written: m.snapshotWritten, HostRoot: cfg.HostRoot,
		KernelWall: m.kclock.clock.Wall,
	})
	m.inc = &incidentDesk{snaps: m.snaps, rows: m.csv, log: m.log}
	m.registerCounters()
	m.writeSystemInfo()
	m.publishHost() // the first host view, before Run
	return m, nil
}

// csvColumns describes GPU index's CSV files from its static facts: its fan
// columns and its board (the file names and first line).
func csvColumns(index int, info reading.GPU) sink.GPUColumns {
	return sink.GPUColumns{Index: index, Fans: info.NumFans,
		Board: sink.Board{Index: index, UUID: info.UUID, Serial: info.Serial, Bus: info.BusID, Name: info.Name}}
}

func (m *Monitor) writeSystemInfo() {
	si := sink.SystemInfo{Version: m.cfg.Version, Generated: time.Now(), Identity: m.ident, Host: sink.CollectHost(m.cfg.HostRoot),
		System: m.host.System, Notes: map[int]string{}, Health: map[int]string{}, KernelClock: m.kclock.line()}
	for _, gs := range m.gpus {
		si.GPUs = append(si.GPUs, gs.info())
		if h := gs.Health(); !h.At.IsZero() {
			si.Health[gs.idx] = healthGroupsText(gs.g.HealthGroups(), h.Links.N)
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

// Run samples until ctx is cancelled, then shuts down in a fixed order. Signals
// arrive on sigs: SIGUSR1 prints a status line, SIGHUP reopens every log file.
// It returns nil on a clean shutdown.
func (m *Monitor) Run(ctx context.Context, sigs <-chan os.Signal) error {
	bg, stopBG := context.WithCancel(context.Background())
	defer stopBG()
	for _, gs := range m.gpus {
		go gs.w.Run(bg)
	}
	var listeners sync.WaitGroup
	listeners.Add(1)
	go func() { defer listeners.Done(); m.runEvents(bg) }()
	listeners.Add(1)
	go func() { defer listeners.Done(); m.runInventory(bg) }()
	if m.cfg.KmsgPath != "" {
		m.klog.open(m.log) // unless OpenKernelLog did, before the start-up wait
		listeners.Add(1)
		go func() { defer listeners.Done(); m.runKmsg(bg) }()
	}
	listeners.Add(1)
	go func() { defer listeners.Done(); m.watchLosses(bg) }()
	listeners.Add(1)
	go func() { defer listeners.Done(); m.runProcs(bg) }()
	if m.cfg.Journal != nil {
		listeners.Add(1)
		go func() { defer listeners.Done(); m.runJournal(bg) }()
	}
	m.startBootCheck(bg, &listeners)
	names := make([]string, len(m.gpus))
	for i, gs := range m.gpus {
		names[i] = strconv.Itoa(gs.idx)
	}
	m.log.Info("polling", "interval", m.cfg.Interval, "deadline", m.cfg.Deadline, "gpus", strings.Join(names, ","), "dir", m.cfg.LogDir)

	sideStop, sideDone := make(chan struct{}), make(chan struct{})
	go m.runSide(sideStop, sideDone)

	m.loop(ctx, sigs)

	// Shutdown, in this order: stop producers, wait for them (bounded), flush
	// and close the sinks, report, release the hardware. The side goroutine
	// stops last of the producers: a sample that comes back from the driver
	// while the workers are waited for still has its late row written.
	//
	// Every step that can still count lost work runs before the final
	// summary.log line, so that line holds the totals: the side queue's
	// drain (side_drops), the Xid flags no row will carry
	// (xid_flags_dropped), the snapshot writer's close (follow_ups_canceled,
	// snapshot_failures), the CSV's last fsync (sync_errors) and events.log's
	// close (log_lines_lost_at_exit). The final summary line covers the
	// window the stop cut short and is marked final; then summary.log
	// closes. What is counted after that line (summary.log's own close:
	// the final line itself, if the disk is full) is in the final status
	// line on stderr, which comes after the files. A sample that comes
	// back from a stuck call after that has its loss (rows_dropped,
	// side_drops, snapshots_refused_at_shutdown) counted and the first
	// logged, but no status line follows it.
	m.cfg.trace("stop-sampling")
	m.cfg.Notifier.Stopping()
	stopBG()
	waitBounded(&listeners, 3*time.Second)
	m.cfg.trace("listeners-stopped")
	stuck := append(m.waitWorkers(2*time.Second), m.procsStuck()...)
	m.cfg.trace("workers-stopped")
	m.sideMu.Lock()
	m.sideClosed = true // from here queue drops and counts
	m.sideMu.Unlock()
	close(sideStop)
	select {
	case <-sideDone:
	case <-time.After(2 * time.Second):
		m.log.Warn("queued file work still running at shutdown; what has not started is dropped, counted in side_drops",
			"dropped", m.dropSide())
	}
	for _, gs := range m.gpus {
		gs.closeXids() // no row follows now: their flags are lost, counted
	}
	// The side queue was run or dropped above, before the snapshot writer
	// closes: a crash snapshot queued there behind its rows was built, or
	// abandoned (sideJob.dropped), and one queued from now on is abandoned
	// at once, so Close waits for no build that will not come.
	sctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	if err := m.snaps.Close(sctx); err != nil {
		m.log.Warn("snapshots cut short at shutdown", "error", err)
	}
	cancel()
	m.cfg.trace("snapshots-closed")
	if err := m.csv.Close(); err != nil {
		m.log.Error("closing CSV files", "error", err)
	}
	// What the burst limits still hold is summed up in events.log before
	// it closes: a window the stop cuts short is not lost.
	m.windowsEnded(time.Now(), true)
	m.events.Close()
	m.writeFinalSummary()
	m.cfg.trace("summary-written")
	m.summary.Close()
	m.cfg.trace("files-closed")
	m.markCleanStop()
	m.publishHost() // the final counts, for a reader still asking
	m.status("final status")
	eventsStuck := !sampler.EventsIdle(2 * time.Second)
	if len(stuck) > 0 || eventsStuck || m.enumerating.Load() {
		// nvmlShutdown with a call still inside the driver can block for
		// as long as the fault lasts, or pull the library from under the
		// call: the process exits without it.
		m.log.Warn("NVML calls still stuck at exit; skipping nvmlShutdown", "gpus", strings.Join(stuck, ","),
			"event_wait", eventsStuck, "enumeration", m.enumerating.Load())
	} else if !m.host.Close(2 * time.Second) {
		m.log.Warn("nvmlShutdown did not return within 2s")
	}
	m.cfg.trace("nvml-closed")
	m.log.Info("stopped")
	return nil
}

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

// waitWorkers waits until no sample is in flight, at most d, and returns the
// GPUs still stuck.
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
			return busy
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// loop is the fixed-rate poll loop: tick k fires at start + k x interval. A
// slow tick never shifts later ones; ticks missed entirely are counted as
// overruns and skipped, never run in a burst. Signals are handled on their
// own goroutine so the loop only ever waits for its ticker.
func (m *Monitor) loop(ctx context.Context, sigs <-chan os.Signal) {
	tk := m.cfg.newTicker(m.cfg.Interval)
	m.lastSummary = time.Now()
	m.windowStart.Store(int64(m.cfg.mono()))
	done := make(chan struct{})
	defer close(done)
	go func() {
		for {
			select {
			case <-ctx.Done():
				tk.Stop()
				return
			case <-done:
				return
			case sig := <-sigs:
				m.signal(sig)
			}
		}
	}()
	if m.cfg.WatchdogEvery > 0 {
		wd := m.cfg.newTicker(m.cfg.WatchdogEvery)
		pinged := make(chan struct{})
		go func() { defer close(pinged); m.keepAlive(wd) }()
		defer func() { wd.Stop(); <-pinged }()
	}
	m.lastSync = time.Now() // the first sync round one FsyncEvery after the start
	m.beatTick(time.Now())
	m.ticks.Add(1)
	for {
		missed, ok := tk.Next()
		if !ok || ctx.Err() != nil {
			return
		}
		m.overruns.Add(missed)
		m.beatTick(time.Now())
		m.ticks.Add(1)
	}
}

// tick dispatches one sample to every GPU that is free and not backing off,
// and reports the ones stuck past the deadline.
func (m *Monitor) tick(now time.Time) {
	if m.tickHook != nil {
		defer m.tickHook(now)
	}
	m.cadence.tick(now)
	at := instant{wall: now, mono: m.cfg.mono()}
	for _, gs := range m.gpus {
		if gs.offAtTick = gs.backingOff(at.mono); gs.offAtTick {
			continue
		}
		if gs.w.Dispatch(at.mono) {
			gs.skipped = gs.skipped[:0]
			continue
		}
		if fn, since, stuck := gs.w.Stuck(at.mono, m.cfg.Deadline); stuck && gs.hung(at, since, fn) {
			continue
		}
		// Still within its deadline, late outside NVML, or inside NVML
		// with the sample already classified (hung declines): the tick is
		// skipped, and counted.
		m.busySkips.Add(1)
		if len(gs.skipped) < cap(gs.skipped) {
			gs.skipped = append(gs.skipped, at)
		}
	}
	if !m.ready {
		all := true
		for _, gs := range m.gpus {
			all = all && gs.delivered.Load()
		}
		if all {
			m.ready = true
			m.cfg.Notifier.Ready()
			m.log.Info("first sample of every GPU written")
		}
	}
	k := m.ticks.Load()
	m.procTick(at, k)
	if now.Sub(m.lastSync) >= m.cfg.FsyncEvery {
		m.lastSync = now
		nudge(m.syncTick, now)
	}
	if k%uint64(m.procs.ticks) == 0 {
		nudge(m.secondTick, now)
	}
	if now.Sub(m.lastSummary) >= m.cfg.SummaryEvery {
		elapsed := now.Sub(m.lastSummary)
		m.lastSummary = now
		m.windowStart.Store(int64(at.mono))
		m.queue("a summary.log line", -1, func() { m.writeSummary(now, elapsed) })
	}
}

// nudge hands now to periodic work waiting on ch without waiting: work
// still busy with the last value skips this one.
func nudge(ch chan<- time.Time, now time.Time) {
	select {
	case ch <- now:
	default:
	}
}

// queue runs f on the side goroutine, which does the file work the poll
// loop must not wait for (hang rows, late rows, summaries). When the side
// goroutine is that far behind (the disk is stuck), f is dropped and counted,
// and the first drop is logged with what (what f carried) and gpu (-1: none).
// Work queued once the side goroutine has stopped (a worker that came back
// from a stuck call after shutdown) is dropped and counted the same way.
// It reports whether f was queued.
func (m *Monitor) queue(what string, gpu int, f func()) bool {
	return m.enqueue(sideJob{what: what, gpu: gpu, f: f})
}

// sideJob is one piece of work for the side goroutine, with what it
// carries and its GPU (-1: none), to count and log it if it is dropped.
type sideJob struct {
	what string
	gpu  int
	rows *atomic.Int64 // gpuState.sideRows when the job writes the GPU's rows, else nil
	f    func()
	// dropped, if set, is told why when the job is dropped instead of
	// run (a crash snapshot it was to build is abandoned).
	dropped func(why string)
}

// enqueue is queue for a job; a dropped job's rows are taken off its count.
func (m *Monitor) enqueue(j sideJob) bool {
	what, gpu := j.what, j.gpu
	m.sideMu.Lock()
	closed, queued := m.sideClosed, false
	if !closed {
		select {
		case m.side <- j:
			queued = true
		default:
		}
	}
	m.sideMu.Unlock()
	if !queued {
		why := "the side queue was full"
		if closed {
			what += " (queued after shutdown)"
			why = "queued after the side queue stopped at shutdown"
		}
		m.sideDrops.add(m.log, "side_drops", what, slog.Int("gpu", gpu))
		if j.rows != nil {
			j.rows.Add(-1)
		}
		if j.dropped != nil {
			j.dropped(why)
		}
	}
	return queued
}

// dropSide takes the jobs still queued off the side queue once the side
// goroutine, stuck in one of them, did not finish them in time at shutdown,
// and counts each in side_drops (the first logged with what it carried). It
// runs none: the stuck job is still running, and the files close next. It
// returns how many it dropped.
func (m *Monitor) dropSide() int {
	n := 0
	for {
		select {
		case j := <-m.side:
			n++
			m.sideDrops.add(m.log, "side_drops", j.what+" (still queued at shutdown)", slog.Int("gpu", j.gpu))
			if j.rows != nil {
				j.rows.Add(-1)
			}
			if j.dropped != nil {
				j.dropped("still queued on the side queue at shutdown")
			}
		default:
			return n
		}
	}
}

// runSide runs queued work until stop is closed, then what is still queued.
// Run sets sideClosed before it closes stop. The queue itself is never
// closed: a worker that comes back from a stuck call after shutdown may
// still call queue, which then drops its work and counts it (sideClosed).
func (m *Monitor) runSide(stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	for {
		select {
		case j := <-m.side:
			j.f()
		case <-stop:
			for {
				select {
				case j := <-m.side:
					j.f()
				default:
					return
				}
			}
		}
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
// GPU's UUID and, on an incident line, the job that was on the GPU when it
// failed (from memory).
func (m *Monitor) eventLine(e sink.Event) {
	e.Host = m.ident.Host
	if gs := m.byIndex[e.GPU]; gs != nil {
		e.UUID = gs.info().UUID
		if e.Class() == sink.EventIncident {
			e.Job = gs.jobs()
		}
	}
	line := e.Line()
	m.journal(line)
	if err := m.events.Line(line); err != nil {
		m.lineFails.add(m.log, "log_lines_failed", "an events.log line", slog.String("line", line), slog.String("error", err.Error()))
	}
}

// incidentLine writes e, the line of a critical event, with the incident
// the snapshot Manager counted it in and the crash snapshot holding its
// evidence (d; none when the Manager was closed).
func (m *Monitor) incidentLine(e sink.Event, d snapshot.Decision) {
	e.Incident, e.Snapshot = d.Incident, d.Snapshot
	m.eventLine(e)
}

// csvStats returns the sink's counters.
func (m *Monitor) csvStats() sink.Stats { return m.csv.Stats() }

// Board returns the published state that the live readers (control socket,
// metrics) read.
func (m *Monitor) Board() *live.Board { return m.board }

// setState records the kernel log's (kmsg) or the NVML event stream's state
// for the host view.
func (m *Monitor) setState(field *string, v string) {
	m.smu.Lock()
	*field = v
	m.smu.Unlock()
}

// snapshotWritten publishes the newest crash snapshot's path.
func (m *Monitor) snapshotWritten(kind string, gpu int, path string) {
	if gs := m.byIndex[gpu]; gs != nil && kind == "crash" {
		gs.slot.Update(func(g *live.GPU) { g.NewestSnapshot = path })
	}
}

// pacerState is the NVML pacer's state for the host view and the status
// line; its count of steps up is nvml_stretches, a counter of the registry.
func (m *Monitor) pacerState() live.Pacer {
	ps := m.host.Pacer.Stats()
	return live.Pacer{Level: ps.Level, TickNVML: ps.TickNVML, LastLate: ps.LastLate}
}

// publishHost publishes the host view on the Board: at New, then once a
// second (watchLosses, paced by the poll loop) and at stop. Readers take the
// latest and never call back in.
func (m *Monitor) publishHost() { m.board.PublishHost(m.hostView()) }

// hostView assembles the host view from the counters. Counts go in
// h.Counters only (the counter registry); the other fields hold what is not a
// count.
func (m *Monitor) hostView() live.Host {
	h := live.Host{
		Now: time.Now(), Start: m.start, Version: m.cfg.Version, System: m.host.System, Identity: m.ident,
		Interval: m.cfg.Interval, Deadline: m.cfg.Deadline,
		DiskPaused: m.csv.Stats().Paused,
		Counters:   m.counters(),
	}
	h.LastIncident = m.inc.lastIncident()
	m.cadence.get(&h.Cadence)
	h.Pacer = m.pacerState()
	for _, l := range []lineLog{m.events, m.summary} {
		h.LogLines.Waiting += l.Stats().Pending
	}
	m.smu.Lock()
	h.Kmsg, h.Events = m.kmsgState, m.eventsState
	dropped, _ := h.Counter(live.CounterRowsDropped) // registered by sink (TestViewCountersAreInTheTable)
	h.RowsDroppedRecent = m.drops.recent(h.Now, dropped)
	m.smu.Unlock()
	return h
}
