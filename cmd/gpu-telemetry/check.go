package main

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/gpu-telemetry/gpu-telemetry/action"
	"github.com/gpu-telemetry/gpu-telemetry/live"
	"github.com/gpu-telemetry/gpu-telemetry/live/control"
)

// checkDescription is what `gpu-telemetry check --help` says the command does.
const checkDescription = "Asks the running daemon (its control socket: the daemon answers from memory, never from NVML, " +
	"so even with a GPU hung the answer comes at once) whether a GPU of this node needs a repair action, and answers " +
	"in the contract of the program that runs it (--format): nagios, the monitoring-plugin status `status` gives " +
	"(0 OK, 1 warning, 2 critical, 3 unknown; critical too while a GPU's action takes the node out, warning while one is watched); nhc, for LBNL Node Health Check and Slurm's HealthCheckProgram " +
	"(0 healthy; 1 and one line, the reason to drain the node with; 3 and one line when the daemon cannot be asked or has not judged every GPU since it started; 2 bad flags); " +
	"npd, a node-problem-detector custom plugin (0 OK, 1 NonOK, 2 Unknown: no daemon, a daemon starting, or bad flags; one line of at most 80 bytes); " +
	"json, one document (exit status as nhc). The reason names the host, the GPU's index and UUID, the event and the action: " +
	"\"node7 GPU 3 GPU-1a2b3c4d… Xid 79 GPU has fallen off the bus: power_cycle\". See docs/alert-to-action.md."

// CheckCLI is `gpu-telemetry check`.
type CheckCLI struct {
	SocketFlag
	Format string `help:"Whose contract to answer in: nagios, nhc, npd or json." enum:"nagios,nhc,npd,json" default:"nagios"`
	Action string `help:"With --format npd: NonOK only when a GPU's action is this one (one node-problem-detector rule per action; see deploy/kubernetes)." placeholder:"ACTION"`
}

// npdMaxOutput is node-problem-detector's default max_output_length: the
// custom-plugin monitor cuts a plugin's output to it (bytes) for the
// condition's message (pkg/custompluginmonitor/types/config.go).
const npdMaxOutput = 80

// checkFormat is one caller's contract: the exit statuses it reads and how
// it wants the answer written. Nagios's statuses for an answer are status's
// own (live.Check); the others have one for "no GPU needs an action" (ok)
// and one for "a GPU does" (act).
type checkFormat struct {
	name    string
	ok, act int
	unknown int // the daemon cannot be asked
	usage   int // bad flags: 2 where the contract leaves it free
	write   func(w io.Writer, r *checkResult) verdict
}

// verdict is what check found, before a format's contract numbers it.
type verdict int

const (
	healthy     verdict = iota // no GPU needs an action that takes the node out
	needsAction                // one does
	unknown                    // the daemon cannot be asked
	asStatus                   // nagios: status's own exit status (checkResult.code)
)

// exit is the exit status format f gives verdict v of r.
func (f checkFormat) exit(v verdict, r *checkResult) int {
	return [...]int{healthy: f.ok, needsAction: f.act, unknown: f.unknown, asStatus: r.code}[v]
}

// checkFormats are the formats, nagios (the default) first. A usage error
// is 2 where the contract allows it; a monitoring plugin's 2 is CRITICAL
// and NPD reads every status above 1 as Unknown, so there it is 3 (UNKNOWN,
// as status answers) and 2 (Unknown).
var checkFormats = []checkFormat{
	{name: "nagios", unknown: live.CheckUnknown, usage: live.CheckUnknown, write: writeNagios},
	{name: "nhc", ok: 0, act: 1, unknown: 3, usage: 2, write: writeNHC},
	{name: "npd", ok: 0, act: 1, unknown: 2, usage: 2, write: writeNPD},
	{name: "json", ok: 0, act: 1, unknown: 3, usage: 2, write: writeCheckJSON},
}

