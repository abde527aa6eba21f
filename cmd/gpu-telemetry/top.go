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
}

// topDescription is what `gpu-telemetry top --help` says the command does.
const topDescription = "A full-screen live view of every GPU, refreshed every second from the daemon's control socket; " +
	"GPUs that are failing or critical come first and stay on the screen. " +
	"Up, Down, PgUp, PgDn, Home and End scroll the GPUs that do not fit; q, Esc or Ctrl-C quits. Exit status: 0 quit, 1 no daemon to ask or no terminal, 2 bad flags."

// runTop runs `gpu-telemetry top`; it returns the exit status. The daemon
// is asked once before the screen is taken, so that a daemon that is not
// there is one line on the terminal, not a full screen.
func runTop(args []string, stdout, stderr io.Writer) int {
	var cli TopCLI
	path, code, ok := socketFlags(&cli, "gpu-telemetry top", topDescription, 2, args, stdout, stderr)
	if !ok {
		return code
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
