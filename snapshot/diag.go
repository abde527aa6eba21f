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

	"github.com/gpu-telemetry/gpu-telemetry/kmsg"
	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

// diagSection is one section of diagnostics: the last n lines that keep
// takes of a job's output (keep nil: every line; n 0: all of them).
type diagSection struct {
	title    string
	keep     func(line string) bool
	n        int
	followUp bool // a follow-up shows it too
}

var nvidiaModule = regexp.MustCompile(`(?i)nvidia`).MatchString

// job is one diagnostic, a command or a file read, and the sections that
// show its output.
type job struct {
	sections []diagSection
	gpu      bool                                      // it needs the GPU's bus id
	run      func(ctx context.Context) ([]byte, error) // nil when not run
	notRun   string                                    // why it is not run
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

// section is a job's one section shown in crash snapshots and follow-ups alike.
func section(title string, followUp bool) []diagSection {
	return []diagSection{{title: title, followUp: followUp}}
}

// jobs are the diagnostics of the GPU at busID that a crash snapshot's
// sections show (followUp: a follow-up's): first gpu-telemetry-deep.py's
// diag_sections, in its order and under its titles (it ran them through a
// shell; the dmesg greps are now the kernelFilter, a GPU's lines rather
// than every line that says "gpu"), then what NVIDIA asks for in a bug
// report (nvidia-bug-report.sh collects it). A follow-up shows what changes
// in the minutes after an incident: new kernel messages, the device's PCIe
// state. Only the parsed bus id, printed back, reaches a command line or a
// path, never outside text: when it does not parse, the jobs that need it
// say so and are not run.
func (m *Manager) jobs(busID string, followUp bool) []job {
	a, err := reading.ParsePCIAddr(busID)
	addr := a.String()
	// The bridges above the GPU, read from sysfs once: the kernel log's
	// filter keeps their lines about the GPU; the AER counters show the nearest.
	var f kernelFilter
	bridges, pathErr := []reading.PCIAddr(nil), err
	if err == nil {
		bridges, pathErr = kmsg.PCIPath(m.hostPath(pciDevicesDir), a)
		f = kernelFilter{gpu: reading.Some(a), bridges: bridges, pathKnown: pathErr == nil}
	}
	// A crash takes the numeric ids and the whole config space as hex, as
	// nvidia-bug-report.sh does (ffff... when the GPU is off the bus).
	lspci := []string{"-nnDvvvxxxx", "-s", addr}
	if followUp {
		lspci = []string{"-vvs", addr}
	}
	all := []job{
		m.kernelLogJob(f),
		{sections: section("PCIe device state", true), gpu: true, run: m.command("lspci", lspci...)},
		// VENDOR_ID reads config space: 10de is NVIDIA, ffff means the
		// device does not answer (fallen off the bus).
		{sections: section("GPU register test (ffff = off bus)", true), gpu: true, run: m.command("setpci", "-s", addr, "VENDOR_ID")},
		{sections: section("nvidia-smi (may fail)", true), run: m.command("nvidia-smi")},
		// The lines of /proc/modules that name an NVIDIA module, as the module
		// or among its users (drm_kms_helper used by nvidia_drm).
		{sections: []diagSection{{"NVIDIA kernel modules", nvidiaModule, 0, false}},
			run: func(context.Context) ([]byte, error) {
				b, err := os.ReadFile(m.hostPath(procModules))
				if err != nil {
					return nil, fmt.Errorf("read kernel modules: %w", err)
				}
				return b, nil
			}},
		{sections: section("System memory", false), run: m.command("free", "-h")},
		{sections: section("System load", false), run: m.command("uptime")},
		{sections: section("NVIDIA driver version (/proc/driver/nvidia/version)", false), run: m.readFile(nvidiaProcDir, "version")},
		{sections: section("Driver's GPU information (/proc/driver/nvidia/gpus/<bus id>/information)", false), gpu: true,
			run: m.readFile(nvidiaProcDir, "gpus", addr, "information")},
		{sections: section("PCIe AER counters (sysfs) of the GPU and its upstream bridge", false), gpu: true,
			run: func(context.Context) ([]byte, error) { return m.aerCounters(a, bridges, pathErr), nil }},
		{sections: section("nvidia module parameters (/sys/module/nvidia/parameters)", false), run: m.moduleParams},
	}
	var jobs []job
	for _, j := range all {
		if followUp {
			j.sections = slices.DeleteFunc(j.sections, func(d diagSection) bool { return !d.followUp })
		}
		if len(j.sections) == 0 {
			continue
		}
		if j.gpu && err != nil {
			j.run, j.notRun = nil, err.Error()
		}
		jobs = append(jobs, j)
	}
	return jobs
}

// diagnose runs the jobs of the GPU at busID and renders their sections.
func (m *Manager) diagnose(busID string, followUp bool) []Section {
	jobs := m.jobs(busID, followUp)
	r := m.collect(m.work, jobs)
	var out []Section
	for i, j := range jobs {
		for _, d := range j.sections {
			out = append(out, Section{d.title, filtered(r[i], d.keep, d.n)})
		}
	}
	return out
}

// drainGrace is how long collect waits, once cancelled, for the killed
// commands to hand back their partial output. Close waits closeGrace in all.
const drainGrace = 200 * time.Millisecond

// collect runs the jobs concurrently and waits for them, at most
// DiagnosticsTimeout or until ctx is cancelled. A job that has not answered
// by then is reported as such and left behind (its channel is buffered).
func (m *Manager) collect(ctx context.Context, jobs []job) []result {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type answer struct {
		i int
		r result
	}
	ch := make(chan answer, len(jobs))
	res := make([]result, len(jobs))
	pending := make(map[int]bool, len(jobs))
	for i, j := range jobs {
		if j.run == nil {
			res[i] = result{status: "(not run: " + j.notRun + ")"}
			continue
		}
		pending[i] = true
		go func() { ch <- answer{i, runJob(ctx, m.cfg.CommandTimeout, j.run)} }()
	}
	why := "(no answer within " + m.cfg.DiagnosticsTimeout.String() + "; abandoned)"
	deadline := time.After(m.cfg.DiagnosticsTimeout)
	done := ctx.Done()
	for len(pending) > 0 {
		select {
		case a := <-ch:
			res[a.i] = a.r
			delete(pending, a.i)
		case <-done:
			// Killed commands return at once with what they printed so far,
			// which is worth keeping; wait a moment for it.
			done = nil
			deadline = time.After(drainGrace)
			why = "(canceled: the daemon is shutting down)"
		case <-deadline:
			for i := range pending {
				res[i] = result{status: why}
			}
			return res
		}
	}
	return res
}

// runJob runs a job's run under timeout, the one bound of each diagnostic
// (ExecRunner kills a program when its context ends), and describes how it
// ended (the boot log's journalctl too).
func runJob(ctx context.Context, timeout time.Duration, run func(context.Context) ([]byte, error)) result {
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	out, err := run(cctx)
	if err == nil {
		return result{out: out}
	}
	var status string
	switch te, ok := errors.AsType[*TimeoutError](err); {
	case ctx.Err() != nil:
		status = "(canceled: the daemon is shutting down)"
	case errors.Is(cctx.Err(), context.DeadlineExceeded):
		status = "(timed out after " + timeout.String() + ")"
	case ok:
		// A Runner that bounds itself and says so: the tests' fakes.
		// ExecRunner's only bound is cctx, so its timeouts end in the case
		// above.
		status = "(timed out after " + te.After.String() + ")"
	case errors.Is(err, exec.ErrNotFound):
		status = "(" + err.Error() + ")" // names the package: NotInstalledError
	default:
		status = "(failed: " + err.Error() + ")"
	}
	return result{out: out, status: status}
}

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
