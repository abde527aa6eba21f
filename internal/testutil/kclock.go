package testutil

import (
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Monotonic returns CLOCK_MONOTONIC now: the clock the kernel log's
// timestamps are measured against.
func Monotonic(t testing.TB) time.Duration {
	t.Helper()
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ts.Nano())
}

// PrintkClock is a kernel log clock as the tests model it (and the simulated
// driver's kmsg_clock makes it): Offset behind CLOCK_MONOTONIC, and losing
// Drift of it (300e-6 is 300 ppm) since boot.
type PrintkClock struct {
	Offset time.Duration
	Drift  float64
}

// At returns the printk time at CLOCK_MONOTONIC m.
func (c PrintkClock) At(m time.Duration) time.Duration {
	return m - c.Offset - time.Duration(c.Drift*float64(m))
}
