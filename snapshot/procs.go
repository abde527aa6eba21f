package snapshot

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/reading"
	"github.com/gpu-telemetry/gpu-telemetry/sink"
)

// ProcessesTitle is the title of the processes section.
const ProcessesTitle = "Processes on this GPU"

// ProcessesSection renders the slow tier's latest process read of the
// crashed GPU, taken at now: the processes of the last successful read, with
// its age, even when the current read is hung (NVML stuck in a GSP fault is
// exactly when the snapshot is written).
func ProcessesSection(p *reading.Procs, now time.Time) Section {
	var b strings.Builder
	switch {
	case p == nil || p.Status == reading.ProcNotRead:
		return Section{ProcessesTitle, "no process data: the process list had not been read yet\n"}
	case p.Status == reading.ProcUnsupported:
		return Section{ProcessesTitle, "no process data: " + p.Err + "\n"}
	case p.Status != reading.ProcOK:
		fmt.Fprintf(&b, "no current process data: the latest read %s (%s), started %s before this snapshot\n",
			p.Status, p.Err, age(now.Sub(p.Time)))
	}
	good := p.Good()
	if good == nil {
		b.WriteString("no successful read before it\n")
		return Section{ProcessesTitle, b.String()}
	}
	if good != p {
		b.WriteString("last successful read below.\n")
	}
	fmt.Fprintf(&b, "read at %s, %s before this snapshot: %d process(es)\n",
		good.Time.Format(sink.TimestampLayout), age(now.Sub(good.Time)), len(good.List))
	if len(good.List) == 0 {
		return Section{ProcessesTitle, b.String()}
	}
	fmt.Fprintf(&b, "%8s  %-16s  %10s  %4s  %4s  %s\n", "PID", "TYPE", "GPU MEM", "SM%", "MEM%", "NAME: COMMAND LINE")
	for _, pr := range good.List {
		fmt.Fprintf(&b, "%8d  %-16s  %10s  %4s  %4s  %s\n", pr.PID, pr.Kind, mem(pr.MemBytes),
			optf("%d", pr.SMUtil), optf("%d", pr.MemUtil), who(&pr))
		if j := workloadLine(&pr.Workload); j != "" {
			fmt.Fprintf(&b, "%8s  job: %s\n", "", j)
		}
	}
	return Section{ProcessesTitle, b.String()}
}

func age(d time.Duration) string { return strconv.FormatFloat(max(d, 0).Seconds(), 'f', 1, 64) + " s" }

func mem(o reading.Opt[uint64]) string {
	if v, ok := o.Get(); ok {
		return strconv.FormatUint(v>>20, 10) + " MiB"
	}
	return na
}

// workloadLine names the job a process belonged to, from its cgroup, with its
// systemd unit; "" when its cgroup was not read.
func workloadLine(w *reading.Workload) string {
	if !w.Known {
		return ""
	}
	s := w.String()
	switch {
	case s == "":
		return "none named by its cgroup"
	case w.Unit != "" && !strings.HasPrefix(s, "unit "):
		s += " (unit " + w.Unit + ")"
	}
	return s
}

func who(pr *reading.Process) string {
	if pr.Origin != reading.ProcHere {
		return "(" + pr.Origin.String() + ")"
	}
	s := pr.Name + ": " + pr.Cmdline
	if pr.CmdlineTrunc {
		s += " ..."
	}
	return s
}
