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

// runTop runs `gpu-telemetry top`; it returns the exit status (3 for bad
// flags or no terminal, as status).
func runTop(args []string, stderr io.Writer) int {
	var cli TopCLI
	path, code, ok := socketFlags(&cli, "gpu-telemetry top",
		"A full-screen live view of every GPU, refreshed every second from the daemon's control socket. q, Esc or Ctrl-C quits.",
		args, stderr, stderr)
	if !ok {
		return code
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	fetch := func() (live.Doc, error) {
		d, _, err := control.Query(path, statusTimeout)
		return d, err
	}
	if err := top.Run(ctx, fetch); err != nil {
		fmt.Fprintf(stderr, "gpu-telemetry top: %v\n", err)
		return live.CheckUnknown
	}
	return 0
}
