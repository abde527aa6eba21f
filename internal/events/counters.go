package events

import "github.com/gpu-telemetry/gpu-telemetry/internal/counters"

// The event stage's counters, counted in the registry it is given
// (Config.Counters).
var (
	nvmlEvents = counters.Declare(counters.Def{Name: "nvml_events",
		Help: "NVML events received"})
	kmsgXids = counters.Declare(counters.Def{Name: "kmsg_xids",
		Help: "Xid lines read from the kernel log"})
	kmsgBacklogXids = counters.Declare(counters.Def{Name: "kmsg_backlog_xids",
		Help: "Xids of kernel log records read after the fact (logged before the logger was ready, or, after a restart in the same boot, while no logger was reading); in events.log with backlog=true and their ktime, and counted in kmsg_xids"})
	kernelLinesHeld = counters.Declare(counters.Def{Name: "kernel_lines_suppressed", Loss: true, OwnLog: true,
		Help: "kernel AER/NVRM lines not written to events.log (over 10 of one kind per GPU per minute)"})
	xidLinesHeld = counters.Declare(counters.Def{Name: "xid_lines_suppressed", Loss: true, OwnLog: true,
		Help: "Xid lines of an application's faults (13, 31, 43, ...) not written to events.log (over 10 of one code per GPU per minute; still counted in xids_total)"})
	kernelLines = counters.Declare(counters.Def{Name: "kernel_lines",
		Help: "kernel AER, fallen-off-the-bus, RmInitAdapter and GSP lines written to events.log"})
	duplicateXids = counters.Declare(counters.Def{Name: "duplicate_xids",
		Help: "Xids reported by more than one source (NVML Xid events, GPU operational events, the kernel log), counted once"})
	opOverflows = counters.Declare(counters.Def{Name: "op_event_overflows", Loss: true,
		Help: "GPU operational events whose source says it dropped records before them (attribute overflow): the dropped events are lost"})
)
