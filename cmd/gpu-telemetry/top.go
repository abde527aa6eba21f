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

// localSource is the daemon on this host as top's source: the first
// request asks for History and Events, the later ones for Events only. A
// daemon that refuses the options (one older than issue 40) is asked for
// the plain document from then on, and top's buffer fills from the live
// documents alone.
type localSource struct {
	path    string
	seeded  bool // a document came back: History is not asked again
	refused bool // the daemon refused the options
}

// fetch is a top.Fetch.
func (s *localSource) fetch() (live.Doc, error) {
	o := control.Options{Events: topEvents}
	if !s.seeded {
		o.History = topHistory
	}
	if s.refused {
		o = control.Options{}
	}
	d, _, err := control.QueryWith(s.path, o, statusTimeout)
	if err != nil && o != (control.Options{}) {
		if plain, _, perr := control.Query(s.path, statusTimeout); perr == nil {
			d, err, s.refused = plain, nil, true
		}
	}
	if err == nil {
		s.seeded = true
	}
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
