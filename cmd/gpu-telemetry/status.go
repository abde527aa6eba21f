package main

import (
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/alecthomas/kong"
	"github.com/gpu-telemetry/gpu-telemetry/live"
	"github.com/gpu-telemetry/gpu-telemetry/live/control"
)

// statusDescription is what `gpu-telemetry status --help` says the command does.
const statusDescription = "Asks the running daemon (its control socket) and prints one screen: the host line and one block per GPU. " +
	"--json prints the same as one JSON document. Exit status (monitoring-plugin convention): 0 OK, " +
	"1 warning (anomaly flags, disk paused or rows dropped in the last 10 minutes), 2 critical (a GPU hung, " +
	"lost or failing, or an Xid or recovery action in the last 10 minutes), 3 unknown (no daemon, bad flags)."

// defaultSocket is the daemon's --socket default, and where status and top
// look for it (the ${socket} of every flag grammar).
const defaultSocket = "/run/gpu-telemetry/control.sock"

// statusTimeout bounds the whole exchange with the daemon.
const statusTimeout = 5 * time.Second

// SocketFlag is the --socket flag of the commands that ask the daemon.
type SocketFlag struct {
	Socket string `help:"The daemon's control socket (its --socket). Default: ${default}." default:"${socket}"`
}

// socket is the path given, for socketFlags.
func (f *SocketFlag) socket() string { return f.Socket }

// StatusCLI is `gpu-telemetry status`.
type StatusCLI struct {
	SocketFlag
	JSON bool `name:"json" help:"Print the daemon's status document as JSON."`
}

// socketFlags parses the flags of a command that asks the daemon (status,
// top) into grammar, which embeds SocketFlag. It returns the socket path, or
// ok false and the exit status: 0 after --help, live.CheckUnknown (3) for bad
// flags, as for no daemon.
func socketFlags(grammar interface{ socket() string }, name, description string, args []string, stdout, stderr io.Writer) (path string, code int, ok bool) {
	if code, ok := parseFlags(grammar, name, args, stdout, stderr, kong.Description(description)); !ok {
		if code != 0 {
			code = live.CheckUnknown
		}
		return "", code, false
	}
	path = grammar.socket()
	if path == "" || path == "none" {
		fmt.Fprintf(stderr, "%s: --socket %q: needs the daemon's socket path\n", name, path)
		return "", live.CheckUnknown, false
	}
	return path, 0, true
}

// runStatus runs `gpu-telemetry status`; it returns the exit status.
func runStatus(args []string, stdout, stderr io.Writer) int {
	var cli StatusCLI
	path, code, ok := socketFlags(&cli, "gpu-telemetry status", statusDescription, args, stdout, stderr)
	if !ok {
		return code
	}
	d, raw, err := control.Query(path, statusTimeout)
	if err != nil {
		fmt.Fprintf(stderr, "gpu-telemetry status: cannot ask the daemon at %s: %v\n", path, err)
		return live.CheckUnknown
	}
	code, reasons := live.Check(d)
	if cli.JSON {
		var v any
		if json.Unmarshal(raw, &v) == nil {
			out, _ := json.MarshalIndent(v, "", "  ")
			raw = out
		}
		fmt.Fprintf(stdout, "%s\n", raw)
		return code
	}
	live.WriteText(stdout, d)
	fmt.Fprintln(stdout, checkLine(code, reasons))
	return code
}

// checkLine is the status screen's last line: the verdict and its reasons.
func checkLine(code int, reasons []string) string {
	word := [...]string{"OK", "WARNING", "CRITICAL", "UNKNOWN"}[code]
	if len(reasons) == 0 {
		return word
	}
	s := word + ":"
	for i, r := range reasons {
		if i > 0 {
			s += ";"
		}
		s += " " + r
	}
	return s
}
