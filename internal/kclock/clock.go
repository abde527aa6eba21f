package kclock

import (
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// Clock converts wall-clock readings to the kernel log's clock (the
// printk clock dmesg and /dev/kmsg print) and back. It reads CLOCK_MONOTONIC
// once and then derives every later value from Go's own monotonic clock (also
// CLOCK_MONOTONIC), so no system call is made per sample. The printk clock is
// not CLOCK_MONOTONIC: it drifts from it, so CLOCK_MONOTONIC is mapped through
// the latest estimate the kernel log reader published (SetFit); before the
// first one, and when no kernel log is read, the kernel log's clock is taken
// to be CLOCK_MONOTONIC, unchecked.
//
// Copies share the estimate: SetFit on one is seen by all.
type Clock struct {
	base  time.Time
	baseK time.Duration
	fit   *atomic.Pointer[Fit]
}

// New anchors the kernel clock to now.
func New() Clock {
	return Anchored(Pair())
}

// Anchored is a kernel clock on which CLOCK_MONOTONIC read mono at at
// (a time.Now reading: later times are measured from its monotonic reading).
// Tests use it to run on a boot of the length they choose instead of the
// host's uptime.
func Anchored(at time.Time, mono time.Duration) Clock {
	return Clock{base: at, baseK: mono, fit: new(atomic.Pointer[Fit])}
}

// pairTries bounds Pair's retries; pairSpread is a bracket
// tight enough to stop at.
const (
	pairTries  = 16
	pairSpread = 20 * time.Microsecond
)

// Pair reads Go's clock (wall and monotonic) and CLOCK_MONOTONIC at
// about the same instant: CLOCK_MONOTONIC is read before and after time.Now
// and the middle is taken, from the tightest of a few tries. Two plain reads
// in a row can be milliseconds apart when the thread is preempted between
// them (a loaded host). With no kernel log read, dmesg_time is CLOCK_MONOTONIC
// through this anchor, so its error would shift every dmesg_time for the life
// of the process. mono is 0 if CLOCK_MONOTONIC cannot be read.
func Pair() (now time.Time, mono time.Duration) {
	best := time.Duration(-1)
	for range pairTries {
		var a, b unix.Timespec
		if unix.ClockGettime(unix.CLOCK_MONOTONIC, &a) != nil {
			return time.Now(), 0
		}
		t := time.Now()
		if unix.ClockGettime(unix.CLOCK_MONOTONIC, &b) != nil {
			return t, 0
		}
		before, after := time.Duration(a.Nano()), time.Duration(b.Nano())
		if spread := after - before; best < 0 || spread < best {
			best, now, mono = spread, t, before+spread/2
		}
		if best <= pairSpread {
			break
		}
	}
	return now, mono
}

// IsZero reports whether k is the zero Clock, anchored nowhere (New and
// Anchored make the others).
func (k Clock) IsZero() bool { return k.fit == nil }

// Mono returns CLOCK_MONOTONIC at wall-clock reading t.
func (k Clock) Mono(t time.Time) time.Duration { return k.baseK + t.Sub(k.base) }

// At returns the kernel-log (printk) time of wall-clock reading t: what the
// dmesg_time column holds.
func (k Clock) At(t time.Time) time.Duration {
	return k.Fit().PrintkAt(k.Mono(t))
}

// Wall returns the wall-clock time at which the printk clock read p: where a
// kernel log line stamped p belongs among the rows.
func (k Clock) Wall(p time.Duration) time.Time {
	return k.base.Add(k.Fit().MonoAt(p) - k.baseK)
}

// SetFit publishes a new estimate of the printk clock.
func (k Clock) SetFit(f Fit) {
	if k.fit != nil {
		k.fit.Store(&f)
	}
}

// Fit returns the latest estimate; the zero value (not Valid) before the first.
func (k Clock) Fit() Fit {
	if k.fit != nil {
		if f := k.fit.Load(); f != nil {
			return *f
		}
	}
	return Fit{}
}

// LoggedAt is when a kernel record read at read, with printk time ktime,
// happened: read, or for a record read after the fact (backlog) ktime
// through the clock (Wall: the estimate once a fresh record has been read;
// before that CLOCK_MONOTONIC, unchecked, as dmesg_time), and never later
// than read. The zero Clock places every record at read. Like read it
// carries Go's monotonic reading, so its age is measured on that clock.
func (k Clock) LoggedAt(read time.Time, ktime time.Duration, backlog bool) time.Time {
	if !backlog || k.IsZero() {
		return read
	}
	if t := k.Wall(ktime); t.Before(read) {
		return t
	}
	return read
}
