package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"time"

	"github.com/alecthomas/kong"
	"github.com/gpu-telemetry/gpu-telemetry/reading"
	"github.com/gpu-telemetry/gpu-telemetry/report"
)

// ReportCLI is `gpu-telemetry report`: the story of one incident from the
// files the logger wrote.
type ReportCLI struct {
	LogDir   string   `help:"The logger's log directory. Default: ${default}." default:"${log_dir}" type:"path"`
	Incident string   `help:"A crash snapshot (crashes/crash-*.log): report the incident it records." type:"path" xor:"which"`
	At       string   `help:"Report this moment instead: RFC 3339 or local '2006-01-02 15:04:05'." xor:"which"`
	Last     bool     `help:"Report the most recent incident (the default)." xor:"which"`
	GPU      string   `name:"gpu" help:"Only this GPU: its index, or its board by UUID (or a prefix of it) or PCI bus id, at whatever index it had. Default: all GPUs."`
	Before   Interval `help:"Window before the incident. Default: ${default}." default:"60s"`
	After    Interval `help:"Window after the incident. Default: ${default}." default:"10s"`
	HTML     string   `name:"html" help:"Also write a self-contained HTML page with charts to this file." type:"path"`
}

// reportDescription is what `gpu-telemetry report --help` says it does.
const reportDescription = "Prints the timeline, peaks and precursors of an incident from the logger's files; --html also draws it. " +
	"Exit status: 0 reported, 1 nothing to report (no such directory, no incident, a time outside the data) or a file it may not read (run it as root: the logger's events.log and crashes/ are root's), 2 bad flags (an --incident that does not exist or is not a regular file)."

// runReport runs the report subcommand; it returns the exit status.
func runReport(args []string, stdout, stderr io.Writer) int {
	var cli ReportCLI
	if code, ok := parseFlags(&cli, "gpu-telemetry report", args, stdout, stderr, kong.Description(reportDescription)); !ok {
		return code
	}
	if cli.Before < 0 || cli.After < 0 {
		fmt.Fprintln(stderr, "gpu-telemetry report: --before and --after must not be negative")
		return 2
	}
	// A snapshot that is not there, or is not a regular file (a FIFO would
	// be waited on forever, /dev/zero read without end), is a bad flag,
	// said as such (not as a file without a header); other failures to
	// read it are report's to say.
	if cli.Incident != "" {
		fi, err := os.Stat(cli.Incident)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			fmt.Fprintf(stderr, "gpu-telemetry report: --incident %s: the file does not exist\n", cli.Incident)
			return 2
		case err == nil && !fi.Mode().IsRegular():
			fmt.Fprintf(stderr, "gpu-telemetry report: --incident %s: not a regular file (a crash snapshot is one)\n", cli.Incident)
			return 2
		}
	}
	o := report.Options{Dir: cli.LogDir, Incident: cli.Incident, GPU: -1,
		Before: time.Duration(cli.Before), After: time.Duration(cli.After)}
	if cli.GPU != "" {
		sel, ok := reading.ParseSelector(cli.GPU)
		switch {
		case !ok:
			fmt.Fprintf(stderr, "gpu-telemetry report: --gpu %s: not a GPU index, UUID (or a prefix of 4 or more characters) or PCI bus id\n", cli.GPU)
			return 2
		case sel.IsIndex():
			o.GPU = sel.Index
		default:
			o.Board = cli.GPU
		}
	}
	if cli.At != "" {
		at, err := report.ParseAt(cli.At, time.Local)
		if err != nil {
			fmt.Fprintf(stderr, "gpu-telemetry report: %v\n", err)
			return 2
		}
		o.At = at
	}
	// Progress on a terminal only, and only once reading has taken a second.
	if isTerminal(stderr) {
		start := time.Now()
		shown := false
		o.Progress = func(file string, done float64) {
			if time.Since(start) < time.Second {
				return
			}
			shown = true
			fmt.Fprintf(stderr, "\rreading %s: %3.0f%%\x1b[K", file, 100*done)
		}
		defer func() {
			if shown {
				fmt.Fprint(stderr, "\r\x1b[K")
			}
		}()
	}
	rep, err := report.Build(o)
	if err != nil {
		fmt.Fprintf(stderr, "gpu-telemetry report: %v\n", err)
		return 1
	}
	if err := rep.WriteText(stdout); err != nil {
		fmt.Fprintf(stderr, "gpu-telemetry report: %v\n", err)
		return 1
	}
	if cli.HTML != "" {
		if err := rep.WriteHTMLFile(cli.HTML); err != nil {
			fmt.Fprintf(stderr, "gpu-telemetry report: %v\n", err)
			return 1
		}
		fmt.Fprintf(stderr, "gpu-telemetry report: wrote %s\n", cli.HTML)
	}
	return 0
}

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