// lookupFormat returns the format named name; nagios (the default) when
// there is none by that name.
func lookupFormat(name string) checkFormat {
	for _, f := range checkFormats {
		if f.name == name {
			return f
		}
	}
	return checkFormats[0]
}

// formatArg is the --format the arguments ask for (nagios, the default,
// when none is given), read before parsing so that even a parse error is
// answered in that format's contract; known is false when it names no
// format (a usage error answered with 2, the conventional status).
func formatArg(args []string) (name string, known bool) {
	name = "nagios"
	for i, a := range args {
		if a == "--" {
			break
		}
		v, ok := strings.CutPrefix(a, "--format=")
		if !ok && a == "--format" && i+1 < len(args) {
			v, ok = args[i+1], true
		}
		if ok {
			name = v
		}
	}
	for _, f := range checkFormats {
		if f.name == name {
			return name, true
		}
	}
	return name, false
}

// gpuAction is one GPU's repair action as check reports it.
type gpuAction struct {
	Index  int           `json:"index"`
	UUID   string        `json:"uuid"`
	Action action.Action `json:"action"`
	Event  string        `json:"event,omitempty"`  // what decided the action: "Xid 79 GPU has fallen off the bus"
	Reason string        `json:"reason,omitempty"` // the line a scheduler drains with: host, GPU, UUID, event, action; none: empty
	// Missing: a board of the previous run not enumerated now (Index is
	// its index then), judged by its history: a warm reboot that did not
	// bring it back is a power cycle.
	Missing bool `json:"missing,omitempty"`
}

// checkResult is what check learnt: status's verdict, every GPU's action,
// or why the daemon could not be asked.
type checkResult struct {
	host    string
	code    int      // status's monitoring-plugin status (live.Check)
	reasons []string // and its reasons
	gpus    []gpuAction
	err     string        // why the daemon could not be asked; "" when it answered
	only    action.Action // --action: the one action npd's rule asks about; None: any that drains
	// starting says which GPUs the daemon has not judged yet (no sample
	// back since it started): until then no action is known, and a node
	// is not called healthy (a scheduler would resume it seconds before
	// it is flagged); "" once every GPU was judged.
	starting string
}

// newCheckResult reads the daemon's document d. Its monitoring-plugin
// status is status's, raised to critical where a GPU's action takes the
// node out and to warning where one is watched: a board whose action
// outlasts status's 10 minutes (one that came back from a reboot still
// needing a power cycle) is not OK.
func newCheckResult(d live.Doc) *checkResult {
	r := &checkResult{host: d.Host.Name}
	r.code, r.reasons = live.Check(d)
	var crit, warn []string
	add := func(ga gpuAction, ad live.ActionDoc) {
		a := ad.Name
		ga.Action = a
		switch {
		case ga.Missing:
			// live.Check has judged the missing boards already.
		case a.Drains():
			crit = append(crit, fmt.Sprintf("GPU %d %s", ga.Index, a))
		case a == action.Watch:
			warn = append(warn, fmt.Sprintf("GPU %d %s", ga.Index, a))
		}
		if len(ad.Reasons) > 0 {
			// The deciding reason, without what the action was read
			// from ("Xid 79 GPU has fallen off the bus: NVIDIA's
			// resolution RESTART_BM"): the line names the action itself.
			ga.Event, _, _ = strings.Cut(ad.Reasons[0], ": ")
		}
		if a != action.None {
			ga.Reason = reasonLine(r.host, ga, a)
		}
		r.gpus = append(r.gpus, ga)
	}
	var starting []string
	for _, g := range d.GPUs {
		add(gpuAction{Index: g.Index, UUID: g.UUID}, g.Action)
		if g.State == live.StateNotStarted.String() {
			starting = append(starting, strconv.Itoa(g.Index))
		}
	}
	if len(starting) > 0 {
		r.starting = "gpu-telemetry is starting: GPU " + strings.Join(starting, ", ") + " not judged yet"
	}
	for _, b := range d.Host.MissingBoards {
		add(gpuAction{Index: b.Index, UUID: b.UUID, Missing: true}, b.Action)
	}
	switch {
	case len(crit) > 0 && r.code < live.CheckCritical:
		r.code, r.reasons = live.CheckCritical, append(crit, r.reasons...)
	case len(warn) > 0 && r.code < live.CheckWarning:
		r.code, r.reasons = live.CheckWarning, warn
	}
	return r
}

