package monitor

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/live"
	"github.com/gpu-telemetry/gpu-telemetry/live/atop"
	"github.com/gpu-telemetry/gpu-telemetry/sampler"
	"github.com/gpu-telemetry/gpu-telemetry/sink"
	"github.com/gpu-telemetry/gpu-telemetry/snapshot"
)

// lossCounter counts one kind of lost work that the monitor itself drops,
// and logs the first occurrence with what was lost.
type lossCounter struct{ n atomic.Uint64 }

// add counts one loss; the first is logged with what (what was lost) and
// attrs.
func (c *lossCounter) add(log *slog.Logger, name, what string, attrs ...slog.Attr) {
	if c.n.Add(1) == 1 {
		logFirstLoss(log, name, what, attrs...)
	}
}

// logFirstLoss logs the first occurrence of the loss counted by counter
// name: what was lost, and attrs. Later ones are only counted.
func logFirstLoss(log *slog.Logger, name, what string, attrs ...slog.Attr) {
	attrs = append([]slog.Attr{slog.String("counter", name), slog.String("lost", what)}, attrs...)
	log.LogAttrs(context.Background(), slog.LevelWarn, "work lost (first occurrence; later ones are counted)", attrs...)
}

func (c *lossCounter) load() uint64 { return c.n.Load() }

// counterSources is what the counter table reads, gathered once per view.
type counterSources struct {
	m    *Monitor
	csv  sink.Stats
	snap snapshot.Stats
	atop atop.Counters // zero without --atop
}

// sumGPUs is a sampler counter summed over the GPUs.
func (s *counterSources) sumGPUs(count func(*sampler.GPU) uint64) uint64 {
	var n uint64
	for _, gs := range s.m.gpus {
		n += count(gs.g)
	}
	return n
}

// counterDef declares one counter: every output (status line, summary.log,
// metrics) walks counterTable, so adding a counter is one edit here.
type counterDef struct {
	name string
	help string
	loss bool // lost, dropped, skipped, failed or suppressed work
	// ownLog: the monitor logs the first occurrence itself, with details;
	// otherwise watchLosses logs it.
	ownLog bool
	get    func(s *counterSources) uint64
}

