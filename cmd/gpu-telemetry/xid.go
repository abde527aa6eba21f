package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/gpu-telemetry/gpu-telemetry/kmsg"
	"github.com/gpu-telemetry/gpu-telemetry/reading"
	"github.com/gpu-telemetry/gpu-telemetry/xid"
)

const xidUsage = `usage: gpu-telemetry xid N [TEXT]     what the catalog says about Xid N; TEXT is the
                                     driver's text after "N, " (decodes Xid 144-150, 154)
       gpu-telemetry xid 'LINE'          the same for a whole kernel log line with an Xid
       gpu-telemetry xid --list          every Xid the catalog knows
Exit status: 0 known Xid, 1 not in the catalog, 2 bad arguments.
`

// runXid runs `gpu-telemetry xid`; it returns the exit status. The work is
// in package xid (Detail, ExplainDetail, Render, List).
func runXid(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, "gpu-telemetry xid: needs an Xid number, a kernel log line or --list\n"+xidUsage)
		return 2
	}
	switch args[0] {
	case "-h", "--help", "help":
		fmt.Fprint(stdout, xidUsage)
		return 0
	case "--list", "-l":
		if len(args) > 1 {
			fmt.Fprintln(stderr, "gpu-telemetry xid: --list takes no arguments")
			return 2
		}
		fmt.Fprint(stdout, xid.List())
		return 0
	}
	var code int
	var d reading.XidDetail // what the report says after the code, read once
	if n, err := strconv.Atoi(args[0]); err == nil {
		if n < 0 {
			fmt.Fprintf(stderr, "gpu-telemetry xid: %d is not an Xid number\n", n)
			return 2
		}
		code, d = n, xid.Detail(n, strings.Join(args[1:], " "))
	} else if x, ok := kmsg.ParseXid(strings.Join(args, " ")); ok {
		code, d = x.Code, x.XidDetail
	} else {
		fmt.Fprintf(stderr, "gpu-telemetry xid: %q is neither an Xid number nor a kernel log line with \"NVRM: Xid (...): N\"\n", args[0])
		return 2
	}
	e := xid.ExplainDetail(code, d)
	fmt.Fprint(stdout, xid.Render(e))
	if !e.Known {
		return 1
	}
	return 0
}
