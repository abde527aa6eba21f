package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/live"
	"github.com/gpu-telemetry/gpu-telemetry/live/control"
)

const statusUsage = `usage: gpu-telemetry status [--socket PATH] [--json]
Asks the running daemon (its control socket) and prints one screen: the host
line and one block per GPU. --json prints the same as one JSON document.
Exit status (monitoring-plugin convention): 0 OK, 1 warning (anomaly flags,
disk paused or rows dropped in the last 10 minutes), 2 critical (a GPU hung,
lost or failing, or an Xid or recovery action in the last 10 minutes),
3 unknown (no daemon, bad flags).
`

// defaultSocket is the daemon's --socket default.
const defaultSocket = "/run/gpu-telemetry/control.sock"

// statusTimeout bounds the whole exchange with the daemon.
const statusTimeout = 5 * time.Second

// socketFlags parses [--socket PATH] plus the boolean flags named in bools.
// It returns the socket path, the booleans set, and an error naming a bad
// argument.
func socketFlags(args []string, bools ...string) (string, map[string]bool, error) {
	path, set := defaultSocket, map[string]bool{}
	for i := 0; i < len(args); i++ {
		a := args[i]
		v, eq := strings.CutPrefix(a, "--socket=")
		switch {
		case a == "--socket" && i+1 < len(args):
			path = args[i+1]
			i++
		case eq:
			path = v
		default:
			known := false
			for _, b := range bools {
				if a == b {
					set[b], known = true, true
				}
			}
			if !known {
				return "", nil, fmt.Errorf("unknown argument %q", a)
			}
		}
	}
	if path == "" || path == "none" {
		return "", nil, fmt.Errorf("--socket %q: needs the daemon's socket path", path)
	}
	return path, set, nil
}

// runStatus runs `gpu-telemetry status`; it returns the exit status.
func runStatus(args []string, stdout, stderr io.Writer) int {
	path, set, err := socketFlags(args, "--json", "-h", "--help")
	if err != nil {
		fmt.Fprintf(stderr, "gpu-telemetry status: %v\n%s", err, statusUsage)
		return live.CheckUnknown
	}
	if set["-h"] || set["--help"] {
		fmt.Fprint(stdout, statusUsage)
		return live.CheckOK
	}
	d, raw, err := control.Query(path, statusTimeout)
	if err != nil {
		fmt.Fprintf(stderr, "gpu-telemetry status: cannot ask the daemon at %s: %v\n", path, err)
		return live.CheckUnknown
	}
	code, reasons := live.Check(d)
	if set["--json"] {
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
