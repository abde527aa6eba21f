package sampler

import "github.com/gpu-telemetry/gpu-telemetry/internal/kclock"

// The kernel log clock lives in internal/kclock; the sampler stamps
// dmesg_time on it, and its users know it by this name.

// KernelClock is the kernel log clock the GPUs stamp dmesg_time on.
type KernelClock = kclock.Clock
