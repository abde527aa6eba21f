// Package monitor runs the logger: the fixed-rate poll loop dispatching one
// sample per GPU per tick to its worker, each GPU's pipeline, the NVML event
// and kernel log listeners, hang and failure handling, the status line and
// summary, and the ordered shutdown. It wires sampler, anomaly, sink and
// snapshot; cmd parses flags and calls Run.
package monitor

import (
	"cmp"
	"log/slog"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/anomaly"
	"github.com/gpu-telemetry/gpu-telemetry/fanguard"
	"github.com/gpu-telemetry/gpu-telemetry/internal/counters"
	"github.com/gpu-telemetry/gpu-telemetry/live/atop"
	"github.com/gpu-telemetry/gpu-telemetry/runstate"
	"github.com/gpu-telemetry/gpu-telemetry/sink"
	"github.com/gpu-telemetry/gpu-telemetry/snapshot"
)

// Config is everything the monitor needs besides the opened NVML host.
type Config struct {
	Version  string
	Host     string // names this host in every output (--host); "": the hostname
	LogDir   string
	Interval time.Duration
	// Deadline is how long a GPU's sample may take before the GPU is
	// reported hung; 0: twice the interval, at least 1 s.
	Deadline time.Duration
	Anomaly  anomaly.Config

	CSV sink.CSVConfig // the CSV files; New sets Dir, Logger and Tick

	// SummaryEvery is the summary.log cadence and the rate window: 5 min,
	// the reference logger's (gpu-telemetry-deep.py's SUMMARY_INTERVAL_SEC,
	// "also used as rate-metric window").
	SummaryEvery time.Duration
	KmsgPath     string     // the kernel log to follow; "": none
	KernelLog    *KernelLog // KmsgPath opened early (OpenKernelLog); nil: Run opens it
	// KmsgMarkers lets the logger write a marker to the kernel log when it
	// has been quiet for an hour, to keep the dmesg_time estimate fresh.
	KmsgMarkers    bool
	InventoryEvery time.Duration // GPU list vs the driver's enumeration; 0: 30 s
	// InspectAfter: a critical class that began in this many earlier boots
	// of a board escalates its repair action to inspect; 0:
	// action.DefaultInspectAfter.
	InspectAfter int
	// ExpectGPUs is how many GPUs the driver should enumerate (0: not
	// said): fewer at start is a critical GPU_MISSING line, so that a
	// first boot, which has no previous run to compare, is checked too.
	ExpectGPUs int

	// Snapshots configures the crash and spike snapshots and the boot log;
	// New sets Dir, Logger, Flush, Written, HostRoot and KernelWall.
	Snapshots snapshot.Config

	Atop *atop.Config // serves the atopgpud protocol when set
	// FanGuard takes the fans of a GPU running hot (--fan-guard;
	// monitor/fanguard.go); nil: off, and no fan setter is ever called.
	FanGuard *fanguard.Config
	ProcRoot string // where /proc is mounted ("": /proc)

	Logger *slog.Logger
	// Counters is the daemon's one counter registry, required: every part
	// the monitor builds counts in it, the kernel log opened early
	// (OpenKernelLog) too, and the parts cmd builds (the control socket,
	// the metrics endpoint). It is made before the monitor, by cmd, as the
	// kernel log is opened before NVML.
	Counters *counters.Registry
	Notifier Notifier    // nil: not under systemd
	Journal  JournalFunc // also sends events.log lines to the systemd journal; nil: off
	// WatchdogEvery is how often Notifier.Watchdog is called while the poll
	// loop is alive (systemd: half of WatchdogSec); 0: never.
	WatchdogEvery time.Duration
	HostRoot      string // where host facts are read from

	// Tests: trace records shutdown steps; openLog replaces lumberjack,
	// whose rotation goroutine outlives Close; newTicker runs on fake time;
	// mono steps the monotonic clock (hang lengths are measured on it: the
	// wall clock can step) without the wall clock; markCleanStop
	// (runstate.MarkCleanStop) stalls on a disk that stopped answering.
	markCleanStop func(dir string, at time.Time) error
	trace         func(step string)
	openLog       func(dir, name string, maxMB int, reg *counters.Registry) lineLog
	newTicker     func(time.Duration) ticker
	mono          func() time.Duration
}

func (c *Config) defaults() {
	if c.Deadline <= 0 {
		c.Deadline = max(2*c.Interval, time.Second)
	}
	if c.SummaryEvery <= 0 {
		c.SummaryEvery = 5 * time.Minute
	}
	if c.InventoryEvery <= 0 {
		c.InventoryEvery = inventoryEvery
	}
	c.Logger = cmp.Or(c.Logger, slog.New(slog.DiscardHandler))
	c.Notifier = cmp.Or[Notifier](c.Notifier, nopNotifier{})
	c.HostRoot = cmp.Or(c.HostRoot, "/")
	if c.trace == nil {
		c.trace = func(string) {}
	}
	if c.markCleanStop == nil {
		c.markCleanStop = runstate.MarkCleanStop
	}
	if c.newTicker == nil {
		c.newTicker = newTimerfdTicker
	}
	if c.mono == nil {
		base := time.Now()
		c.mono = func() time.Duration { return time.Since(base) }
	}
	if c.openLog == nil {
		c.openLog = func(dir, name string, maxMB int, reg *counters.Registry) lineLog {
			return sink.NewLineLog(dir, name, maxMB, logBackups, c.CSV.FsyncEvery, c.Logger, reg)
		}
	}
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
