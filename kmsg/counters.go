package kmsg

import "github.com/gpu-telemetry/gpu-telemetry/internal/counters"

// Counts are the reader's counts at one moment (Counts).
type Counts struct {
	Malformed, Overruns, Lost, Reopens, Restarts uint64
}

// Counts returns the reader's counts (Malformed, Overruns, Lost, Reopens,
// Restarts). It is safe to call while Run is running.
func (r *Reader) Counts() Counts {
	return Counts{Malformed: r.Malformed(), Overruns: r.Overruns(), Lost: r.Lost(), Reopens: r.Reopens(), Restarts: r.Restarts()}
}

// ReaderCounters are the reader's counters (RegisterCounters).
var ReaderCounters = []counters.Field[Counts]{
	{Def: counters.Declare(counters.Def{Name: "kmsg_malformed", Loss: true,
		Help: "kernel log records that could not be parsed"}),
		Get: func(c Counts) uint64 { return c.Malformed }},
	{Def: counters.Declare(counters.Def{Name: "kmsg_overruns", Loss: true,
		Help: "times the kernel log ring overwrote records before they were read"}),
		Get: func(c Counts) uint64 { return c.Overruns }},
	{Def: counters.Declare(counters.Def{Name: "kmsg_records_lost", Loss: true, OwnLog: true,
		Help: "/dev/kmsg records the kernel overwrote before they were read (the gaps in their sequence numbers): after an overrun, or, at a restart in the same boot, logged while no logger was reading and overwritten before the replay reached them (the reader logs each replay's and the first other)"}),
		Get: func(c Counts) uint64 { return c.Lost }},
	{Def: counters.Declare(counters.Def{Name: "kmsg_reopens", Loss: true, OwnLog: true,
		Help: "kernel log read errors after which the log was opened again, with back-off from 1 s to 1 min (the reader logs the first; /dev/kmsg resumes after the last record read, the records lost meanwhile are in kmsg_records_lost)"}),
		Get: func(c Counts) uint64 { return c.Reopens }},
	{Def: counters.Declare(counters.Def{Name: "kmsg_file_restarts",
		Help: "times a --kmsg file was replaced (the new one read from its start) or truncated (read again from its start); each is logged"}),
		Get: func(c Counts) uint64 { return c.Restarts }},
}

// RegisterCounters makes the reader's counters (ReaderCounters) part of r.
func (r *Reader) RegisterCounters(reg *counters.Registry) {
	counters.Observe(reg, r.Counts, ReaderCounters...)
}
