package main

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/alecthomas/kong"
	"github.com/prometheus/exporter-toolkit/web"

	"github.com/gpu-telemetry/gpu-telemetry/action"
	"github.com/gpu-telemetry/gpu-telemetry/anomaly"
	"github.com/gpu-telemetry/gpu-telemetry/live/control"
	"github.com/gpu-telemetry/gpu-telemetry/monitor"
	"github.com/gpu-telemetry/gpu-telemetry/sink"
	"github.com/gpu-telemetry/gpu-telemetry/snapshot"
)

// CLI is the logger's command line. Running the logger is what a command
// line of flags only does (the unit's ExecStart, and service lines written
// for earlier loggers: gpu-telemetry --interval 0.1 --log-dir
// /var/log/gpu-telemetry); the commands are in the table in commands.go.
type CLI struct {
	Interval       Interval         `help:"Time between samples: seconds (0.1) or a Go duration (100ms); > 0 and at most 1h. Default: ${default}." default:"100ms"`
	LogDir         string           `help:"Directory for CSVs, logs and snapshots (created if missing). Default: ${default}." default:"${log_dir}" type:"path"`
	Detectors      kong.Plugins     `embed:""` // the detectors' flags (detectorFlags)
	LockFile       string           `help:"Single-instance lock file (holds the PID); its directory must exist (/run/gpu-telemetry is made). Default: ${default}." default:"/run/gpu-telemetry.pid" type:"path"`
	GPU            []string         `help:"GPUs to monitor by index, UUID or PCI bus id; comma-separated or repeated. Default: all GPUs." sep:","`
	RetentionDays  int              `help:"Delete CSV days older than this. Default: ${default}." default:"14"`
	FsyncInterval  Interval         `help:"Longest time rows wait in the page cache before fsync. Default: ${default}." default:"1s"`
	MinFreeMB      uint64           `name:"min-free-mb" help:"Stop writing rows below this much free disk space (MB); resume when it returns. Default: ${default}." default:"500"`
	Deadline       Interval         `help:"Time a GPU's sample may take before the GPU is reported hung (NVML_HUNG rows and a crash snapshot). Default: max(2 x interval, 1s)." placeholder:"DURATION"`
	Kmsg           string           `help:"Kernel log to follow for NVRM Xid lines (a file or FIFO in /dev/kmsg format for tests); 'none' disables. Default: ${default}." default:"/dev/kmsg"`
	FollowUps      []Interval       `name:"follow-ups" help:"Extra captures after a crash snapshot, filed with the same incident. Default: ${default}." default:"${follow_ups}" sep:","`
	CrashCooldown  Interval         `help:"At most one crash snapshot per GPU per this long. Default: ${default}." default:"${crash_cooldown}"`
	SpikeCooldown  Interval         `help:"At most one fan spike snapshot per this long. Default: ${default}." default:"${spike_cooldown}"`
	SummaryEvery   Interval         `name:"summary-interval" help:"summary.log cadence and rate window. Default: ${default}." default:"5m"`
	InventoryEvery Interval         `name:"inventory-interval" help:"How often the GPU list is checked against the driver's enumeration (vanished GPUs). Default: ${default}." default:"30s"`
	StartTimeout   Interval         `name:"start-timeout" help:"How long start-up waits for the driver (init, enumeration) and for each GPU's static facts before going on without them. Default: ${default}." default:"20s"`
	NoCompress     bool             `help:"Do not gzip finished CSV days."`
	ExpectGPUs     int              `name:"expect-gpus" help:"GPUs the driver should enumerate: fewer at start is a critical GPU_MISSING event and gpu_telemetry_gpus_missing, also on a first boot with no previous run to compare; 0 (the default) compares with the previous run only."`
	InspectAfter   int              `name:"inspect-after-boots" help:"A GPU whose same critical fault (an Xid, a health reason, lost) began in this many earlier boots gets the action inspect (the board's history: action-<UUID>.json in the log directory); 1 to 15. Default: ${default}." default:"2"`
	Socket         string           `help:"Control socket for 'gpu-telemetry status' and 'top'; 'none' disables; its directory must exist (/run/gpu-telemetry is made). Default: ${default}." default:"${socket}"`
	SocketGroup    string           `help:"Group allowed to use the control socket (mode 0660); without it the socket is mode 0600 (root only)."`
	Host           string           `help:"Name of this host in every output: metrics (gpu_telemetry_host_info), events.log, snapshot headers, status. Letters, digits, '.', '-', '_'. Default: the hostname (in a container: the node's name, not the pod's; set it)."`
	MetricsListen  string           `help:"Serve Prometheus metrics on this address (e.g. 127.0.0.1:9464); off by default."`
	MetricsLinks   LinkSeries       `name:"metrics-nvlink-links" help:"Which NVLink links get per-link metric series: errors (a link down or with errors; a healthy B200 exports none), all (every link: about 200 more series per B200), none (the per-GPU sums only; GPUNVLinkDown then has no input). Default: ${default}." default:"errors" placeholder:"all|errors|none"`
	MetricsNoWork  bool             `name:"metrics-no-workload" help:"Leave gpu_workload_info (the Slurm job, pod UID and container of the processes on each GPU) out of the metrics: whoever can reach --metrics-listen reads it, on loopback every local user."`
	WebConfigFile  string           `name:"web.config.file" help:"Prometheus exporter-toolkit web config (TLS, basic auth) for --metrics-listen."`
	NoKmsgMarkers  bool             `name:"no-kmsg-markers" help:"Never write a clock-check marker to the kernel log (by default one is written when the log has been quiet for an hour, at most hourly, where the logger may write /dev/kmsg)."`
	LogLevel       LogLevel         `help:"Log level: debug, info, warn, error. Default: ${default}." default:"info" enum:"debug,info,warn,error"`
	Version        kong.VersionFlag `help:"Print the version and exit."`

	AtopFlags     `embed:""`
	FanGuardFlags `embed:""`

	knobs []anomaly.Knob // the knob of each of Detectors' flags
}

