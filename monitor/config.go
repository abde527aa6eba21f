// Package monitor runs the logger: a fixed-rate poll loop that dispatches one
// sample per GPU per tick to that GPU's worker, the per-GPU pipeline (detect,
// write, snapshot), the NVML event and kernel-log listeners, hang and failure
// handling, the status line and the periodic summary, and the ordered
// shutdown. It wires sampler, anomaly, sink and snapshot; cmd only parses
// flags and calls Run.
package monitor

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/anomaly"
	"github.com/gpu-telemetry/gpu-telemetry/live/atop"
	"github.com/gpu-telemetry/gpu-telemetry/sink"
	"github.com/gpu-telemetry/gpu-telemetry/snapshot"
)

// Config is everything the monitor needs besides the opened NVML host.
type Config struct {
	Version string
	// Host names this host in every output (--host); "" means the
	// hostname.
	Host     string
	LogDir   string
	Interval time.Duration
	// Deadline is how long a GPU's sample may take before the GPU is
	// reported hung. 0 means max(2 x Interval, 1 s).
	Deadline time.Duration
	Anomaly  anomaly.Config

	RetentionDays int
	FsyncEvery    time.Duration
	MinFreeMB     uint64
	Compress      bool

	// SummaryEvery is the summary.log cadence and the rate window: 5 min,
	// the reference logger's (gpu-telemetry-deep.py's SUMMARY_INTERVAL_SEC,
	// "also used as rate-metric window").
	SummaryEvery time.Duration
	// KmsgPath is the kernel log to follow for Xids; "" disables it.
	KmsgPath string
	// KernelLog is KmsgPath opened before the start-up wait
	// (OpenKernelLog); nil: New plans it and Run opens it.
	KernelLog *KernelLog
	// KmsgMarkers lets the logger write a tagged marker to the kernel log
	// (at most hourly, when it has been quiet for an hour, only on the
	// kernel's log device and where writing is allowed) to keep the
	// dmesg_time clock estimate fresh.
	KmsgMarkers bool
	// XidDedupe: the same Xid on the same GPU from the other source (NVML
	// events vs kernel log) within this window is one incident.
	XidDedupe time.Duration
	// InventoryEvery is how often the GPU list is checked against the
	// driver's enumeration. 0 means 30 s.
	InventoryEvery time.Duration

	CrashCooldown  time.Duration
	SpikeCooldown  time.Duration
	FollowUps      []time.Duration // nil: snapshot's defaults
	CommandTimeout time.Duration
	Runner         snapshot.Runner // nil: real commands (an ExecRunner that logs a missing program once)

	// Atop serves atop's GPU statistics (the atopgpud protocol) when set.
	Atop *atop.Config
	// ProcRoot is where /proc is mounted, for process names ("" = /proc).
	ProcRoot string

	Logger   *slog.Logger
	Notifier Notifier // nil: not under systemd
	// Journal also sends every events.log line to the systemd journal with
	// structured fields (journal.go); nil: off (not under systemd).
	Journal JournalFunc
	// WatchdogEvery is how often Notifier.Watchdog is called while the poll
	// loop is alive, whatever the interval (systemd: half of WatchdogSec);
	// 0: never.
	WatchdogEvery time.Duration
	// HostRoot is where host facts are read from for system-info.txt.
	HostRoot string

	// trace records shutdown steps (tests).
	trace func(step string)
	// openLog opens events.log and summary.log; tests replace lumberjack,
	// whose rotation goroutine outlives Close.
	openLog func(dir, name string, maxMB int) lineLog
	// newTicker makes the poll loop's ticker; tests use Go timers on fake
	// time.
	newTicker func(time.Duration) ticker
	// mono reads the monotonic clock that durations are measured on (a
	// hang's length): the wall clock can step. Tests step one without the
	// other; nil: Go's monotonic clock.
	mono func() time.Duration
}

// DefaultDeadline returns the per-GPU sample deadline for an interval.
func DefaultDeadline(interval time.Duration) time.Duration {
	return max(2*interval, time.Second)
}

func (c *Config) defaults() {
	if c.Deadline <= 0 {
		c.Deadline = DefaultDeadline(c.Interval)
	}
	if c.SummaryEvery <= 0 {
		c.SummaryEvery = 5 * time.Minute
	}
	if c.XidDedupe <= 0 {
		c.XidDedupe = 10 * time.Second
	}
	if c.InventoryEvery <= 0 {
		c.InventoryEvery = inventoryEvery
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Runner == nil {
		// One runner for the snapshots and the boot log: a missing
		// program is logged once, whichever runs it first.
		c.Runner = &snapshot.ExecRunner{Timeout: c.CommandTimeout, Logger: c.Logger}
	}
	if c.Notifier == nil {
		c.Notifier = nopNotifier{}
	}
	if c.HostRoot == "" {
		c.HostRoot = "/"
	}
	if c.trace == nil {
		c.trace = func(string) {}
	}
	if c.newTicker == nil {
		c.newTicker = newTimerfdTicker
	}
	if c.mono == nil {
		base := time.Now()
		c.mono = func() time.Duration { return time.Since(base) }
	}
	if c.openLog == nil {
		c.openLog = func(dir, name string, maxMB int) lineLog {
			return sink.NewLineLog(dir, name, maxMB, logBackups, c.Logger)
		}
	}
}

// Validate checks the configuration, naming the offending setting.
func (c Config) Validate() error {
	var errs []error
	if c.Interval <= 0 || c.Interval > time.Hour {
		errs = append(errs, fmt.Errorf("interval %s: must be > 0 and at most 1h", c.Interval))
	}
	if c.LogDir == "" {
		errs = append(errs, errors.New("log dir: must not be empty"))
	}
	if c.RetentionDays < 1 {
		errs = append(errs, fmt.Errorf("retention %d days: must be at least 1", c.RetentionDays))
	}
	if c.FsyncEvery <= 0 {
		errs = append(errs, fmt.Errorf("fsync interval %s: must be > 0", c.FsyncEvery))
	}
	if err := c.Anomaly.Validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Notifier tells a service manager about the daemon's state (systemd's
// sd_notify). Each method is cheap and never blocks for long.
type Notifier interface {
	Ready()    // the first complete sample is written
	Watchdog() // the poll loop is alive (every Config.WatchdogEvery)
	Stopping() // shutdown has begun
}

type nopNotifier struct{}

func (nopNotifier) Ready()    {}
func (nopNotifier) Watchdog() {}
func (nopNotifier) Stopping() {}
