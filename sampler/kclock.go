package sampler

import (
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

// KernelClock converts wall-clock readings to the kernel log's clock (the
// printk clock dmesg and /dev/kmsg print) and back. It reads CLOCK_MONOTONIC
// once and then derives every later value from Go's own monotonic clock (also
// CLOCK_MONOTONIC), so no system call is made per sample. The printk clock is
// not CLOCK_MONOTONIC: it drifts from it, so CLOCK_MONOTONIC is mapped through
// the latest estimate the kernel log reader published (SetFit); before the
// first one, and when no kernel log is read, the kernel log's clock is taken
// to be CLOCK_MONOTONIC, unchecked.
//
// Copies share the estimate: SetFit on one is seen by all.
type KernelClock struct {
	base  time.Time
	baseK time.Duration
	fit   *atomic.Pointer[reading.KernelClockFit]
}

// NewKernelClock anchors the kernel clock to now.
func NewKernelClock() KernelClock {
	var ts unix.Timespec
	now := time.Now()
	k := KernelClock{base: now, fit: new(atomic.Pointer[reading.KernelClockFit])}
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err == nil {
		k.baseK = time.Duration(ts.Nano())
	}
	return k
}

// Mono returns CLOCK_MONOTONIC at wall-clock reading t.
func (k KernelClock) Mono(t time.Time) time.Duration { return k.baseK + t.Sub(k.base) }

// At returns the kernel-log (printk) time of wall-clock reading t: what the
// dmesg_time column holds.
func (k KernelClock) At(t time.Time) time.Duration {
	return k.Fit().PrintkAt(k.Mono(t))
}

// Wall returns the wall-clock time at which the printk clock read p: where a
// kernel log line stamped p belongs among the rows.
func (k KernelClock) Wall(p time.Duration) time.Time {
	return k.base.Add(k.Fit().MonoAt(p) - k.baseK)
}

// SetFit publishes a new estimate of the printk clock.
func (k KernelClock) SetFit(f reading.KernelClockFit) {
	if k.fit != nil {
		k.fit.Store(&f)
	}
}

// Fit returns the latest estimate; the zero value (not Valid) before the first.
func (k KernelClock) Fit() reading.KernelClockFit {
	if k.fit != nil {
		if f := k.fit.Load(); f != nil {
			return *f
		}
	}
	return reading.KernelClockFit{}
}