// counterTable is every counter the daemon shows, losses first.
var counterTable = []counterDef{
	{name: "tick_overruns", loss: true, help: "poll-loop ticks skipped whole because the loop ran late (no GPU was sampled on them)",
		get: func(s *counterSources) uint64 { return s.m.overruns.Load() }},
	{name: "busy_skips", loss: true, help: "GPU samples not taken because the GPU's previous sample was still in flight",
		get: func(s *counterSources) uint64 { return s.m.busySkips.Load() }},
	{name: "rows_dropped", loss: true, help: "CSV rows not written (disk paused or full, file error, or after shutdown)",
		get: func(s *counterSources) uint64 { return s.csv.Dropped }},
	{name: "sync_errors", loss: true, help: "failed fsync/fdatasync calls on CSV files",
		get: func(s *counterSources) uint64 { return s.csv.SyncErrors }},
	{name: "sync_skips", loss: true, help: "periodic CSV sync rounds skipped because the previous one was still on the disk",
		get: func(s *counterSources) uint64 { return s.csv.SyncSkips }},
	{name: "side_drops", loss: true, ownLog: true, help: "file work dropped because the side queue was full, queued after it stopped at shutdown, or still queued when shutdown stopped waiting for it (late rows, hang rows with their crash snapshot request, snapshot requests, summaries)",
		get: func(s *counterSources) uint64 { return s.m.sideDrops.load() }},
	{name: "log_lines_failed", loss: true, ownLog: true, help: "events.log and summary.log lines lost: too many were already waiting for a full disk, or the log was closed",
		get: func(s *counterSources) uint64 { return s.m.lineFails.load() }},
	{name: "log_lines_lost_at_exit", loss: true, ownLog: true, help: "events.log and summary.log lines still waiting for the disk when the logger exited",
		get: func(s *counterSources) uint64 { return s.m.linesLostAtExit() }},
	{name: "journal_drops", loss: true, ownLog: true, help: "events.log lines not sent to the systemd journal: its queue was full (journald stuck) or it refused them (they are in events.log)",
		get: func(s *counterSources) uint64 { return s.m.journalDrops.load() }},
	{name: "flags_dropped", loss: true, ownLog: true, help: "flags that did not fit in a row's flags cell",
		get: func(s *counterSources) uint64 { return s.m.flagsDropped.load() }},
	{name: "xid_flags_dropped", loss: true, ownLog: true, help: "Xids not flagged on a row because too many were waiting for the GPU's next row, or the GPU wrote no row after them before shutdown (the Xids are in events.log)",
		get: func(s *counterSources) uint64 { return s.m.xidFlagsDropped.load() }},
	{name: "crash_snapshots_suppressed", loss: true, help: "crash snapshots not taken because of the per-GPU cooldown",
		get: func(s *counterSources) uint64 { return s.snap.CrashesSuppressed }},
	{name: "spike_snapshots_suppressed", loss: true, help: "fan spike snapshots not taken because of the cooldown",
		get: func(s *counterSources) uint64 { return s.snap.SpikesSuppressed }},
	{name: "follow_ups_canceled", loss: true, help: "crash snapshot follow-ups cancelled by a newer incident or shutdown",
		get: func(s *counterSources) uint64 { return s.snap.FollowUpsCanceled }},
	{name: "snapshot_failures", loss: true, help: "snapshot files that could not be written",
		get: func(s *counterSources) uint64 { return s.snap.Failures }},
	{name: "snapshots_refused_at_shutdown", loss: true, ownLog: true, help: "crash and fan spike snapshots not taken because they were asked for after the snapshot writer closed at shutdown (by a sample that came back late from a stuck NVML call)",
		get: func(s *counterSources) uint64 { return s.snap.RefusedClosed }},
	{name: "kmsg_malformed", loss: true, help: "kernel log records that could not be parsed",
		get: func(s *counterSources) uint64 {
			return s.m.kmsgStat(func(r kmsgCounters) uint64 { return r.Malformed() })
		}},
	{name: "kmsg_overruns", loss: true, help: "times the kernel log ring overwrote records before they were read",
		get: func(s *counterSources) uint64 {
			return s.m.kmsgStat(func(r kmsgCounters) uint64 { return r.Overruns() })
		}},
	{name: "kmsg_records_lost", loss: true, ownLog: true, help: "/dev/kmsg records the kernel overwrote before they were read (the gaps in their sequence numbers): after an overrun, or, at a restart in the same boot, logged while no logger was reading and overwritten before the replay reached them (the reader logs each replay's and the first other)",
		get: func(s *counterSources) uint64 {
			return s.m.kmsgStat(func(r kmsgCounters) uint64 { return r.Lost() })
		}},
	{name: "kmsg_reopens", loss: true, ownLog: true, help: "kernel log read errors after which the log was opened again, with back-off from 1 s to 1 min (the reader logs the first; /dev/kmsg resumes after the last record read, the records lost meanwhile are in kmsg_records_lost)",
		get: func(s *counterSources) uint64 {
			return s.m.kmsgStat(func(r kmsgCounters) uint64 { return r.Reopens() })
		}},

	{name: "nvml_stretches", loss: true, ownLog: true, help: "times NVML was too slow for the interval and the slow tier, then P-state/utilization/memory, were read less often (the sampler logs the first; nvml_level in the status line is the current step)",
		get: func(s *counterSources) uint64 { return s.m.host.Pacer.Stats().Stretches }},
	{name: "nvml_event_failures", loss: true, help: "NVML event sets that could not be opened, failed and were opened again, or left a GPU out (that GPU's NVML events, Xids included, missed until the set was open again; the kernel log still has Xids)",
		get: func(s *counterSources) uint64 { return s.m.host.EventFailures() }},
	{name: "kernel_lines_suppressed", loss: true, ownLog: true, help: "kernel AER/NVRM lines not written to events.log (over 10 of one kind per GPU per minute)",
		get: func(s *counterSources) uint64 { return s.m.kern.suppressed.load() }},
	{name: "process_reads_hung", loss: true, help: "per-GPU process list reads stuck in the driver past the deadline (no process data meanwhile)",
		get: func(s *counterSources) uint64 { h, _ := s.m.procCounts(); return h }},
	{name: "process_reads_failed", loss: true, help: "per-GPU process list reads that failed (no process data that second)",
		get: func(s *counterSources) uint64 { _, f := s.m.procCounts(); return f }},
	{name: "process_reads_stretched", loss: true, help: "per-GPU process list reads not made because NVML was too slow for the interval (they stretch with the slow tier; nvml_level is the current step)",
		get: func(s *counterSources) uint64 { return s.m.procsHeld.Load() }},
	{name: "batch_thread_failures", loss: true, ownLog: true, help: "GPU batch threads that could not be started (the sampler logs the first): that GPU's slow samples stay direct calls, holding the process while in the driver, so other GPUs' samples start late; retried",
		get: func(s *counterSources) uint64 { return s.sumGPUs((*sampler.GPU).BatchThreadFailures) }},
	{name: "native_exec_failures", loss: true, ownLog: true, help: "GPU native executors (one cgo call a sample) that could not be started (the sampler logs the first, with why): that GPU's samples are go-nvml calls instead, one cgo call each; tried again with the static facts",
		get: func(s *counterSources) uint64 { return s.sumGPUs((*sampler.GPU).NativeExecFailures) }},
	{name: "health_skips", loss: true, ownLog: true, help: "health counter reads put off because another GPU held the field lock, stuck in the driver (the sampler logs the first): the last reading stays, one slow period older",
		get: func(s *counterSources) uint64 { return s.sumGPUs((*sampler.GPU).HealthSkips) }},
	{name: "listen_failures", loss: true, ownLog: true, help: "endpoints that could not be opened (--metrics-listen, --atop's TCP port or unix socket: address in use, or refused by the unit's RestrictAddressFamilies): not served, the logger samples on",
		get: func(s *counterSources) uint64 { return s.m.listenFails.Load() + s.atop.ListenFailed }},
	{name: "atop_clients_refused", loss: true, help: "atop connections closed at once because the connection limit was reached",
		get: func(s *counterSources) uint64 { return s.atop.Refused }},
	{name: "atop_clients_dropped", loss: true, help: "atop connections dropped for a request atop never sends, silence, or a reply not taken",
		get: func(s *counterSources) uint64 { return s.atop.Bad + s.atop.TimedOut }},
	{name: "atop_replies_cut", loss: true, ownLog: true, help: "atop replies that left process records out to stay within 8192 bytes (the atop server logs the first)",
		get: func(s *counterSources) uint64 { return s.atop.CutReply }},
	{name: "atop_records_cut", loss: true, help: "process records left out of atop replies to stay within 8192 bytes (least busy first)",
		get: func(s *counterSources) uint64 { return s.atop.CutRecord }},
	{name: "atop_exits_dropped", loss: true, ownLog: true, help: "exited-process records dropped for atop clients that did not ask for over 4096 of them",
		get: func(s *counterSources) uint64 { return s.atop.ExitedDropped }},
	{name: "control_clients_refused", loss: true, help: "control socket connections closed at once, busy, because the connection limit was reached",
		get: func(s *counterSources) uint64 { _, r, _ := s.m.controlCounts(); return r }},
	{name: "control_requests_failed", loss: true, help: "control socket requests not answered: a request the socket does not know, a client silent past the read timeout, or gone before the answer",
		get: func(s *counterSources) uint64 { _, _, f := s.m.controlCounts(); return f }},

	{name: "ticks", help: "poll-loop ticks run",
		get: func(s *counterSources) uint64 { return s.m.ticks.Load() }},
	{name: "rows_written", help: "CSV rows written",
		get: func(s *counterSources) uint64 { return s.csv.Written }},
	{name: "log_lines_delayed", help: "events.log and summary.log lines kept in memory while the file could not be written (disk full) and written later with their own timestamps",
		get: func(s *counterSources) uint64 { return s.m.events.Stats().Delayed + s.m.summary.Stats().Delayed }},
	{name: "sync_batches", help: "periodic CSV sync rounds completed",
		get: func(s *counterSources) uint64 { return s.csv.SyncBatches }},
	{name: "nvml_events", help: "NVML events received",
		get: func(s *counterSources) uint64 { return s.m.ev.Stats().NVMLEvents }},
	{name: "kmsg_xids", help: "Xid lines read from the kernel log",
		get: func(s *counterSources) uint64 { return s.m.ev.Stats().KmsgXids }},
	{name: "kmsg_backlog_xids", help: "Xids of kernel log records read after the fact (logged before the logger was ready, or, after a restart in the same boot, while no logger was reading); in events.log with backlog=true and their ktime, and counted in kmsg_xids",
		get: func(s *counterSources) uint64 { return s.m.ev.Stats().KmsgBacklogXids }},
	{name: "kmsg_file_restarts", help: "times a --kmsg file was replaced (the new one read from its start) or truncated (read again from its start); each is logged",
		get: func(s *counterSources) uint64 {
			return s.m.kmsgStat(func(r kmsgCounters) uint64 { return r.Restarts() })
		}},
	{name: "kernel_lines", help: "kernel AER, fallen-off-the-bus, RmInitAdapter and GSP lines written to events.log",
		get: func(s *counterSources) uint64 { return s.m.kern.written.load() }},
	{name: "duplicate_xids", help: "Xids reported by both NVML events and the kernel log, counted once",
		get: func(s *counterSources) uint64 { return s.m.ev.Stats().DuplicateXids }},
	{name: "crash_snapshots", help: "crash snapshots written (the escalations inside an incident included)",
		get: func(s *counterSources) uint64 { return s.snap.CrashesWritten }},
	{name: "crash_incidents", help: "incidents begun: a GPU's critical events from the first until its crash cooldown ends are one incident",
		get: func(s *counterSources) uint64 { return s.snap.Incidents }},
	{name: "crash_escalations", help: "crash snapshots taken inside an incident's cooldown because the event was a worse stage (GSP, off the bus) or asked for more than every event captured before",
		get: func(s *counterSources) uint64 { return s.snap.Escalations }},
	{name: "spike_snapshots", help: "fan spike snapshots written",
		get: func(s *counterSources) uint64 { return s.snap.SpikesWritten }},
	{name: "crash_snapshots_completed", help: "crash snapshots whose full version (every command's output) replaced the first file",
		get: func(s *counterSources) uint64 { return s.snap.CrashesCompleted }},
	{name: "follow_ups", help: "crash snapshot follow-ups written",
		get: func(s *counterSources) uint64 { return s.snap.FollowUpsWritten }},
	{name: "atop_connections", help: "atop connections accepted and served",
		get: func(s *counterSources) uint64 { return s.atop.Accepted }},
	{name: "atop_requests", help: "atopgpud protocol requests answered",
		get: func(s *counterSources) uint64 { return s.atop.Requests }},
	{name: "control_requests", help: "control socket requests answered (status, ping)",
		get: func(s *counterSources) uint64 { a, _, _ := s.m.controlCounts(); return a }},
}

