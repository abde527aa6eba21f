package snapshot

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

// Line counts of gpu-telemetry-deep.py's diagnostics, which piped dmesg
// through tail -N (and kept the last 50 CSV lines); we keep its counts.
const (
	gpuLogLines  = 100
	dmesgLines   = 200
	aerLogLines  = 20
	lastRowsKept = 50
)

// Keys of the diagnostics: each names one job, whose output sections show.
const (
	diagDmesg, diagLspci, diagSetpci, diagSMI = "dmesg", "lspci", "setpci", "nvidia-smi"
	diagModules, diagFree, diagUptime         = "modules", "free", "uptime"
	diagDriverVersion, diagGPUInformation     = "driver-version", "gpu-information"
	diagAERCounters, diagModuleParams         = "aer-counters", "module-params"
)

// diagSection is one section of diagnostics: the last n lines that keep
// takes of a job's output (keep nil: every line; n 0: all of them).
type diagSection struct {
	title    string
	key      string
	keep     func(f kernelFilter, line string) bool
	n        int
	followUp bool // a follow-up shows it too
}

// diagSections are a crash snapshot's diagnostics: first
// gpu-telemetry-deep.py's diag_sections, in its order and under its titles
// (it ran them through a shell; the dmesg greps are now the kernelFilter, a
// GPU's lines rather than every line that says "gpu"), then what NVIDIA
// asks for in a bug report (nvidia-bug-report.sh collects it). A follow-up
// shows what changes in the minutes after an incident: new kernel messages,
// the device's PCIe state.
var diagSections = []diagSection{
	{"dmesg (nvidia/gpu errors)", diagDmesg, kernelFilter.GPULine, gpuLogLines, true},
	{"dmesg (last 200 lines)", diagDmesg, nil, dmesgLines, false},
	{"PCIe AER errors", diagDmesg, kernelFilter.AERLine, aerLogLines, true},
	{"PCIe device state", diagLspci, nil, 0, true},
	{"GPU register test (ffff = off bus)", diagSetpci, nil, 0, true},
	{"nvidia-smi (may fail)", diagSMI, nil, 0, true},
	// The lines of /proc/modules that name an NVIDIA module, as the module
	// or among its users (drm_kms_helper used by nvidia_drm).
	{"NVIDIA kernel modules", diagModules, func(_ kernelFilter, l string) bool { return nvidiaModule(l) }, 0, false},
	{"System memory", diagFree, nil, 0, false},
	{"System load", diagUptime, nil, 0, false},
	{"NVIDIA driver version (/proc/driver/nvidia/version)", diagDriverVersion, nil, 0, false},
	{"Driver's GPU information (/proc/driver/nvidia/gpus/<bus id>/information)", diagGPUInformation, nil, 0, false},
	{"PCIe AER counters (sysfs) of the GPU and its upstream bridge", diagAERCounters, nil, 0, false},
	{"nvidia module parameters (/sys/module/nvidia/parameters)", diagModuleParams, nil, 0, false},
}

var nvidiaModule = regexp.MustCompile(`(?i)nvidia`).MatchString

// job is one diagnostic: a command or a file read.
type job struct {
	key    string
	gpu    bool                                      // it needs the GPU's bus id
	run    func(ctx context.Context) ([]byte, error) // nil when not run
	notRun string                                    // why it is not run
}

// result is what one job produced: its output and, when it did not simply
// succeed, a status line in parentheses ("(timed out after 5s)").
type result struct {
	out    []byte
	status string
}

// command is the job that runs name with args through the Runner.
func (m *Manager) command(name string, args ...string) func(context.Context) ([]byte, error) {
	return func(ctx context.Context) ([]byte, error) { return m.cfg.Runner.Run(ctx, name, args...) }
}

// jobs are the diagnostics of the GPU at busID that a crash snapshot's
// sections show (followUp: a follow-up's). Only the parsed bus id, printed
// back, reaches a command line or a path, never outside text: when it does
// not parse, the jobs that need it say so and are not run.
func (m *Manager) jobs(busID string, followUp bool) []job {
	a, err := reading.ParsePCIAddr(busID)
	addr := a.String()
	// A crash takes the numeric ids and the whole config space as hex, as
	// nvidia-bug-report.sh does (ffff... when the GPU is off the bus).
	lspci := []string{"-nnDvvvxxxx", "-s", addr}
	if followUp {
		lspci = []string{"-vvs", addr}
	}
	all := []job{
		m.kernelLogJob(),
		{key: diagLspci, gpu: true, run: m.command("lspci", lspci...)},
		// VENDOR_ID reads config space: 10de is NVIDIA, ffff means the
		// device does not answer (fallen off the bus).
		{key: diagSetpci, gpu: true, run: m.command("setpci", "-s", addr, "VENDOR_ID")},
		{key: diagSMI, run: m.command("nvidia-smi")},
		{key: diagModules, run: func(context.Context) ([]byte, error) {
			b, err := os.ReadFile(m.hostPath(procModules))
			if err != nil {
				return nil, fmt.Errorf("read kernel modules: %w", err)
			}
			return b, nil
		}},
		{key: diagFree, run: m.command("free", "-h")},
		{key: diagUptime, run: m.command("uptime")},
		{key: diagDriverVersion, run: m.readFile(nvidiaProcDir, "version")},
		{key: diagGPUInformation, gpu: true, run: m.readFile(nvidiaProcDir, "gpus", addr, "information")},
		{key: diagAERCounters, gpu: true, run: func(context.Context) ([]byte, error) { return m.aerCounters(a), nil }},
		{key: diagModuleParams, run: m.moduleParams},
	}
	var jobs []job
	for _, j := range all {
		if followUp && !slices.ContainsFunc(diagSections, func(d diagSection) bool { return d.key == j.key && d.followUp }) {
			continue
		}
		if j.gpu && err != nil {
			j.run, j.notRun = nil, err.Error()
		}
		jobs = append(jobs, j)
	}
	return jobs
}

