package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/signal"
	"syscall"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/live"
	"github.com/gpu-telemetry/gpu-telemetry/live/control"
	"github.com/gpu-telemetry/gpu-telemetry/live/top"
)

// errStdout ends a watch whose reader left (stdout closed).
var errStdout = errors.New("stdout closed")

// watchStatus runs `gpu-telemetry status --json --watch`: the daemon's
// watch stream (one compact status document a line, every second) copied
// to stdout until the command is killed or its reader leaves (exit 0,
// quietly: `| head`, or ssh's connection gone). What `top --host` runs on
// the other host. A daemon that cannot be asked, or that ends the stream,
// is one JSON line {"schema_version": N, "error": "..."} and exit 3.
func watchStatus(path string, asJSON bool, opts control.Options, stdout, stderr io.Writer) int {
	if !asJSON {
		fmt.Fprintln(stderr, "gpu-telemetry status: --watch needs --json (top is the live view to read)")
		return live.CheckUnknown
	}
	// A closed stdout is a write error (EPIPE) to end on, not a signal.
	signal.Ignore(syscall.SIGPIPE)
	var buf []byte
	err := control.Watch(context.Background(), path, opts, statusTimeout, func(line []byte) error {
		buf = append(append(buf[:0], line...), '\n')
		if _, err := stdout.Write(buf); err != nil {
			return errStdout
		}
		return nil
	})
	if errors.Is(err, errStdout) {
		return 0
	}
	msg := whyNoAnswer(path, err)
	fmt.Fprintf(stderr, "gpu-telemetry status: %s\n", msg)
	out, _ := json.Marshal(statusError{SchemaVersion: live.SchemaVersion, Error: msg, Socket: path})
	fmt.Fprintf(stdout, "%s\n", out)
	return live.CheckUnknown
}

// runTopHosts runs `gpu-telemetry top --host ...`: one host's view, or the
// fleet page of several, through ssh (top.Remote); the exit status as
// runTop's. One host is waited for (at most firstDocWait) before the
// screen is taken, so that a host that cannot be reached is one line on
// the terminal, as a local daemon that is not there is.
func runTopHosts(hosts []string, stderr io.Writer) int {
	for _, h := range hosts {
		if err := top.CheckHost(h); err != nil {
			fmt.Fprintf(stderr, "gpu-telemetry top: --host: %v\n", err)
			return 2
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	if len(hosts) > 1 {
		remotes := make([]*top.Remote, len(hosts))
		for i, h := range hosts {
			remotes[i] = top.SSH(h)
		}
		if err := top.RunFleet(ctx, remotes); err != nil {
			fmt.Fprintf(stderr, "gpu-telemetry top: %v\n", err)
			return 1
		}
		return 0
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // kills ssh
	r := top.SSH(hosts[0])
	go r.Run(ctx)
	select {
	case <-r.Answered():
	case <-time.After(firstDocWait):
	}
	if _, err := r.Fetch(); err != nil {
		fmt.Fprintf(stderr, "gpu-telemetry top: %v\n", err)
		return 1
	}
	if err := top.Run(ctx, r.Fetch); err != nil {
		fmt.Fprintf(stderr, "gpu-telemetry top: %v\n", err)
		return 1
	}
	return 0
}

// firstDocWait bounds the wait for a host's first document: ssh's
// connection and the daemon's first answer.
const firstDocWait = 20 * time.Second
