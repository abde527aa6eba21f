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

// nvidiaModule picks the lines of /proc/modules that name an NVIDIA module,
// as the module or among its users (drm_kms_helper used by nvidia_drm).
var nvidiaModule = regexp.MustCompile(`(?i)nvidia`).MatchString

// Line counts of the seed's tail -N.
const (
	gpuLogLines  = 100
	dmesgLines   = 200
	aerLogLines  = 20
	lastRowsKept = 50
)

// Keys of the diagnostics a snapshot can run.
const (
	diagDmesg   = "dmesg"
	diagLspci   = "lspci"
	diagSetpci  = "setpci"
	diagSMI     = "nvidia-smi"
	diagModules = "modules"
	diagFree    = "free"
	diagUptime  = "uptime"
)

// job is one diagnostic: a command or a file read. Jobs run concurrently.
type job struct {
	key    string
	run    func(ctx context.Context) ([]byte, error) // nil when not run
	notRun string                                    // why it is not run
}

// result is what one job produced: its output and, when it did not simply
// succeed, a status line in parentheses ("(timed out after 5s)").
type result struct {
	out    []byte
	status string
}

// command returns a job that runs name with args through the Manager's Runner.
func (m *Manager) command(key, name string, args ...string) job {
	return job{key: key, run: func(ctx context.Context) ([]byte, error) {
		return m.cfg.Runner.Run(ctx, name, args...)
	}}
}

// pciJobs returns the lspci and setpci jobs for a GPU, or jobs that say why
// they were not run when the bus id is not a valid PCI address.
func (m *Manager) pciJobs(busID string, full bool) []job {
	// Only the parsed address, printed back, reaches the command line: never
	// outside text.
	a, err := reading.ParsePCIAddr(busID)
	if err != nil {
		return []job{{key: diagLspci, notRun: err.Error()}, {key: diagSetpci, notRun: err.Error()}}
	}
	addr := a.String()
	return []job{
		m.lspci(addr, full),
		// VENDOR_ID reads config space: 10de is NVIDIA, ffff means the device
		// does not answer (fallen off the bus).
		m.command(diagSetpci, "setpci", "-s", addr, "VENDOR_ID"),
	}
}

// lspci is the verbose lspci of the GPU; full adds the numeric ids and the
// whole config space as hex, as nvidia-bug-report.sh takes it.
func (m *Manager) lspci(addr string, full bool) job {
	if full {
		return m.command(diagLspci, "lspci", "-nnDvvvxxxx", "-s", addr)
	}
	return m.command(diagLspci, "lspci", "-vvs", addr)
}

// crashJobs are the diagnostics of a full crash snapshot.
func (m *Manager) crashJobs(busID string) []job {
	jobs := []job{m.kernelLogJob()}
	// The full config space, as nvidia-bug-report.sh takes it (ffff... when
	// the GPU is off the bus).
	jobs = append(jobs, m.pciJobs(busID, true)...)
	jobs = append(jobs, m.bugReportJobs(busID)...)
	return append(jobs,
		m.command(diagSMI, "nvidia-smi"),
		job{key: diagModules, run: func(context.Context) ([]byte, error) {
			b, err := os.ReadFile(m.cfg.ModulesPath)
			if err != nil {
				return nil, fmt.Errorf("read kernel modules: %w", err)
			}
			return b, nil
		}},
		m.command(diagFree, "free", "-h"),
		m.command(diagUptime, "uptime"),
	)
}

// followUpJobs are the diagnostics of a follow-up: what changes in the
// minutes after an incident (new kernel messages, the device's PCIe state).
func (m *Manager) followUpJobs(busID string) []job {
	jobs := []job{m.kernelLogJob()}
	jobs = append(jobs, m.pciJobs(busID, false)...)
	return append(jobs, m.command(diagSMI, "nvidia-smi"))
}

