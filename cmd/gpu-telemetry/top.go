package main

import (
	"context"
	"fmt"
	"io"
	"os/signal"
	"syscall"

	"github.com/gpu-telemetry/gpu-telemetry/live"
	"github.com/gpu-telemetry/gpu-telemetry/live/control"
	"github.com/gpu-telemetry/gpu-telemetry/live/top"
)

// TopCLI is `gpu-telemetry top`.
type TopCLI struct {
	SocketFlag
	Host []string `name:"host" sep:"none" help:"Show this host's view instead, through ssh HOST gpu-telemetry status --json --watch (the user's own ssh, in batch mode); several: one line per host, the worst first, Enter opens one."`
}

// topDescription is what `gpu-telemetry top --help` says the command does.
const topDescription = "A full-screen live view of every GPU, refreshed every second from the daemon's control socket; " +
	"GPUs that are failing or critical come first and stay on the screen. " +
	"Up, Down, PgUp, PgDn, Home and End scroll the GPUs that do not fit; q, Esc or Ctrl-C quits. " +
	"--host NAME shows that host's view through the user's ssh (no network listener); several --host, a page with one line per host, " +
	"the worst first, where Up and Down select one, Enter opens its view and q there comes back. " +
	"Exit status: 0 quit, 1 no daemon to ask (or host to reach) or no terminal, 2 bad flags."

// runTop runs `gpu-telemetry top`; it returns the exit status. The daemon
// is asked once before the screen is taken, so that a daemon that is not
// there is one line on the terminal, not a full screen.
func runTop(args []string, stdout, stderr io.Writer) int {
	var cli TopCLI
	path, code, ok := socketFlags(&cli, "gpu-telemetry top", topDescription, 2, args, stdout, stderr)
	if !ok {
		return code
	}
	if len(cli.Host) > 0 {
		return runTopHosts(cli.Host, stderr)
	}
	fetch := func() (live.Doc, error) {
		d, _, err := control.Query(path, statusTimeout)
		return d, err
	}
	if _, err := fetch(); err != nil {
		fmt.Fprintf(stderr, "gpu-telemetry top: %s\n", whyNoAnswer(path, err))
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	if err := top.Run(ctx, fetch); err != nil {
		fmt.Fprintf(stderr, "gpu-telemetry top: %v\n", err)
		return 1
	}
	return 0
}