// newCLI returns the logger's command line with the detectors' flags.
func newCLI() *CLI {
	c := &CLI{}
	c.knobs, c.Detectors = detectorFlags()
	return c
}

// detectorFlags returns the detectors' knobs that have a flag
// (anomaly.Knob.Flag) and, for each, a kong plugin: a struct of one field
// whose tags make the flag. A detector's flag is declared with its knob;
// nothing here names it.
func detectorFlags() ([]anomaly.Knob, kong.Plugins) {
	var knobs []anomaly.Knob
	var flags kong.Plugins
	for _, k := range anomaly.AllKnobs() {
		if k.Flag == "" {
			continue
		}
		typ := reflect.TypeFor[float64]()
		switch {
		case k.Int && k.Min >= 0 && k.Max <= math.MaxUint32:
			typ = reflect.TypeFor[uint32]() // kong refuses a negative value itself
		case k.Int:
			typ = reflect.TypeFor[int64]()
		}
		tag := fmt.Sprintf("name:%q help:%q default:%q", k.Flag, k.Help+" Default: ${default}.", anomaly.FormatKnob(k.Default))
		st := reflect.StructOf([]reflect.StructField{{Name: "V", Type: typ, Tag: reflect.StructTag(tag)}})
		knobs = append(knobs, k)
		flags = append(flags, reflect.New(st).Interface())
	}
	return knobs, flags
}

// knob returns the value of the i-th detector flag.
func (c *CLI) knob(i int) float64 {
	v := reflect.ValueOf(c.Detectors[i]).Elem().Field(0)
	switch {
	case v.CanUint():
		return float64(v.Uint())
	case v.CanInt():
		return float64(v.Int())
	}
	return v.Float()
}

// Interval is a duration given as seconds ("0.1") or a Go duration ("100ms").
type Interval time.Duration

// UnmarshalText implements encoding.TextUnmarshaler for kong.
func (iv *Interval) UnmarshalText(b []byte) error {
	s := strings.TrimSpace(string(b))
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		if f != f || f > float64(1<<62)/1e9 || f < -float64(1<<62)/1e9 {
			return fmt.Errorf("%q is out of range", s)
		}
		*iv = Interval(time.Duration(f * float64(time.Second)))
		return nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("%q is neither seconds (0.1) nor a duration (100ms)", s)
	}
	*iv = Interval(d)
	return nil
}

func (iv Interval) String() string { return time.Duration(iv).String() }

// LogLevel is a slog level name.
type LogLevel string

func (l LogLevel) level() slog.Level {
	switch l {
	case "debug":
		return slog.LevelDebug
	case "warn":
		return slog.LevelWarn
	case "error":
		return slog.LevelError
	}
	return slog.LevelInfo
}

