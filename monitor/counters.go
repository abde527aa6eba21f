package monitor

import (
	"context"
	"log/slog"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/internal/counters"
	"github.com/gpu-telemetry/gpu-telemetry/live"
)

// The monitor's own counters; the other parts declare theirs beside the
// code that counts them (internal/counters), and every output walks the
// registry: the losses first, then the others, each in declaration order.
var (
	tickOverruns = counters.Declare(counters.Def{Name: "tick_overruns", Loss: true,
		Help: "poll-loop ticks skipped whole because the loop ran late (no GPU was sampled on them)"})
	busySkips = counters.Declare(counters.Def{Name: "busy_skips", Loss: true,
		Help: "GPU samples not taken because the GPU's previous sample was still in flight"})
	sideDrops = counters.Declare(counters.Def{Name: "side_drops", Loss: true, OwnLog: true,
		Help: "file work dropped because the side queue was full, queued after it stopped at shutdown, or still queued when shutdown stopped waiting for it (late rows, hang rows with their crash snapshot request, snapshot requests, summaries)"})
	lineFails = counters.Declare(counters.Def{Name: "log_lines_failed", Loss: true, OwnLog: true,
		Help: "events.log and summary.log lines lost: too many were already waiting for a full disk, or the log was closed"})
	journalDrops = counters.Declare(counters.Def{Name: "journal_drops", Loss: true, OwnLog: true,
		Help: "events.log lines not sent to the systemd journal: its queue was full (journald stuck) or it refused them (they are in events.log)"})
	flagsDropped = counters.Declare(counters.Def{Name: "flags_dropped", Loss: true, OwnLog: true,
		Help: "flags that did not fit in a row's flags cell"})
	xidFlagsDropped = counters.Declare(counters.Def{Name: "xid_flags_dropped", Loss: true, OwnLog: true,
		Help: "Xids not flagged on a row because too many were waiting for the GPU's next row, or the GPU wrote no row after them before shutdown (the Xids are in events.log)"})
	badXids = counters.Declare(counters.Def{Name: "kmsg_xids_malformed", Loss: true, OwnLog: true,
		Help: "Xid lines of the NVIDIA driver in the kernel log whose GPU address or code could not be read (no PCI domain, a bus or device out of range, a code of more than 6 digits): no event was made of them (the first is logged with its line)"})
	procsStretched = counters.Declare(counters.Def{Name: "process_reads_stretched", Loss: true,
		Help: "per-GPU process list reads not made because NVML was too slow for the interval (they stretch with the slow tier; nvml_level is the current step)"})
	ticksRun = counters.Declare(counters.Def{Name: "ticks",
		Help: "poll-loop ticks run"})
)

// lose counts one occurrence of the loss d in reg; the first is logged with
// what (what was lost) and attrs.
func lose(reg *counters.Registry, log *slog.Logger, d *counters.Def, what string, attrs ...slog.Attr) {
	if reg.Add(d, 1) == 1 {
		logFirstLoss(log, d.Name, what, attrs...)
	}
}

// logFirstLoss logs the first occurrence of the loss counted by counter
// name: what was lost, and attrs. Later ones are only counted.
func logFirstLoss(log *slog.Logger, name, what string, attrs ...slog.Attr) {
	attrs = append([]slog.Attr{slog.String("counter", name), slog.String("lost", what)}, attrs...)
	log.LogAttrs(context.Background(), slog.LevelWarn, "work lost (first occurrence; later ones are counted)", attrs...)
}

// counters returns every counter's current value, losses first.
func (m *Monitor) counters() []live.Counter {
	vs := m.reg.Read()
	out := make([]live.Counter, len(vs))
	for i, v := range vs {
		out[i] = live.Counter{Name: v.Name, Help: v.Help, Value: v.Value, Loss: v.Loss}
	}
	return out
}

// dropHistory is rows_dropped with the time it was read, at most once a
// second (watchLosses), over live.RecentWindow, for the host view's
// RowsDroppedRecent. The window is by time, not by count: at --interval 5s
// the history is added to every 5 s, and a count of 600 would span 50 min.
type dropHistory []dropMark

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
	for len(*h) >= 2 && !(*h)[1].t.After(cut) {
		*h = (*h)[1:]
	}
	*h = append(*h, dropMark{t: now, v: v})
}

// recent returns how much the counter, v now, grew over the RecentWindow
// before now: since the newest mark at or before the window's start, or
// since the daemon started when it has not run that long.
func (h dropHistory) recent(now time.Time, v uint64) uint64 {
	cut := now.Add(-live.RecentWindow)
	base := uint64(0)
	for _, mk := range h {
		if mk.t.After(cut) {
			break
		}
		base = mk.v
	}
	return v - min(base, v)
}

// watchLosses logs, once a second (paced by the poll loop), the first
// occurrence of each loss counter whose owner does not log it with details
// itself, keeps the history of dropped rows, and publishes the host view;
// it writes the lines that sum up what the event stage's burst limits held
// in the windows that ended by the tick (windowsEnded).
func (m *Monitor) watchLosses(ctx context.Context) {
	logged := map[string]bool{}
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-m.loop.secondTick:
			m.windowsEnded(now)
			m.judgeActions(now)
			m.rescanFabric(now)
		}
		m.checkLosses(logged)
		d := m.csv.Stats().Dropped
		m.states.mu.Lock()
		m.states.drops.add(time.Now(), d)
		m.states.mu.Unlock()
		m.board.PublishHost(m.hostView())
	}
}

// checkLosses logs each loss counter that became non-zero since the last
// call, is not logged yet and whose part does not log it itself (OwnLog).
func (m *Monitor) checkLosses(logged map[string]bool) {
	for _, v := range m.reg.Read() {
		if !v.Loss || v.OwnLog || logged[v.Name] || v.Value == 0 {
			continue
		}
		logged[v.Name] = true
		logFirstLoss(m.log, v.Name, v.Help, slog.Uint64("count", v.Value))
	}
}
