package monitor

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/internal/counters"
	"github.com/gpu-telemetry/gpu-telemetry/internal/kclock"
	"github.com/gpu-telemetry/gpu-telemetry/kmsg"
	"github.com/gpu-telemetry/gpu-telemetry/reading"
	"github.com/gpu-telemetry/gpu-telemetry/sampler"
	"github.com/gpu-telemetry/gpu-telemetry/sink"
	"github.com/gpu-telemetry/gpu-telemetry/snapshot"
)

// KernelLog is the kernel log, opened before NVML's start-up wait on a stuck
// GPU (OpenKernelLog) so that an Xid 79 logged during a 20 s start-up waits
// in the ring. The records after the previous run's last one in this boot
// (kmsg_seq in run-state) are read first, as backlog.
type KernelLog struct {
	path   string
	resume reading.Opt[uint64] // the previous run's last record, in this boot
	reg    *counters.Registry  // Config.Counters, where the reader counts
	r      *kmsg.Reader        // nil until opened, or when it could not be
	err    error               // why it could not be opened
	// standIn (tests) rewrites each record before it is parsed: tests of the
	// real /dev/kmsg write harmless lines (an Xid 79 would page the host's
	// operators) and turn them here into the driver's lines.
	standIn func(kmsg.Record) kmsg.Record
}

// OpenKernelLog opens cfg.KmsgPath (nil: off) for Config.KernelLog. It reads
// the previous run's position from run-state: call it before New. A failed
// open is reported when the monitor runs; Close it if no monitor runs.
func OpenKernelLog(cfg Config) *KernelLog {
	cfg.defaults()
	k := planKernelLog(cfg)
	k.open(cfg.Logger)
	return k
}

// planKernelLog decides where the kernel log will be read from: after the
// previous run's last record in this boot, else from the end.
func planKernelLog(cfg Config) *KernelLog {
	if cfg.KmsgPath == "" {
		return nil
	}
	k := &KernelLog{path: cfg.KmsgPath, reg: counters.Need(cfg.Counters, "monitor.Config.Counters")}
	st, found, err := snapshot.ReadRunState(cfg.LogDir)
	if err != nil {
		cfg.Logger.Warn("cannot read the previous run's kernel log position; the kernel log is read from its end", "error", err)
		return k
	}
	seq, ok := st.KmsgSeq.Get()
	if !found || !ok {
		return k
	}
	boot := snapshot.ReadBootID(filepath.Join(cfg.HostRoot, snapshot.DefaultBootIDPath))
	if boot == "" || st.BootID != boot {
		cfg.Logger.Info("the previous run's kernel log position is of another boot; the kernel log is read from its end",
			"prev_boot", st.BootID, "boot", boot)
		return k
	}
	k.resume = reading.Some(seq)
	return k
}

// open opens the kernel log (if any) once.
func (k *KernelLog) open(log *slog.Logger) {
	if k == nil || k.r != nil || k.err != nil {
		return
	}
	k.r, k.err = kmsg.OpenWith(k.path, kmsg.Options{Log: log, ResumeAfter: k.resume, Counters: k.reg})
	if seq, ok := k.resume.Get(); ok && k.err == nil {
		if _, dev := k.r.LastSeq(); dev {
			log.Info("kernel log: reading the records logged since the previous run's last one in this boot", "path", k.path, "after_seq", seq)
		}
	}
}

// Close releases the kernel log of a monitor that never ran.
func (k *KernelLog) Close() {
	if k != nil && k.r != nil {
		k.r.Close()
	}
}

// kmsgSeqRefresh is how often the kernel log position is saved: a run
// killed has at most this long of records replayed at the next start.
const kmsgSeqRefresh = 10 * time.Second

// runState is this run's run-state, written by startBootCheck, rewritten when the
// kernel log position moves or a GPU answers late.
type runState struct {
	mu    sync.Mutex
	begun bool // startBootCheck has read the previous run's state and written ours
	cur   snapshot.RunState
	prev  []sink.Board // the previous run's boards (nil: none recorded)
	// prevPCIeMax is the previous run's maximum PCIe link of each board
	// (recordMaxLinks compares).
	prevPCIeMax map[string]string
	// fansLate are the previous run's fan holds not claimed at start: of
	// GPUs whose UUID comes late (fanFactsKnown), or not monitored.
	fansLate map[string][]int
	// heldMissing are the previous run's boards not enumerated at start
	// while some GPUs had no UUID yet (stuck): one of those may be the
	// board. They are raised (GPU_MISSING, their action) once every GPU
	// has answered without being one of them (lateBoard).
	heldMissing []sink.InventoryChange
	// write rewrites run-state (snapshot.WriteRunState); tests stall it.
	write func(dir string, s snapshot.RunState) error
}

