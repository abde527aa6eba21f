// Package events is the logger's event path: what it makes of a stream of
// GPU events before any of them is written. Stage is the path's one stage:
// every NVML, kernel log and poll event goes through Stage.Handle once, and
// every kernel AER or NVRM failure line, attributed to its GPU by the
// monitor, through Stage.KernelLine once; each comes out a Record (its
// events.log lines, the incident it raises, what the live view and the
// daemon's log show). It is built of small parts: whether an Xid (or a
// recovery action) reported by both NVML and the kernel log is one event
// (Dedup), when chatty clock-change events become a burst (ClockBurst), and
// how many kernel lines of one kind, or an application's Xids of one code,
// for one GPU are let through a minute (LineLimit; the monitor asks on the
// poll loop's clock for the counts of the windows that ended:
// Stage.WindowsEnded). Each part is a small type with a pure method of its
// state and the event's time: no I/O, no clock of its own; the monitor
// writes and logs what they decide.
package events