// Validate checks ranges kong cannot; each error names its flag.
func (c *CLI) Validate() error {
	var errs []error
	if iv := time.Duration(c.Interval); iv <= 0 || iv > time.Hour {
		errs = append(errs, fmt.Errorf("--interval %s: must be > 0 and at most 1h", iv))
	} else if iv < time.Millisecond {
		errs = append(errs, fmt.Errorf("--interval %s: must be at least 1ms", iv))
	}
	for i, k := range c.knobs {
		if err := k.Check("--"+k.Flag, c.knob(i)); err != nil {
			errs = append(errs, err)
		}
	}
	if c.RetentionDays < 1 || c.RetentionDays > 3650 {
		errs = append(errs, fmt.Errorf("--retention-days %d: must be between 1 and 3650", c.RetentionDays))
	}
	if d := time.Duration(c.FsyncInterval); d <= 0 || d > time.Hour {
		errs = append(errs, fmt.Errorf("--fsync-interval %s: must be > 0 and at most 1h", d))
	}
	if d := time.Duration(c.Deadline); d < 0 || d > time.Hour {
		errs = append(errs, fmt.Errorf("--deadline %s: must be between 0 (automatic) and 1h", d))
	}
	for _, f := range c.FollowUps {
		if d := time.Duration(f); d <= 0 || d > 24*time.Hour {
			errs = append(errs, fmt.Errorf("--follow-ups %s: each must be > 0 and at most 24h", d))
		}
	}
	if d := time.Duration(c.CrashCooldown); d < 0 {
		errs = append(errs, fmt.Errorf("--crash-cooldown %s: must not be negative", d))
	}
	if d := time.Duration(c.SpikeCooldown); d < 0 {
		errs = append(errs, fmt.Errorf("--spike-cooldown %s: must not be negative", d))
	}
	if d := time.Duration(c.InventoryEvery); d < 100*time.Millisecond || d > 24*time.Hour {
		errs = append(errs, fmt.Errorf("--inventory-interval %s: must be between 100ms and 24h", d))
	}
	if d := time.Duration(c.StartTimeout); d < 100*time.Millisecond || d > 10*time.Minute {
		errs = append(errs, fmt.Errorf("--start-timeout %s: must be between 100ms and 10m", d))
	}
	if c.ExpectGPUs < 0 || c.ExpectGPUs > maxExpectGPUs {
		errs = append(errs, fmt.Errorf("--expect-gpus %d: must be between 0 and %d", c.ExpectGPUs, maxExpectGPUs))
	}
	if c.InspectAfter < 1 || c.InspectAfter >= action.MaxBoots {
		errs = append(errs, fmt.Errorf("--inspect-after-boots %d: must be between 1 and %d", c.InspectAfter, action.MaxBoots-1))
	}
	if d := time.Duration(c.SummaryEvery); d < time.Second {
		errs = append(errs, fmt.Errorf("--summary-interval %s: must be at least 1s", d))
	}
	for _, g := range c.GPU {
		if strings.TrimSpace(g) == "" {
			errs = append(errs, errors.New("--gpu: empty GPU selector"))
		}
	}
	if c.LogDir == "" {
		errs = append(errs, errors.New("--log-dir: must not be empty"))
	}
	if c.Host != "" && !validHost(c.Host) {
		errs = append(errs, fmt.Errorf("--host %q: must be 1-253 letters, digits, '.', '-' or '_'", c.Host))
	}
	if c.Socket == "" {
		errs = append(errs, errors.New("--socket: must be a path or 'none'"))
	} else if err := control.CheckPath(c.Socket); c.Socket != "none" && err != nil {
		errs = append(errs, fmt.Errorf("--socket %s: %w", c.Socket, err))
	}
	if c.MetricsListen != "" {
		if err := checkListenAddr(c.MetricsListen); err != nil {
			errs = append(errs, fmt.Errorf("--metrics-listen %s: %w", c.MetricsListen, err))
		}
	}
	if c.WebConfigFile != "" && c.MetricsListen == "" {
		errs = append(errs, errors.New("--web.config.file: needs --metrics-listen"))
	}
	if _, err := c.fanGuardConfig(); err != nil {
		errs = append(errs, err)
	}
	if c.MetricsNoWork && c.MetricsListen == "" {
		errs = append(errs, errors.New("--metrics-no-workload: needs --metrics-listen"))
	}
	if len(errs) > 0 {
		return errs[0] // one line: the first problem
	}
	return nil
}

