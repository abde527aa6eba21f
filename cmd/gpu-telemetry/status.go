package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/alecthomas/kong"
	"github.com/gpu-telemetry/gpu-telemetry/live"
	"github.com/gpu-telemetry/gpu-telemetry/live/control"
)

// statusDescription is what `gpu-telemetry status --help` says the command does.
const statusDescription = "Asks the running daemon (its control socket) and prints one screen: the host line and one block per GPU. " +
	"--json prints the same as one JSON document. Exit status (monitoring-plugin convention): 0 OK, " +
	"1 warning (anomaly flags, disk paused or rows dropped in the last 10 minutes), 2 critical (a GPU hung, " +
	"lost or failing, or an Xid or recovery action in the last 10 minutes), 3 unknown (no daemon, bad flags). " +
	"With --json, a daemon that cannot be asked is a JSON document too: {\"schema_version\": N, \"error\": \"...\"}."

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
	JSON  bool `name:"json" help:"Print the daemon's status document as JSON."`
	Watch bool `name:"watch" help:"With --json: print the document as one line every second until killed or stdout is closed (what top --host reads through ssh)."`
	// History and Events ask for what the daemon keeps in memory beyond
	// the plain document (control.Options), with --json only.
	History time.Duration `name:"history" placeholder:"DUR" help:"With --json: each GPU's readings over the last DUR (at most 10m, one value a second) from the daemon's memory."`
	Events  int           `name:"events" placeholder:"N" help:"With --json: the host's last N events.log lines (at most 500), newest first."`
}

// options are the control.Options the flags ask for; an error names the
// flag that is out of bounds.
func (c *StatusCLI) options() (control.Options, error) {
	o := control.Options{History: c.History, Events: c.Events}
	switch {
	case c.History < 0 || c.History > control.MaxHistory:
		return o, fmt.Errorf("--history %s: want a duration from 1s to %s", c.History, control.MaxHistory)
	case c.Events < 0 || c.Events > control.MaxEvents:
		return o, fmt.Errorf("--events %d: want a number of lines from 1 to %d", c.Events, control.MaxEvents)
	case o != control.Options{} && !c.JSON:
		return o, errors.New("--history and --events need --json")
	}
	return o, nil
}

// socketFlags parses the flags of a command that asks the daemon (status,
// top) into grammar, which embeds SocketFlag. It returns the socket path, or
// ok false and the exit status: 0 after --help, bad for bad flags.
func socketFlags(grammar interface{ socket() string }, name, description string, bad int, args []string, stdout, stderr io.Writer) (path string, code int, ok bool) {
	if code, ok := parseFlags(grammar, name, args, stdout, stderr, kong.Description(description)); !ok {
		if code != 0 {
			code = bad
		}
		return "", code, false
	}
	path = grammar.socket()
	if path == "" || path == "none" {
		fmt.Fprintf(stderr, "%s: --socket %q: needs the daemon's socket path\n", name, path)
		return "", bad, false
	}
	return path, 0, true
}

// whyNoAnswer says in one line why the daemon at path could not be asked,
// and what to try.
func whyNoAnswer(path string, err error) string {
	hint := ""
	switch {
	case errors.Is(err, fs.ErrNotExist):
		hint = "no socket there: is the logger running (systemctl status gpu-telemetry), or was it started with another --socket?"
	case errors.Is(err, syscall.ECONNREFUSED):
		hint = "nothing listens on it: is the logger running (systemctl status gpu-telemetry)?"
	case errors.Is(err, fs.ErrPermission):
		hint = "permission denied: run as root, or start the logger with --socket-group GROUP and be in that group"
	case errors.Is(err, os.ErrDeadlineExceeded):
		hint = fmt.Sprintf("no answer within %v", statusTimeout)
	default:
		return fmt.Sprintf("cannot ask the daemon at %s: %v", path, err)
	}
	return fmt.Sprintf("cannot ask the daemon at %s: %s (%v)", path, hint, err)
}

// statusError is the document `status --json` prints when it cannot ask
// the daemon (or its flags are bad): scripts always get JSON to parse.
type statusError struct {
	SchemaVersion int    `json:"schema_version"`
	Error         string `json:"error"`
	Socket        string `json:"socket,omitempty"`
}

// runStatus runs `gpu-telemetry status`; it returns the exit status.
func runStatus(args []string, stdout, stderr io.Writer) int {
	var cli StatusCLI
	// With --json anywhere in the arguments, even a parse error is
	// answered with a JSON document.
	var msgs bytes.Buffer
	wantJSON := jsonFlag(args)
	msgw := stderr
	if wantJSON {
		msgw = io.MultiWriter(stderr, &msgs)
	}
	path, code, ok := socketFlags(&cli, "gpu-telemetry status", statusDescription, live.CheckUnknown, args, stdout, msgw)
	if !ok {
		if code != 0 && wantJSON {
			writeStatusError(stdout, statusError{Error: strings.TrimSpace(msgs.String())})
		}
		return code
	}
	opts, err := cli.options()
	if err != nil {
		fmt.Fprintf(stderr, "gpu-telemetry status: %v\n", err)
		if cli.JSON {
			writeStatusError(stdout, statusError{Error: err.Error()})
		}
		return live.CheckUnknown
	}
	if cli.Watch {
		return watchStatus(path, cli.JSON, opts, stdout, stderr)
	}
	d, raw, err := control.QueryWith(path, opts, statusTimeout)
	if err != nil {
		msg := whyNoAnswer(path, err)
		fmt.Fprintf(stderr, "gpu-telemetry status: %s\n", msg)
		if cli.JSON {
			writeStatusError(stdout, statusError{Error: msg, Socket: path})
		}
		return live.CheckUnknown
	}
	code, reasons := live.Check(d)
	if cli.JSON {
		// The daemon's bytes, indented: its keys in its order, its
		// integers exact. raw is JSON (Query decoded it): Indent cannot fail.
		var out bytes.Buffer
		json.Indent(&out, raw, "", "  ")
		fmt.Fprintf(stdout, "%s\n", out.Bytes())
		return code
	}
	live.WriteText(stdout, d)
	fmt.Fprintln(stdout, checkLine(code, reasons))
	return code
}

// jsonFlag reports whether args ask for JSON the way the parser will read
// them: --json, or --json=V with V a true boolean (--json=true, =1), before
// any "--". It is read before parsing so that even a parse error is
// answered in JSON.
func jsonFlag(args []string) bool {
	want := false
	for _, a := range args {
		if a == "--" {
			break
		}
		if a == "--json" {
			want = true
		} else if v, ok := strings.CutPrefix(a, "--json="); ok {
			b, err := strconv.ParseBool(v)
			want = err == nil && b
		}
	}
	return want
}

// writeStatusError prints e as an indented JSON document.
func writeStatusError(w io.Writer, e statusError) {
	e.SchemaVersion = live.SchemaVersion
	out, _ := json.MarshalIndent(e, "", "  ")
	fmt.Fprintf(w, "%s\n", out)
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