// save writes this run's state with change applied; rs.mu is held.
func (rs *runState) save(dir string, change func(*snapshot.RunState)) error {
	next := rs.cur
	change(&next)
	if err := rs.write(dir, next); err != nil {
		return err
	}
	rs.cur = next
	return nil
}

// kmsgSeq is the position to save: the last /dev/kmsg record handed on.
func (m *Monitor) kmsgSeq() (seq reading.Opt[uint64]) {
	if m.klog != nil && m.klog.r != nil {
		seq.V, seq.OK = m.klog.r.LastSeq()
	}
	return seq
}

// boards are the monitored GPUs' boards, as their static facts name them.
func (m *Monitor) boards() []sink.Board {
	out := make([]sink.Board, 0, len(m.gpus))
	for _, gs := range m.gpus {
		out = append(out, csvColumns(gs.idx, gs.g.Info()).Board)
	}
	return out
}

// recordMaxLinks runs once every GPU has been sampled: each board's
// maximum PCIe link (a reading, not a fact of the start) is compared with
// the previous run's, a change being an INVENTORY change=pcie_max line, and
// written to run-state for the next start.
func (m *Monitor) recordMaxLinks() {
	rs := &m.runState
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if !rs.begun {
		return
	}
	now := map[string]string{}
	for _, gs := range m.gpus {
		s := gs.slot.Get().Sample
		g, okG := s.Get(reading.PCIeMaxGen)
		w, okW := s.Get(reading.PCIeMaxWidth)
		if uuid := gs.g.Info().UUID; uuid != "" && okG && okW {
			now[uuid] = "gen " + strconv.FormatUint(g, 10) + " x" + strconv.FormatUint(w, 10)
		}
	}
	for _, line := range sink.CompareBoards(time.Now(), sink.InventoryPCIeMax, rs.prevPCIeMax, now, m.boards()) {
		m.eventLine(line)
	}
	err := rs.save(m.cfg.LogDir, func(s *snapshot.RunState) {
		s.PCIeMax = maps.Clone(s.PCIeMax)
		if s.PCIeMax == nil {
			s.PCIeMax = map[string]string{}
		}
		maps.Copy(s.PCIeMax, now)
	})
	if err != nil {
		m.log.Warn("cannot record the GPUs' maximum PCIe links in run-state; the next start will not compare them", "error", err)
	}
}

// lateBoard runs once a GPU stuck at start has answered: its board is
// compared with the previous run's (INVENTORY) and written to run-state;
// before startBootCheck, which does both for every board known by then, nothing.
func (m *Monitor) lateBoard(gs *gpuState) {
	rs := &m.runState
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if !rs.begun {
		return
	}
	if rs.prev != nil {
		m.eventLine(sink.IdentifyLate(rs.prev, csvColumns(gs.idx, gs.g.Info()).Board).Event(time.Now()))
	}
	boards := m.boards()
	if err := rs.save(m.cfg.LogDir, func(s *snapshot.RunState) { s.GPUs, s.VBIOS = boards, m.vbios() }); err != nil {
		m.log.Warn("cannot record the GPU that answered late in run-state; the next start will not compare it", "error", err)
	}
	if len(rs.heldMissing) == 0 || slices.ContainsFunc(boards, func(b sink.Board) bool { return b.UUID == "" }) {
		return
	}
	var missing []sink.InventoryChange
	for _, c := range rs.heldMissing {
		if !slices.ContainsFunc(boards, func(b sink.Board) bool { return b.UUID == c.Board.UUID }) {
			c.Unidentified = 0
			m.missingBoard(c.Board)
			missing = append(missing, c)
		}
	}
	rs.heldMissing = nil
	m.raiseMissing(missing)
}

var kmsgSaveFailures = counters.Declare(counters.Def{Name: "kmsg_position_save_failures", Loss: true, OwnLog: true,
	Help: "saves of the kernel log position in run-state that failed (the first is logged with why; tried again at the next save): a restart meanwhile may replay or miss kernel log records"})

