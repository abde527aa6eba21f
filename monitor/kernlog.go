package monitor

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/internal/counters"
	"github.com/gpu-telemetry/gpu-telemetry/internal/kclock"
	"github.com/gpu-telemetry/gpu-telemetry/kmsg"
	"github.com/gpu-telemetry/gpu-telemetry/reading"
	"github.com/gpu-telemetry/gpu-telemetry/runstate"
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
	st, found, err := runstate.Read(cfg.LogDir)
	if err != nil {
		cfg.Logger.Warn("cannot read the previous run's kernel log position; the kernel log is read from its end", "error", err)
		return k
	}
	seq, ok := st.KmsgSeq.Get()
	if !found || !ok {
		return k
	}
	boot := runstate.ReadBootID(filepath.Join(cfg.HostRoot, runstate.DefaultBootIDPath))
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

// kmsgSeq is the position to save: the last /dev/kmsg record handed on.
func (m *Monitor) kmsgSeq() (seq reading.Opt[uint64]) {
	if m.klog != nil && m.klog.r != nil {
		seq.V, seq.OK = m.klog.r.LastSeq()
	}
	return seq
}

var kmsgSaveFailures = counters.Declare(counters.Def{Name: "kmsg_position_save_failures", Loss: true, OwnLog: true,
	Help: "saves of the kernel log position in run-state that failed (the first is logged with why; tried again at the next save): a restart meanwhile may replay or miss kernel log records"})

// saveKmsgSeq rewrites run-state when the kernel log position moved; before
// startBootCheck recorded this run, nothing.
func (m *Monitor) saveKmsgSeq() {
	err := m.runState.Save(func(s *runstate.State) bool {
		seq := m.kmsgSeq()
		moved := seq != s.KmsgSeq
		s.KmsgSeq = seq
		return moved
	})
	if err != nil && !errors.Is(err, runstate.ErrNotBegun) && m.reg.Add(kmsgSaveFailures, 1) == 1 {
		m.log.Warn("cannot save the kernel log position; a restart may replay or miss records logged meanwhile (tried again later)", "error", err)
	}
}

// kernelClock keeps dmesg_time on the kernel log's own clock: the kernel log
// goroutine feeds each fresh record's arrival to the estimator and publishes
// the estimate on the kernel log clock every GPU's sampler reads.
// system-info.txt and snapshot headers say how good the estimate is.
type kernelClock struct {
	clock kclock.Clock
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