// controlStats reads the control socket's counts: requests answered,
// connections refused (busy), requests failed.
type controlStats func() (answered, refused, failed uint64)

// CountControl makes the control socket's counts part of the counter table
// (control_requests, control_clients_refused, control_requests_failed). The
// socket is opened by the caller, once the monitor exists; until then they
// read 0.
func (m *Monitor) CountControl(stats func() (answered, refused, failed uint64)) {
	f := controlStats(stats)
	m.control.Store(&f)
}

// controlCounts reads the control socket's counts; 0 without a socket.
func (m *Monitor) controlCounts() (answered, refused, failed uint64) {
	if f := m.control.Load(); f != nil {
		return (*f)()
	}
	return 0, 0, 0
}

// linesLostAtExit counts the lines the line logs still held when closed
// (they log it themselves); lines lost earlier came back as errors and are
// in lineFails.
func (m *Monitor) linesLostAtExit() uint64 {
	return m.events.Stats().LostAtClose + m.summary.Stats().LostAtClose
}

// kmsgCounters is what the kernel log reader counts.
type kmsgCounters interface {
	Malformed() uint64
	Overruns() uint64
	Restarts() uint64
	Lost() uint64
	Reopens() uint64
}

// kmsgStat reads a kernel log reader counter; 0 while no reader runs.
func (m *Monitor) kmsgStat(f func(kmsgCounters) uint64) uint64 {
	if r := m.kmsgReader.Load(); r != nil {
		return f(*r)
	}
	return 0
}