// diagnose runs the jobs of the GPU at busID and renders their sections,
// the kernel log's lines placed on the wall clock.
func (m *Manager) diagnose(busID string, followUp bool) []Section {
	r := m.collect(m.work, m.jobs(busID, followUp))
	r[diagDmesg] = placeKernelLines(r[diagDmesg], m.cfg.KernelWall)
	f := m.kernelFilterFor(busID)
	var out []Section
	for _, d := range diagSections {
		if followUp && !d.followUp {
			continue
		}
		var keep func(string) bool
		if d.keep != nil {
			keep = func(l string) bool { return d.keep(f, l) }
		}
		out = append(out, Section{d.title, filtered(r[d.key], keep, d.n)})
	}
	return out
}

// drainGrace is how long collect waits, once cancelled, for the killed
// commands to hand back their partial output. Close waits closeGrace in all.
const drainGrace = 200 * time.Millisecond

// collect runs the jobs concurrently and waits for them, at most
// DiagnosticsTimeout or until ctx is cancelled. A job that has not answered
// by then is reported as such and left behind (its channel is buffered).
func (m *Manager) collect(ctx context.Context, jobs []job) map[string]result {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type keyed struct {
		key string
		r   result
	}
	ch := make(chan keyed, len(jobs))
	res := make(map[string]result, len(jobs))
	for _, j := range jobs {
		if j.run == nil {
			res[j.key] = result{status: "(not run: " + j.notRun + ")"}
			continue
		}
		go func() { ch <- keyed{j.key, runJob(ctx, m.cfg.CommandTimeout, j)} }()
	}
	why := "(no answer within " + m.cfg.DiagnosticsTimeout.String() + "; abandoned)"
	deadline := time.NewTimer(m.cfg.DiagnosticsTimeout)
	defer deadline.Stop()
	done := ctx.Done()
	for len(res) < len(jobs) {
		select {
		case k := <-ch:
			res[k.key] = k.r
		case <-done:
			// Killed commands return at once with what they printed so far,
			// which is worth keeping; wait a moment for it.
			done = nil
			deadline.Reset(drainGrace)
			why = "(canceled: the daemon is shutting down)"
		case <-deadline.C:
			for _, j := range jobs {
				if _, ok := res[j.key]; !ok {
					res[j.key] = result{status: why}
				}
			}
			return res
		}
	}
	return res
}

// runJob runs j under timeout and describes how it ended (the boot log's
// journalctl too).
func runJob(ctx context.Context, timeout time.Duration, j job) result {
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	out, err := j.run(cctx)
	if err == nil {
		return result{out: out}
	}
	var te *TimeoutError
	var status string
	switch {
	case errors.As(err, &te):
		status = "(timed out after " + te.After.String() + ")"
	case ctx.Err() != nil:
		status = "(canceled: the daemon is shutting down)"
	case errors.Is(cctx.Err(), context.DeadlineExceeded):
		status = "(timed out after " + timeout.String() + ")"
	case errors.Is(err, exec.ErrNotFound):
		status = "(" + err.Error() + ")" // names the package: NotInstalledError
	default:
		status = "(failed: " + err.Error() + ")"
	}
	return result{out: out, status: status}
}

// raw renders a command's whole output followed by its status line.
func raw(r result) string { return filtered(r, nil, 0) }

// filtered renders lastLines(keep, n) of the output, then the status line.
func filtered(r result, keep func(string) bool, n int) string {
	lines := lastLines(r.out, keep, n)
	var b strings.Builder
	for _, l := range lines {
		b.WriteString(l + "\n")
	}
	if len(lines) == 0 && (len(r.out) > 0 || r.status == "") {
		if keep == nil {
			b.WriteString("(no output)\n")
		} else {
			b.WriteString("(no matching lines)\n")
		}
	}
	if r.status != "" {
		b.WriteString(r.status + "\n")
	}
	return b.String()
}

// lastLines returns the last n lines of out that keep takes (every line when
// keep is nil; every one it takes when n <= 0), oldest first.
func lastLines(out []byte, keep func(string) bool, n int) []string {
	text := strings.TrimSuffix(string(bytes.ReplaceAll(out, []byte("\r\n"), []byte("\n"))), "\n")
	if text == "" {
		return nil
	}
	all := strings.Split(text, "\n")
	var kept []string
	for i := len(all) - 1; i >= 0 && (n <= 0 || len(kept) < n); i-- {
		if keep == nil || keep(all[i]) {
			kept = append(kept, all[i])
		}
	}
	slices.Reverse(kept)
	return kept
}
