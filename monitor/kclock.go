package monitor

import (
	"context"
	"errors"
	"io"
	"sync/atomic"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/internal/kclock"
	"github.com/gpu-telemetry/gpu-telemetry/kmsg"
	"github.com/gpu-telemetry/gpu-telemetry/sampler"
)

// kernelClock keeps dmesg_time on the kernel log's own clock: the kernel log
// goroutine feeds each fresh record's arrival to the estimator and publishes
// the estimate on the sampler.KernelClock every GPU's sampler reads.
// system-info.txt and snapshot headers say how good the estimate is.
type kernelClock struct {
	clock sampler.KernelClock
	est   *kclock.Estimator // the kernel log goroutine's only

	lastArrival atomic.Int64 // CLOCK_MONOTONIC (ns) of the last fresh record
	lastInfo    atomic.Int64 // CLOCK_MONOTONIC (ns) system-info.txt last got the estimate
	readable    atomic.Bool  // the kernel log is being opened or followed
}

// system-info.txt is rewritten with the estimate (and its age) hourly while
// it holds, at once on a first estimate or a step; the quiet-log marker and
// the refresh are checked every markerCheck.
const (
	kernelClockRefresh = time.Hour
	markerCheck        = 5 * time.Minute
)

func newKernelClock(c sampler.KernelClock) *kernelClock {
	return &kernelClock{clock: c, est: kclock.NewEstimator(kclock.Config{})}
}

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

// line says how dmesg_time relates to the kernel log's clock now.
func (kc *kernelClock) line() string {
	return kc.clock.Fit().Describe(kc.clock.Mono(time.Now()), kc.readable.Load())
}

// setKmsgState records the kernel log's state, and whether it is readable.
func (m *Monitor) setKmsgState(s string) {
	m.kclock.readable.Store(s == "starting" || s == "following")
	m.setState(&m.states.kmsg, s)
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
