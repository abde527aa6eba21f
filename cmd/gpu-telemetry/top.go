package main

import (
	"context"
	"fmt"
	"io"
	"os/signal"
	"syscall"
	"time"

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
const topDescription = "A full-screen live view of every GPU, refreshed every second from the daemon's control socket. " +
	"Views: F2 Overview (every GPU, failing and critical ones first and never scrolled off, with 60 s sparklines where the width allows), " +
	"F3 or Enter GPU detail (engines, memory, clocks, power and thermal, fans, throttle reasons, PCIe, NVLink, health, Xids, action, GSP), " +
	"F4 Processes, F5 Events, F1 or ? Help; Tab and Shift-Tab step through them. " +
	"Left/Right or 0-9 select a GPU; Up, Down, PgUp, PgDn, Home and End scroll; s sorts the processes; f shows the selected GPU's processes or events only; " +
	"Space pauses; e exports the view's data as JSON to a new file named on the footer (the current directory, else $TMPDIR); q, Esc or Ctrl-C quits. " +
	"NO_COLOR (or a monochrome terminal) draws without colour. " +
	"--host NAME shows that host's view through the user's ssh (no network listener); several --host, a page with one line per host, " +
	"the worst first, where Up and Down select one, Enter opens its view and q there comes back. " +
	"Exit status: 0 quit, 1 no daemon to ask (or host to reach) or no terminal, 2 bad flags."

// What top asks the daemon for: the history that seeds the charts on the
// first request (the daemon's whole ring), the last events every time.
const (
	topHistory = 10 * time.Minute
	topEvents  = 200
)

// optionsRetry is how long top asks a daemon that refused the options
// for the plain document before it asks with them again (the daemon may
// have been upgraded and restarted since).
const optionsRetry = time.Minute

// localSource is the daemon on this host as top's source: each request
// asks for Events, and for History too while the charts need seeding (the
// first request, and the first one answered after a failure or after
// plain documents: the view re-seeds its charts from it). A daemon that
// answers that it does not know the options (one older than issue 40) is
// asked for the plain document for optionsRetry, then with the options
// again; any other failure (busy, a timeout, the daemon restarting) is
// the fetch's error, and the next fetch asks with the options again.
type localSource struct {
	path       string
	now        func() time.Time // nil: time.Now
	seeded     bool             // the last answer carried the history or followed one that did
	plainUntil time.Time        // the daemon refused the options: plain documents until then
}

// fetch is a top.Fetch.
func (s *localSource) fetch() (live.Doc, error) {
	now := time.Now()
	if s.now != nil {
		now = s.now()
	}
	if now.Before(s.plainUntil) {
		return s.plain()
	}
	o := control.Options{Events: topEvents}
	if !s.seeded {
		o.History = topHistory
	}
	d, _, err := control.QueryWith(s.path, o, statusTimeout)
	if control.UnknownRequest(err) {
		s.plainUntil = now.Add(optionsRetry)
		return s.plain()
	}
	s.seeded = err == nil
	return d, err
}

// plain asks for the plain document; the next request with the options
// asks for the history again.
func (s *localSource) plain() (live.Doc, error) {
	s.seeded = false
	d, _, err := control.Query(s.path, statusTimeout)
	return d, err
}

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
	src := &localSource{path: path}
	// The first answer is shown: it carries the history that seeds the charts.
	first, err := src.fetch()
	if err != nil {
		fmt.Fprintf(stderr, "gpu-telemetry top: %s\n", whyNoAnswer(path, err))
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	fetch := top.Fetch(src.fetch)
	sent := false
	if err := top.Run(ctx, func() (live.Doc, error) {
		if !sent {
			sent = true
			return first, nil
		}
		return fetch()
	}); err != nil {
		fmt.Fprintf(stderr, "gpu-telemetry top: %v\n", err)
		return 1
	}
	return 0
}