// shortUUID is a GPU's UUID cut to its first 8 hexadecimal digits, as the
// one-line reasons give it: enough to tell a node's boards apart.
func shortUUID(u string) string {
	if len(u) > len("GPU-")+8 {
		return u[:len("GPU-")+8] + "…"
	}
	return u
}

// reasonLine is the line a scheduler drains with: "node7 GPU 3
// GPU-1a2b3c4d… Xid 79 GPU has fallen off the bus: power_cycle"; a
// missing board has no index now: "node7 missing GPU-1a2b3c4d… warm
// reboot did not recover it (xid79 in the previous boot): power_cycle".
func reasonLine(host string, g gpuAction, a action.Action) string {
	s := fmt.Sprintf("GPU %d %s", g.Index, shortUUID(g.UUID))
	if g.Missing {
		s = "missing " + shortUUID(g.UUID)
	}
	if host != "" {
		s = host + " " + s
	}
	if g.Event != "" {
		s += " " + g.Event
	}
	return s + ": " + a.String()
}

// needing returns the GPUs whose action takes the node out (only those
// whose action is r.only when it is set), the worst first.
func (r *checkResult) needing() []gpuAction {
	var out []gpuAction
	for _, g := range r.gpus {
		if g.Action.Drains() && (r.only == action.None || g.Action == r.only) {
			out = append(out, g)
		}
	}
	slices.SortStableFunc(out, func(a, b gpuAction) int { return cmp.Compare(b.Action, a.Action) })
	return out
}

// summary is the one line for a node: its worst GPU's reason, and how many
// more need an action.
func summary(need []gpuAction) string {
	s := need[0].Reason
	if len(need) > 1 {
		s += fmt.Sprintf(" (+%d more)", len(need)-1)
	}
	return s
}

// cut shortens s to at most n bytes, on a character boundary, ending it
// with "…" when it was cut.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const ell = "…"
	s = s[:n-len(ell)]
	for !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s + ell
}

// writeNagios writes status's last line (its verdict and reasons) and,
// as the plugin's long output, one line per GPU that needs an action.
func writeNagios(w io.Writer, r *checkResult) verdict {
	if r.err != "" {
		fmt.Fprintf(w, "UNKNOWN: %s\n", r.err)
		return unknown
	}
	fmt.Fprintln(w, checkLine(r.code, r.reasons))
	for _, g := range r.gpus {
		if g.Action != action.None {
			fmt.Fprintln(w, g.Reason)
		}
	}
	return asStatus
}

// writeNHC writes nothing for a healthy node, else the one line NHC puts
// in its drain reason.
func writeNHC(w io.Writer, r *checkResult) verdict {
	if r.err != "" {
		fmt.Fprintln(w, r.err)
		return unknown
	}
	need := r.needing()
	if len(need) == 0 && r.starting != "" {
		fmt.Fprintln(w, r.starting)
		return unknown
	}
	if len(need) == 0 {
		return healthy
	}
	fmt.Fprintln(w, summary(need))
	return needsAction
}

