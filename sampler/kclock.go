package sampler

import (
	"time"

	"golang.org/x/sys/unix"
)

// KernelClock converts wall-clock readings to the kernel log's clock: seconds
// since boot on CLOCK_MONOTONIC, as dmesg and /dev/kmsg print them. It reads
// CLOCK_MONOTONIC once and then derives every later value from Go's own
// monotonic clock (also CLOCK_MONOTONIC), so no system call is made per sample
// and the two cannot drift apart.
type KernelClock struct {
	base  time.Time
	baseK time.Duration
}

// NewKernelClock anchors the kernel clock to now.
func NewKernelClock() KernelClock {
	var ts unix.Timespec
	now := time.Now()
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		return KernelClock{base: now}
	}
	return KernelClock{base: now, baseK: time.Duration(ts.Nano())}
}

// FixedKernelClock returns a clock where base corresponds to kernel time k
// (tests).
func FixedKernelClock(base time.Time, k time.Duration) KernelClock {
	return KernelClock{base: base, baseK: k}
}

// At returns the kernel-log time of wall-clock reading t.
func (k KernelClock) At(t time.Time) time.Duration { return k.baseK + t.Sub(k.base) }