// saveKmsgSeq rewrites run-state when the kernel log position moved.
func (m *Monitor) saveKmsgSeq() {
	rs := &m.runState
	rs.mu.Lock()
	defer rs.mu.Unlock()
	seq := m.kmsgSeq()
	if !rs.begun || seq == rs.cur.KmsgSeq {
		return
	}
	if err := rs.save(m.cfg.LogDir, func(s *snapshot.RunState) { s.KmsgSeq = seq }); err != nil && m.reg.Add(kmsgSaveFailures, 1) == 1 {
		m.log.Warn("cannot save the kernel log position; a restart may replay or miss records logged meanwhile (tried again later)", "error", err)
	}
}

// kernelClock keeps dmesg_time on the kernel log's own clock: the kernel log
// goroutine feeds each fresh record's arrival to the estimator and publishes
// the estimate on the sampler.KernelClock every GPU's sampler reads.
// system-info.txt and snapshot headers say how good the estimate is.
type kernelClock struct {
	clock sampler.KernelClock
	est   *kclock.Estimator // the kernel log goroutine's only

	lastArrival atomic.Int64 // CLOCK_MONOTONIC (ns) of the last fresh record
	lastInfo    atomic.Int64 // CLOCK_MONOTONIC (ns) system-info.txt last got the estimate
}

// system-info.txt is rewritten with the estimate (and its age) hourly while
// it holds, at once on a first estimate or a step; the quiet-log marker and
// the refresh are checked every markerCheck.
const (
	kernelClockRefresh = time.Hour
	markerCheck        = 5 * time.Minute
)

// observeKmsg feeds one kernel log record to the estimator; backlog says
// nothing about the clock.
func (m *Monitor) observeKmsg(rec kmsg.Record) {
	if rec.Backlog {
		return
	}
	kc := m.kclock
	arrival := kc.clock.Mono(time.Now())
	kc.lastArrival.Store(int64(arrival))
	prev := kc.clock.Fit()
	f := kc.est.Observe(arrival, rec.Time, kmsg.IsMarker(rec.Message))
	kc.clock.SetFit(f)
	switch {
	case !prev.Valid():
		m.log.Info("kernel log clock measured", "offset", f.OffsetAt(arrival), "printk_time", rec.Time)
	case f.Steps != prev.Steps:
		m.log.Warn("kernel log clock stepped (after a suspend?); dmesg_time follows it",
			"from", prev.OffsetAt(arrival), "to", f.OffsetAt(arrival))
	default:
		return
	}
	kc.lastInfo.Store(int64(arrival))
	m.side.queue("system-info.txt", -1, m.writeSystemInfo)
}

// kernelClockLine says how dmesg_time relates to the kernel log's clock
// now, and whether the kernel log is being opened or followed (its state).
func (m *Monitor) kernelClockLine() string {
	m.states.mu.Lock()
	s := m.states.kmsg
	m.states.mu.Unlock()
	return m.kclock.clock.Fit().Describe(m.kclock.clock.Mono(time.Now()), s == "starting" || s == "following")
}

// runKernelClock runs while the kernel log is followed: it rewrites
// system-info.txt every kernelClockRefresh and, where markers are on and the
// logger may write the kernel log, writes a marker when the log has been
// quiet for an hour (at most one an hour).
func (m *Monitor) runKernelClock(ctx context.Context) {
	kc := m.kclock
	var w io.WriteCloser
	if m.cfg.KmsgMarkers {
		var err error
		w, err = kmsg.OpenMarkerWriter(m.cfg.KmsgPath)
		switch {
		case err == nil:
			defer w.Close()
			m.log.Info("kernel log clock markers on: one is written when the log has been quiet for an hour", "path", m.cfg.KmsgPath)
		case errors.Is(err, kmsg.ErrPermission):
			m.log.Info("kernel log clock markers off: no permission to write the kernel log", "path", m.cfg.KmsgPath)
		default:
			m.log.Info("kernel log clock markers off", "reason", err)
		}
	}
	start := kc.clock.Mono(time.Now())
	var lastMarker time.Duration
	every(ctx, markerCheck, nil, func() {
		now := kc.clock.Mono(time.Now())
		last := time.Duration(kc.lastArrival.Load())
		if last == 0 {
			last = start
		}
		if w != nil && kmsg.MarkerDue(now, last, lastMarker) {
			lastMarker = now
			if err := kmsg.WriteMarker(w); err != nil {
				m.log.Warn("cannot write a kernel log clock marker; no more will be tried", "error", err)
				w.Close()
				w = nil
			}
		}
		if kc.clock.Fit().Valid() && now-time.Duration(kc.lastInfo.Load()) >= kernelClockRefresh {
			kc.lastInfo.Store(int64(now))
			m.side.queue("system-info.txt", -1, m.writeSystemInfo)
		}
	})
}