// writeNPD writes the condition's message, cut to NPD's 80 bytes.
func writeNPD(w io.Writer, r *checkResult) verdict {
	if r.err != "" {
		fmt.Fprintln(w, cut(r.err, npdMaxOutput))
		return unknown
	}
	need := r.needing()
	if len(need) == 0 && r.starting != "" {
		fmt.Fprintln(w, cut(r.starting, npdMaxOutput))
		return unknown
	}
	if len(need) == 0 {
		msg := "no GPU needs a repair action"
		if r.only != action.None {
			msg = "no GPU needs " + r.only.String()
		}
		fmt.Fprintln(w, cut(msg, npdMaxOutput))
		return healthy
	}
	fmt.Fprintln(w, cut(summary(need), npdMaxOutput))
	return needsAction
}

// checkDoc is the document `check --format json` prints.
type checkDoc struct {
	SchemaVersion int         `json:"schema_version"`
	Host          string      `json:"host,omitempty"`
	Healthy       bool        `json:"healthy"`          // no GPU needs an action that takes the node out
	Reason        string      `json:"reason,omitempty"` // the line to drain with; empty when healthy
	Status        int         `json:"status"`           // status's monitoring-plugin status
	GPUs          []gpuAction `json:"gpus"`
	Error         string      `json:"error,omitempty"` // why the daemon could not be asked or has no answer yet (starting), or the flags are bad
}

// writeCheckJSON writes the check document.
func writeCheckJSON(w io.Writer, r *checkResult) verdict {
	d := checkDoc{SchemaVersion: live.SchemaVersion, Host: r.host, Status: r.code, GPUs: r.gpus, Error: r.err}
	v := healthy
	switch need := r.needing(); {
	case r.err != "":
		d.Status, v = live.CheckUnknown, unknown
	case len(need) > 0:
		d.Reason, v = summary(need), needsAction
	case r.starting != "":
		d.Error, v = r.starting, unknown
	default:
		d.Healthy = true
	}
	if d.GPUs == nil {
		d.GPUs = []gpuAction{}
	}
	out, _ := json.MarshalIndent(d, "", "  ")
	fmt.Fprintf(w, "%s\n", out)
	return v
}

// runCheck runs `gpu-telemetry check`; it returns the exit status its
// --format's contract gives.
func runCheck(args []string, stdout, stderr io.Writer) int {
	name, known := formatArg(args)
	f := lookupFormat(name)
	usage := f.usage
	if !known {
		usage = 2 // no contract to answer in: the conventional status
	}
	var msgs bytes.Buffer
	var cli CheckCLI
	path, code, ok := socketFlags(&cli, "gpu-telemetry check", checkDescription, usage, args, stdout, io.MultiWriter(stderr, &msgs))
	if ok && cli.Action != "" && cli.Format != "npd" {
		fmt.Fprintf(io.MultiWriter(stderr, &msgs), "gpu-telemetry check: --action is for --format npd (its rules ask one action each), not %s\n", cli.Format)
		ok, code = false, usage
	}
	var only action.Action
	if ok && cli.Action != "" {
		var err error
		if only, err = action.Parse(cli.Action); err != nil || !only.Drains() {
			fmt.Fprintf(io.MultiWriter(stderr, &msgs), "gpu-telemetry check: --action %q: one of %s\n", cli.Action, drainingActions())
			ok, code = false, usage
		}
	}
	if !ok {
		if code != 0 && known && name == "json" {
			writeCheckJSON(stdout, &checkResult{err: strings.TrimSpace(msgs.String())})
		}
		return code
	}
	d, _, err := control.Query(path, statusTimeout)
	if err != nil {
		msg := whyNoAnswer(path, err)
		fmt.Fprintf(stderr, "gpu-telemetry check: %s\n", msg)
		r := &checkResult{err: "gpu-telemetry " + msg}
		return f.exit(f.write(stdout, r), r)
	}
	r := newCheckResult(d)
	r.only = only
	return f.exit(f.write(stdout, r), r)
}

// drainingActions lists the actions that take a node out ("reset_gpu,
// ..."), --action's values.
func drainingActions() string {
	var names []string
	for a := range action.NumActions {
		if a.Drains() {
			names = append(names, a.String())
		}
	}
	return strings.Join(names, ", ")
}
