package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/alecthomas/kong"
	"github.com/gofrs/flock"

	"github.com/gpu-telemetry/gpu-telemetry/fanguard"
	"github.com/gpu-telemetry/gpu-telemetry/runstate"
	"github.com/gpu-telemetry/gpu-telemetry/sampler"
)

// FanGuardFlags are the fan guard's flags (embedded in CLI; docs/fan-guard.md).
type FanGuardFlags struct {
	FanGuard        bool   `name:"fan-guard" help:"Take a GPU's fans from a firmware fan controller that lets the die run hot (temperature at --fan-guard-engage, or a fan inversion), drive them by --fan-guard-curve, and hand them back once cooled. Off by default: without it no fan is ever touched. Needs root."`
	FanGuardCurve   string `name:"fan-guard-curve" help:"Fan curve of the guard: TEMP:PERCENT points, rising, linear in between. Default: ${default}." default:"60:40,85:100" placeholder:"C:%,..."`
	FanGuardEngage  int    `name:"fan-guard-engage" help:"Die temperature (C) at which the guard takes the fans. Default: ${default}." default:"70"`
	FanGuardRelease int    `name:"fan-guard-release" help:"The guard hands the fans back once the die has stayed below this temperature (C) for 60 s. Default: ${default}." default:"65"`
}

// fanGuardConfig returns the guard's configuration, validated; nil without
// --fan-guard. The flags are checked either way: a bad value is bad input.
func (f *FanGuardFlags) fanGuardConfig() (*fanguard.Config, error) {
	c := fanguard.DefaultConfig()
	curve, err := fanguard.ParseCurve(f.FanGuardCurve)
	if err != nil {
		return nil, fmt.Errorf("--fan-guard-curve %s: %w", f.FanGuardCurve, err)
	}
	c.Curve, c.EngageC, c.ReleaseC = curve, f.FanGuardEngage, f.FanGuardRelease
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if !f.FanGuard {
		return nil, nil
	}
	return &c, nil
}

// FanGuardCLI is `gpu-telemetry fan-guard release`.
type FanGuardCLI struct {
	Action  string   `arg:"" enum:"release" help:"release: hand the fans the fan guard holds back to the firmware."`
	LogDir  string   `help:"The logger's --log-dir, whose run-state names the fans held. Default: ${default}." default:"${log_dir}" type:"path"`
	All     bool     `help:"Hand back every fan of every GPU, whatever run-state says."`
	Timeout Interval `help:"How long the driver may take: nvmlInit, all the hand-back calls together, nvmlShutdown, each. Default: ${default}." default:"5s"`
}

// fanGuardDescription is what `gpu-telemetry fan-guard --help` says it does.
const fanGuardDescription = "Hands the fans the fan guard (--fan-guard) holds back to the firmware's control (nvmlDeviceSetDefaultFanSpeed_v2), " +
	"talking to the driver directly: for a logger that was killed (the unit's ExecStopPost=). The fans held are in --log-dir's run-state; " +
	"--all hands back every fan. Refused while a logger holds --log-dir's lock (it hands back its fans itself). " +
	"The hand-back calls share one --timeout. Fans not handed back stay in run-state. " +
	"Exit status: 0 handed back or nothing held, 1 a fan not handed back or a logger running, 2 bad arguments."

// runFanGuard runs `gpu-telemetry fan-guard release`.
func runFanGuard(args []string, stdout, stderr io.Writer) int {
	var cli FanGuardCLI
	if code, ok := parseFlags(&cli, "gpu-telemetry fan-guard", args, stdout, stderr, kong.Description(fanGuardDescription)); !ok {
		return code
	}
	if d := time.Duration(cli.Timeout); d <= 0 || d > time.Minute {
		fmt.Fprintf(stderr, "gpu-telemetry fan-guard: --timeout %s: must be > 0 and at most 1m\n", d)
		return 2
	}
	return releaseFans(&cli, sampler.NewNVML(), stdout, stderr)
}