// sources gathers what the counter table reads.
func (m *Monitor) sources() *counterSources {
	return &counterSources{m: m, csv: m.csv.Stats(), snap: m.snaps.Stats(), atop: m.atopCounters()}
}

// counters returns the counter table's current values.
func (m *Monitor) counters() []live.Counter {
	src := m.sources()
	out := make([]live.Counter, len(counterTable))
	for i, d := range counterTable {
		out[i] = live.Counter{Name: d.name, Help: d.help, Value: d.get(src), Loss: d.loss}
	}
	return out
}

// dropHistory is rows_dropped with the time it was read, at most once a
// second (watchLosses), over live.RecentWindow, for the host view's
// RowsDroppedRecent. The window is by time, not by count: at --interval 5s
// the history is added to every 5 s, and a count of 600 would span 50 min.
type dropHistory struct {
	v       [int(live.RecentWindow/time.Second) + 2]dropMark
	pos     int  // where the next mark goes
	n       int  // marks held
	evicted bool // a mark was overwritten while still needed (marks closer than 1 s)
}

// dropMark is the counter's value at a time.
type dropMark struct {
	t time.Time
	v uint64
}

// add records the counter's value v at now, and forgets marks no longer
// needed: only the newest one at or before now - RecentWindow is kept, as
// the window's baseline.
func (h *dropHistory) add(now time.Time, v uint64) {
	cut := now.Add(-live.RecentWindow)
	for h.n >= 2 && !h.at(1).t.After(cut) {
		h.n--
	}
	if h.n == len(h.v) {
		h.n--
		h.evicted = true
	}
	h.v[h.pos] = dropMark{t: now, v: v}
	h.pos = (h.pos + 1) % len(h.v)
	h.n++
}

