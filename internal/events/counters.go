package events

import "github.com/gpu-telemetry/gpu-telemetry/internal/counters"

// StageCounters are the event stage's counters (RegisterCounters).
var StageCounters = []counters.Field[Stats]{
	{Def: counters.Declare(counters.Def{Name: "nvml_events",
		Help: "NVML events received"}),
		Get: func(s Stats) uint64 { return s.NVMLEvents }},
	{Def: counters.Declare(counters.Def{Name: "kmsg_xids",
		Help: "Xid lines read from the kernel log"}),
		Get: func(s Stats) uint64 { return s.KmsgXids }},
	{Def: counters.Declare(counters.Def{Name: "kmsg_backlog_xids",
		Help: "Xids of kernel log records read after the fact (logged before the logger was ready, or, after a restart in the same boot, while no logger was reading); in events.log with backlog=true and their ktime, and counted in kmsg_xids"}),
		Get: func(s Stats) uint64 { return s.KmsgBacklogXids }},
	{Def: counters.Declare(counters.Def{Name: "kernel_lines_suppressed", Loss: true, OwnLog: true,
		Help: "kernel AER/NVRM lines not written to events.log (over 10 of one kind per GPU per minute)"}),
		Get: func(s Stats) uint64 { return s.KernelLinesHeld }},
	{Def: counters.Declare(counters.Def{Name: "xid_lines_suppressed", Loss: true, OwnLog: true,
		Help: "Xid lines of an application's faults (13, 31, 43, ...) not written to events.log (over 10 of one code per GPU per minute; still counted in xids_total)"}),
		Get: func(s Stats) uint64 { return s.XidLinesHeld }},
	{Def: counters.Declare(counters.Def{Name: "kernel_lines",
		Help: "kernel AER, fallen-off-the-bus, RmInitAdapter and GSP lines written to events.log"}),
		Get: func(s Stats) uint64 { return s.KernelLines }},
	{Def: counters.Declare(counters.Def{Name: "duplicate_xids",
		Help: "Xids reported by both NVML events and the kernel log, counted once"}),
		Get: func(s Stats) uint64 { return s.DuplicateXids }},
}

// RegisterCounters makes the stage's counters (StageCounters) part of r.
func (s *Stage) RegisterCounters(r *counters.Registry) {
	counters.Observe(r, s.Stats, StageCounters...)
}
