package main

import (
	"fmt"
	"io"
	"time"

	"github.com/alecthomas/kong"

	"github.com/gpu-telemetry/gpu-telemetry/fanguard"
	"github.com/gpu-telemetry/gpu-telemetry/sampler"
	"github.com/gpu-telemetry/gpu-telemetry/snapshot"
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
	LogDir  string   `help:"The logger's --log-dir, whose run-state names the fans held. Default: ${default}." default:"/var/log/gpu-telemetry" type:"path"`
	All     bool     `help:"Hand back every fan of every GPU, whatever run-state says."`
	Timeout Interval `help:"How long each call into the driver may take. Default: ${default}." default:"5s"`
}

// fanGuardDescription is what `gpu-telemetry fan-guard --help` says it does.
const fanGuardDescription = "Hands the fans the fan guard (--fan-guard) holds back to the firmware's control (nvmlDeviceSetDefaultFanSpeed_v2), " +
	"talking to the driver directly: for a logger that was killed (the unit's ExecStopPost=). The fans held are in --log-dir's run-state; " +
	"--all hands back every fan. Each call into the driver waits at most --timeout. Exit status: 0 handed back or nothing held, 1 a fan not handed back, 2 bad arguments."

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
	held := map[string][]int{}
	if !cli.All {
		st, found, err := snapshot.ReadRunState(cli.LogDir)
		if err != nil {
			fmt.Fprintf(stderr, "gpu-telemetry fan-guard: --log-dir %s: %v\n", cli.LogDir, err)
			return 1
		}
		for _, h := range st.FanGuard {
			held[h.UUID] = h.Fans
		}
		if !found || len(held) == 0 {
			fmt.Fprintln(stdout, "fan guard: no fans held (run-state in "+cli.LogDir+" names none)")
			return 0
		}
	}
	out, err := sampler.ReleaseFans(sampler.NewNVML(), held, cli.All, time.Duration(cli.Timeout))
	code := 0
	for _, r := range out {
		if r.Err != nil {
			fmt.Fprintf(stdout, "GPU %d %s fan %d: not handed back: %v\n", r.GPU, r.UUID, r.Fan, r.Err)
			code = 1
			continue
		}
		fmt.Fprintf(stdout, "GPU %d %s fan %d: handed back to the firmware\n", r.GPU, r.UUID, r.Fan)
	}
	if err != nil {
		fmt.Fprintf(stderr, "gpu-telemetry fan-guard: %v\n", err)
		return 1
	}
	if code == 0 && !cli.All {
		// Handed back: the next start has nothing to restore.
		if st, found, err := snapshot.ReadRunState(cli.LogDir); err == nil && found {
			st.FanGuard = nil
			if err := snapshot.WriteRunState(cli.LogDir, st); err != nil {
				fmt.Fprintf(stderr, "gpu-telemetry fan-guard: cannot clear the fans held in run-state (the next start hands them back again): %v\n", err)
			}
		}
	}
	return code
}
