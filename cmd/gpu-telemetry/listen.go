package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/internal/counters"
	"github.com/gpu-telemetry/gpu-telemetry/live"
	"github.com/gpu-telemetry/gpu-telemetry/live/atop"
	"github.com/gpu-telemetry/gpu-telemetry/live/control"
)

// startListeners opens the control socket (and the metrics endpoint when
// asked) over the monitor's published state. Opening the control socket
// fails with one line (a live socket held by another instance, a bad
// group); a metrics address that cannot be bound is logged (serveMetrics)
// and counted as listen_failures. Both count in reg.
// The control socket's acks go to ack (nil: refused). Serving stops when
// ctx is cancelled or stop is called.
func startListeners(ctx context.Context, cli *CLI, board *live.Board, ack control.Acker, log *slog.Logger, reg *counters.Registry) (stop func(), err error) {
	ctx, cancel := context.WithCancel(ctx)
	var waits []chan struct{}
	stop = func() {
		cancel()
		for _, w := range waits {
			select {
			case <-w:
			case <-time.After(5 * time.Second):
			}
		}
	}
	if cli.Socket != "none" {
		srv, err := control.Listen(control.Config{Path: cli.Socket, Group: cli.SocketGroup, Logger: log, Counters: reg, Ack: ack}, board)
		if err != nil {
			stop()
			return nil, err
		}
		log.Info("control socket listening", "path", cli.Socket)
		done := make(chan struct{})
		waits = append(waits, done)
		go func() { defer close(done); srv.Serve(ctx) }()
	}
	if cli.MetricsListen != "" {
		failed := func() { reg.Inc(atop.ListenFailures) }
		done, err := serveMetrics(ctx, cli, board, log, reg, failed)
		if err != nil {
			stop()
			return nil, err
		}
		if done != nil {
			waits = append(waits, done)
		}
	}
	return stop, nil
}