// crashSections renders the diagnostics of a crash snapshot in the seed's order.
func crashSections(r map[string]result, f kernelFilter) []Section {
	return append([]Section{
		{"dmesg (nvidia/gpu errors)", filtered(r[diagDmesg], f.GPULine, gpuLogLines)},
		{"dmesg (last 200 lines)", filtered(r[diagDmesg], nil, dmesgLines)},
		{"PCIe AER errors", filtered(r[diagDmesg], f.AERLine, aerLogLines)},
		{"PCIe device state", raw(r[diagLspci])},
		{"GPU register test (ffff = off bus)", raw(r[diagSetpci])},
		{"nvidia-smi (may fail)", raw(r[diagSMI])},
		{"NVIDIA kernel modules", filtered(r[diagModules], nvidiaModule, 0)},
		{"System memory", raw(r[diagFree])},
		{"System load", raw(r[diagUptime])},
	}, bugReportSections(r)...)
}

// followUpSections renders the diagnostics of a follow-up.
func followUpSections(r map[string]result, f kernelFilter) []Section {
	return []Section{
		{"dmesg (nvidia/gpu errors)", filtered(r[diagDmesg], f.GPULine, gpuLogLines)},
		{"PCIe AER errors", filtered(r[diagDmesg], f.AERLine, aerLogLines)},
		{"PCIe device state", raw(r[diagLspci])},
		{"GPU register test (ffff = off bus)", raw(r[diagSetpci])},
		{"nvidia-smi (may fail)", raw(r[diagSMI])},
	}
}

// drainGrace is how long collect waits, once cancelled, for the killed
// commands to hand back their partial output. Close waits closeGrace in all.
const drainGrace = 200 * time.Millisecond

// collect runs the jobs concurrently and waits for all of them, for at most
// DiagnosticsTimeout, or until ctx is cancelled. A job that has not answered
// by then is reported as such; its goroutine is told to stop and left behind
// (its result channel is buffered, so it never blocks).
func (m *Manager) collect(ctx context.Context, jobs []job) map[string]result {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type keyed struct {
		key string
		r   result
	}
	ch := make(chan keyed, len(jobs))
	res := make(map[string]result, len(jobs))
	pending := make(map[string]bool, len(jobs))
	for _, j := range jobs {
		if j.run == nil {
			res[j.key] = result{status: "(not run: " + j.notRun + ")"}
			continue
		}
		pending[j.key] = true
		go func() { ch <- keyed{j.key, m.runJob(ctx, j)} }()
	}
	deadline := time.NewTimer(m.cfg.DiagnosticsTimeout)
	defer deadline.Stop()
	done := ctx.Done()
	var drain <-chan time.Time // set once ctx is cancelled
	for len(pending) > 0 {
		var why string
		select {
		case k := <-ch:
			res[k.key] = k.r
			delete(pending, k.key)
			continue
		case <-done:
			// Killed commands return at once with what they printed so far,
			// which is worth keeping; wait a moment for it.
			done = nil
			t := time.NewTimer(drainGrace)
			defer t.Stop()
			drain = t.C
			continue
		case <-drain:
			why = "(canceled: the daemon is shutting down)"
		case <-deadline.C:
			why = "(no answer within " + m.cfg.DiagnosticsTimeout.String() + "; abandoned)"
		}
		for key := range pending {
			res[key] = result{status: why}
		}
		return res
	}
	return res
}

// runJob runs one job under CommandTimeout and describes how it ended.
func (m *Manager) runJob(ctx context.Context, j job) result {
	cctx, cancel := context.WithTimeout(ctx, m.cfg.CommandTimeout)
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
		status = "(timed out after " + m.cfg.CommandTimeout.String() + ")"
	case errors.Is(err, exec.ErrNotFound):
		status = "(" + err.Error() + ")" // names the package: NotInstalledError
	default:
		status = "(failed: " + err.Error() + ")"
	}
	return result{out: out, status: status}
}

// raw renders a command's whole output followed by its status line.
func raw(r result) string {
	var b strings.Builder
	b.Write(r.out)
	if len(r.out) > 0 && r.out[len(r.out)-1] != '\n' {
		b.WriteByte('\n')
	}
	if len(r.out) == 0 && r.status == "" {
		b.WriteString("(no output)\n")
	}
	if r.status != "" {
		b.WriteString(r.status + "\n")
	}
	return b.String()
}

// filtered renders the last n lines of the output that keep takes (all
// lines when keep is nil; all it takes when n is 0), followed by the status
// line.
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
