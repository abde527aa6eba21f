package sampler

import (
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/internal/kclock"
)

// The kernel log clock lives in internal/kclock; the sampler stamps
// dmesg_time on it, and its users know it by these names.

// KernelClock is the kernel log clock the GPUs stamp dmesg_time on.
type KernelClock = kclock.Clock

// NewKernelClock anchors a kernel log clock to now (kclock.New).
func NewKernelClock() KernelClock { return kclock.New() }

// KernelClockAt is a kernel log clock on which CLOCK_MONOTONIC read mono at
// at (kclock.Anchored): tests choose the boot's length with it.
func KernelClockAt(at time.Time, mono time.Duration) KernelClock { return kclock.Anchored(at, mono) }

// ClockPair reads Go's clock and CLOCK_MONOTONIC at about the same instant
// (kclock.Pair).
func ClockPair() (now time.Time, mono time.Duration) { return kclock.Pair() }