// at returns the i-th oldest mark held.
func (h *dropHistory) at(i int) dropMark {
	return h.v[(h.pos-h.n+i+2*len(h.v))%len(h.v)]
}

// recent returns how much the counter, v now, grew over the RecentWindow
// before now: since the newest mark at or before the window's start, or
// since the daemon started when it has not run that long.
func (h *dropHistory) recent(now time.Time, v uint64) uint64 {
	cut := now.Add(-live.RecentWindow)
	base := uint64(0)
	if h.n > 0 && (h.evicted || !h.at(0).t.After(cut)) {
		base = h.at(0).v
		for i := 1; i < h.n && !h.at(i).t.After(cut); i++ {
			base = h.at(i).v
		}
	}
	return v - min(base, v)
}

// watchLosses logs, once a second (paced by the poll loop), the first
// occurrence of each loss counter whose owner does not log it with details
// itself, keeps the history of dropped rows, and publishes the host view.
func (m *Monitor) watchLosses(ctx context.Context) {
	logged := make([]bool, len(counterTable))
	for {
		select {
		case <-ctx.Done():
			return
		case <-m.secondTick:
		}
		m.checkLosses(logged)
		d := m.csv.Stats().Dropped
		m.smu.Lock()
		m.drops.add(time.Now(), d)
		m.smu.Unlock()
		m.publishHost()
	}
}

// checkLosses logs each loss counter that became non-zero since the last
// call and is not logged yet.
func (m *Monitor) checkLosses(logged []bool) {
	var src *counterSources
	for i, d := range counterTable {
		if !d.loss || d.ownLog || logged[i] {
			continue
		}
		if src == nil {
			src = m.sources()
		}
		if v := d.get(src); v > 0 {
			logged[i] = true
			logFirstLoss(m.log, d.name, d.help, slog.Uint64("count", v))
		}
	}
}