// checkSystem checks the flags against this host, after Validate and before
// anything is written or created, so that bad input fails with one line and
// exit 2 rather than after start-up: a --socket-group that names no group,
// a --web.config.file that cannot be read, a directory for --socket or
// --lock-file that does not exist. Only the daemon's own directory, runDir,
// is created (makeRunDir); another one is the operator's to make, not ours
// to make as root.
//
// Each directory the daemon writes in as root (the log dir, the socket's,
// the lock file's) must be writable by root and the daemon's user only
// (sink.CheckDir): anyone else who could write it could plant links there
// to files the daemon would then write. In the log dir, no name the daemon
// writes by name through code that follows links may be a link
// (monitor.CheckLogDir).
func (c *CLI) checkSystem() error {
	if err := monitor.CheckLogDir(c.LogDir); err != nil {
		return fmt.Errorf("--log-dir %s: %w", c.LogDir, err)
	}
	if c.Socket != "none" {
		if err := dirExists(c.Socket); err != nil {
			return fmt.Errorf("--socket %s: %w", c.Socket, err)
		}
		if err := sink.CheckDir(filepath.Dir(c.Socket)); err != nil {
			return fmt.Errorf("--socket %s: %w", c.Socket, err)
		}
		if c.SocketGroup != "" {
			if _, err := control.LookupGroup(c.SocketGroup); err != nil {
				return err
			}
		}
	}
	if err := dirExists(c.LockFile); err != nil {
		return fmt.Errorf("--lock-file %s: %w", c.LockFile, err)
	}
	if err := sink.CheckDir(filepath.Dir(c.LockFile)); err != nil {
		return fmt.Errorf("--lock-file %s: %w", c.LockFile, err)
	}
	if err := sink.CheckNotLink(c.LockFile, false); err != nil {
		return fmt.Errorf("--lock-file %s: %w", c.LockFile, err)
	}
	if c.WebConfigFile != "" {
		if err := web.Validate(c.WebConfigFile); err != nil {
			return fmt.Errorf("--web.config.file %s: %w", c.WebConfigFile, err)
		}
	}
	return nil
}

// maxExpectGPUs bounds --expect-gpus: NVML numbers GPUs in an unsigned
// int, but no host holds more than a few dozen; a larger number is a typo.
const maxExpectGPUs = 1024

// runDir is the daemon's own directory under /run: the default socket's,
// and the unit's --lock-file's. systemd's RuntimeDirectory= makes it under
// the unit; run by hand, the logger makes it (makeRunDir).
var runDir = filepath.Dir(defaultSocket)

// makeRunDir makes runDir when the socket or the lock file is in it.
func (c *CLI) makeRunDir() error {
	if (c.Socket != "none" && filepath.Dir(c.Socket) == runDir) || filepath.Dir(c.LockFile) == runDir {
		return os.MkdirAll(runDir, 0o755)
	}
	return nil
}

// dirExists says why the directory of path is not one that exists (runDir
// always may be: the logger makes it).
func dirExists(path string) error {
	dir := filepath.Dir(path)
	if dir == runDir {
		return nil
	}
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("directory %s does not exist", dir)
	case err != nil:
		return fmt.Errorf("directory %s: %w", dir, errors.Unwrap(err))
	case !fi.IsDir():
		return fmt.Errorf("%s is not a directory", dir)
	}
	return nil
}

// monitorConfig turns the flags into the monitor's configuration.
func (c *CLI) monitorConfig(log *slog.Logger) monitor.Config {
	ac := anomaly.DefaultConfig()
	for i, k := range c.knobs {
		ac.Knobs[k.Name] = c.knob(i)
	}
	kmsg := c.Kmsg
	if kmsg == "none" {
		kmsg = ""
	}
	follow := make([]time.Duration, 0, len(c.FollowUps))
	for _, f := range c.FollowUps {
		follow = append(follow, time.Duration(f))
	}
	sd := newSystemd(log)
	fg, _ := c.fanGuardConfig() // checked by Validate
	return monitor.Config{
		FanGuard:       fg,
		Version:        version,
		Host:           c.Host,
		LogDir:         c.LogDir,
		Interval:       time.Duration(c.Interval),
		Deadline:       time.Duration(c.Deadline),
		Anomaly:        ac,
		SummaryEvery:   time.Duration(c.SummaryEvery),
		InventoryEvery: time.Duration(c.InventoryEvery),
		InspectAfter:   c.InspectAfter,
		ExpectGPUs:     c.ExpectGPUs,
		KmsgPath:       kmsg,
		KmsgMarkers:    !c.NoKmsgMarkers,
		Logger:         log,
		Notifier:       sd,
		Journal:        journalSender(),
		WatchdogEvery:  sd.watchdog,
		Atop:           c.atopConfig(),
		CSV: sink.CSVConfig{RetentionDays: c.RetentionDays, FsyncEvery: time.Duration(c.FsyncInterval),
			MinFreeMB: c.MinFreeMB, Compress: !c.NoCompress},
		Snapshots: snapshot.Config{CrashCooldown: time.Duration(c.CrashCooldown), SpikeCooldown: time.Duration(c.SpikeCooldown),
			FollowUps: follow},
	}
}

// checkListenAddr rejects an address net.Listen("tcp") could never take
// (no port, a bad port), so that a typo fails at start with one line while
// a bind failure at run time (address in use) only costs the endpoint.
func checkListenAddr(addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return fmt.Errorf("port %q: must be a number from 0 to 65535", port)
	}
	return nil
}

// validHost reports whether s can name a host in every output as it is
// (a label value, a logfmt value without quotes, a file's header).
func validHost(s string) bool {
	if len(s) == 0 || len(s) > 253 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}
