package main

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/alecthomas/kong"
)

// manFlag prints the manual page gpu-telemetry(8) in roff and exits. It is
// not listed in the help: the package build calls it.
const manFlag = "--help-man"

// writeMan writes gpu-telemetry(8), built from the same flag grammars,
// descriptions and command table as the help, so that the page cannot
// drift from the binary. The date is SOURCE_DATE_EPOCH's (reproducible
// builds), or none. The footer's left part is the program's name alone:
// man centres the date over it, and a snapshot's version
// (0~git20261202090819.72b1ac968c77) ran into the date; the version is in
// its own section.
func writeMan(stdout, stderr io.Writer) int {
	var b strings.Builder
	date := ""
	if s := os.Getenv("SOURCE_DATE_EPOCH"); s != "" {
		if n, err := strconv.ParseInt(s, 10, 64); err == nil {
			date = time.Unix(n, 0).UTC().Format("2006-01-02")
		}
	}
	fmt.Fprintf(&b, ".TH GPU-TELEMETRY 8 %s %s \"System Administration\"\n", roffQuote(date), roffQuote("gpu-telemetry"))
	b.WriteString(".SH NAME\ngpu-telemetry \\- record what NVIDIA GPUs did in the seconds before they crash\n")
	b.WriteString(".SH SYNOPSIS\n.B gpu-telemetry\n.RI [ flags ]\n.br\n")
	for _, c := range commands {
		fmt.Fprintf(&b, ".B gpu-telemetry %s\n%s\n.br\n", c.name, roffText(c.args))
	}
	b.WriteString(".SH DESCRIPTION\n")
	b.WriteString(roffText(loggerDescription) + "\n")
	b.WriteString(".PP\nIt needs glibc and, at run time, the NVIDIA driver's libnvidia-ml.so.1 (opened with dlopen, so a driver installed " +
		"by NVIDIA's .run installer serves as well as a packaged one). With no driver or no GPU it says so in one line and exits 0, " +
		"so that systemd does not restart it in a loop.\n")
	b.WriteString(".SH VERSION\nThis page is that of gpu-telemetry " + roffEscape(version) + " (\\fBgpu\\-telemetry \\-\\-version\\fR).\n")
	b.WriteString(".SH OPTIONS\n")
	if err := manFlags(&b, newCLI(), "gpu-telemetry", kong.Vars{"version": "gpu-telemetry " + version}); err != nil {
		fmt.Fprintf(stderr, "gpu-telemetry: %s: %v\n", manFlag, err)
		return 1
	}
	b.WriteString(".SH COMMANDS\n")
	for _, c := range commands {
		fmt.Fprintf(&b, ".SS \"%s %s\"\n", c.name, roffEscape(c.args))
		switch {
		case c.name == "help":
			b.WriteString(roffText(c.summary) + "\n")
		case c.grammar == nil:
			b.WriteString(".nf\n" + roffLines(c.description) + ".fi\n")
		default:
			b.WriteString(roffText(c.description) + "\n")
			if err := manFlags(&b, c.grammar(), "gpu-telemetry "+c.name); err != nil {
				fmt.Fprintf(stderr, "gpu-telemetry: %s: %v\n", manFlag, err)
				return 1
			}
		}
	}
	b.WriteString(`.SH EXIT STATUS
The logger exits 0 after a clean stop, and when there is nothing to monitor (no driver, no GPU);
1 when it cannot run (another instance holds the lock, the driver fails);
2 for bad input, before anything is written: a bad flag, a log directory that cannot be made or written, a GPU selector that names no GPU,
a socket group that does not exist, a web config that cannot be read, a socket or lock file whose directory does not exist,
a log, socket or lock file directory that a user other than root (or the logger's) owns or can write,
a symbolic link in the log directory at events.log, summary.log, gpu-telemetry.lock, crashes or spikes, or at the lock file.
Each error is one line on standard error.
.B status
follows the monitoring-plugin convention (0 OK, 1 warning, 2 critical, 3 unknown: no daemon or bad flags);
the other commands say theirs above.
.SH FILES
.TP
.I /var/log/gpu-telemetry/
daily CSVs, one board per file (gpu<i>-<board>-deep-<YYYY-MM-DD>.csv), events.log, summary.log, system-info.txt,
crash and spike snapshots (crashes/, spikes/), the boot log of an unclean stop.
.TP
.I /run/gpu-telemetry/control.sock
the control socket that status and top ask.
.TP
.I /usr/lib/systemd/system/gpu-telemetry.service
the unit; the optional drop-ins for --atop and --metrics-listen are in
.IR /usr/share/gpu-telemetry/systemd/ .
.TP
.I /usr/share/gpu-telemetry/
Prometheus alert rules and their tests, and other examples.
.TP
.I /usr/share/doc/gpu-telemetry/
the documentation: the reference for every file, column, counter and metric.
.SH SIGNALS
SIGUSR1 writes one status line to standard error; SIGHUP reopens every log file; SIGTERM and SIGINT stop cleanly.
.SH SEE ALSO
.BR atop (1),
.BR systemctl (1),
.BR journalctl (1)
`)
	if _, err := io.WriteString(stdout, b.String()); err != nil {
		return 1
	}
	return 0
}

// manFlags writes grammar's flags as a roff tagged list.
func manFlags(b *strings.Builder, grammar any, name string, opts ...kong.Option) error {
	opts = append([]kong.Option{kong.Name(name), flagVars()}, opts...)
	parser, err := kong.New(grammar, opts...)
	if err != nil {
		return err
	}
	for _, group := range parser.Model.AllFlags(true) {
		for _, f := range group {
			b.WriteString(".TP\n")
			if f.Short != 0 {
				fmt.Fprintf(b, "\\fB\\-%c\\fR, ", f.Short)
			}
			fmt.Fprintf(b, "\\fB\\-\\-%s\\fR", roffEscape(f.Name))
			if !f.IsBool() {
				fmt.Fprintf(b, "=\\fI%s\\fR", roffEscape(f.FormatPlaceHolder()))
			}
			b.WriteString("\n" + roffText(f.Help) + "\n")
		}
	}
	return nil
}

// roffEscape escapes backslashes and minus signs for roff.
func roffEscape(s string) string {
	return strings.NewReplacer(`\`, `\e`, "-", `\-`).Replace(s)
}

// roffText is a paragraph of running text: backslashes escaped, and a line
// starting with a dot or quote kept as text.
func roffText(s string) string {
	s = strings.ReplaceAll(s, `\`, `\e`)
	var out []string
	for _, line := range strings.Split(strings.TrimSpace(s), "\n") {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, ".") || strings.HasPrefix(line, "'") {
			line = `\&` + line
		}
		out = append(out, line)
	}
	return strings.Join(out, "\n")
}

// roffLines is preformatted text (for .nf): each line kept as it is.
func roffLines(s string) string {
	var b strings.Builder
	for _, line := range strings.Split(strings.TrimRight(s, "\n"), "\n") {
		line = strings.ReplaceAll(line, `\`, `\e`)
		if strings.HasPrefix(line, ".") || strings.HasPrefix(line, "'") {
			line = `\&` + line
		}
		b.WriteString(line + "\n")
	}
	return b.String()
}

// roffQuote is s as one quoted macro argument.
func roffQuote(s string) string {
	return `"` + strings.ReplaceAll(strings.ReplaceAll(s, `\`, `\e`), `"`, `\(dq`) + `"`
}