// releaseFans hands back the fans run-state names (every fan with --all)
// through lib. While it runs it holds --log-dir's lock, the one a logger
// takes: a running logger hands back its fans itself, and none starts
// meanwhile. What it could not hand back stays in run-state, each said
// with why; exit status 1 then.
func releaseFans(cli *FanGuardCLI, lib sampler.Library, stdout, stderr io.Writer) int {
	unlock, err := lockForRelease(filepath.Join(cli.LogDir, logDirLock))
	if err != nil {
		fmt.Fprintf(stderr, "gpu-telemetry fan-guard: %v\n", err)
		return 1
	}
	defer unlock()
	st, found, err := runstate.Read(cli.LogDir)
	if err != nil && !cli.All {
		fmt.Fprintf(stderr, "gpu-telemetry fan-guard: --log-dir %s: %v\n", cli.LogDir, err)
		return 1
	}
	held := map[string][]int{}
	for _, h := range st.FanGuard {
		held[h.UUID] = h.Fans
	}
	if !cli.All && len(held) == 0 {
		fmt.Fprintln(stdout, "fan guard: no fans held (run-state in "+cli.LogDir+" names none)")
		return 0
	}
	out, rerr := sampler.ReleaseFans(lib, held, cli.All, time.Duration(cli.Timeout))
	code := 0
	for _, r := range out {
		what := fmt.Sprintf("GPU %d %s fan %d", r.GPU, r.UUID, r.Fan)
		switch {
		case r.GPU < 0:
			what = fmt.Sprintf("%s fan %d", r.UUID, r.Fan)
		case r.Fan < 0:
			what = strings.TrimSpace(fmt.Sprintf("GPU %d %s", r.GPU, r.UUID))
		}
		if r.Err != nil {
			fmt.Fprintf(stdout, "%s: not handed back: %v\n", what, r.Err)
			code = 1
			continue
		}
		fmt.Fprintf(stdout, "%s: handed back to the firmware\n", what)
		held[r.UUID] = slices.DeleteFunc(held[r.UUID], func(f int) bool { return f == r.Fan })
	}
	if rerr != nil {
		fmt.Fprintf(stderr, "gpu-telemetry fan-guard: %v\n", rerr)
		code = 1
	}
	// Run-state keeps what was not handed back, for the next start or the
	// next release.
	var left []runstate.FanHold
	for _, h := range st.FanGuard {
		if fans := held[h.UUID]; len(fans) > 0 {
			left = append(left, runstate.FanHold{UUID: h.UUID, Fans: fans})
		}
	}
	if left != nil {
		fmt.Fprintf(stderr, "gpu-telemetry fan-guard: fans not handed back, kept in run-state: %s\n", runstate.HoldsText(left))
		code = 1
	}
	if found && len(left) != len(st.FanGuard) {
		st.FanGuard = left
		if err := runstate.Write(cli.LogDir, st); err != nil {
			fmt.Fprintf(stderr, "gpu-telemetry fan-guard: cannot update the fans held in run-state (the next start hands them back again): %v\n", err)
		}
	}
	return code
}

// lockForRelease takes the log dir's lock (path) as a logger does; an error
// when a logger holds it. No lock file: no logger has run there, and none
// is created.
func lockForRelease(path string) (unlock func(), err error) {
	if _, err := os.Lstat(path); errors.Is(err, fs.ErrNotExist) {
		return func() {}, nil
	}
	l := flock.New(path, flock.SetFlag(os.O_RDWR|syscall.O_NOFOLLOW))
	ok, err := l.TryLock()
	if err != nil {
		return nil, fmt.Errorf("lock file %s: %w", path, err)
	}
	if !ok {
		holder := "unknown"
		if b, err := os.ReadFile(path); err == nil && strings.TrimSpace(string(b)) != "" {
			holder = strings.TrimSpace(string(b))
		}
		return nil, fmt.Errorf("a logger is running (pid %s, lock file %s is held): it hands the fans back itself when it stops", holder, path)
	}
	return func() { l.Unlock() }, nil
}
