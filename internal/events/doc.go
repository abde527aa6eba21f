// Package events holds what the logger decides about a stream of GPU
// events before any of them is written: whether an Xid (or a recovery
// action) reported by both NVML and the kernel log is one event (Dedup),
// when chatty clock-change events become a burst (ClockBurst), and how many
// kernel lines of one kind for one GPU are let through a minute
// (KernelLines). Each is a small type with a pure method of its state and
// the event's time: no I/O, no clock of its own; the monitor writes, counts
// and logs what they decide.
package events
