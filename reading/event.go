package reading

import "time"

// EventKind classifies a GPU event, whichever source reported it.
type EventKind uint8

// Event kinds.
const (
	EventXid      EventKind = iota + 1 // Xid error: Data is the Xid number
	EventRecovery                      // GPU recovery action: Data is the action (0 none .. 4 drain and reset)
	EventPState                        // P-state change
	EventClock                         // clock change
	EventLost                          // GPU lost or gone from enumeration
	EventOther                         // anything else NVML delivers
	EventHealth                        // a hardware health event (ECC error, DRAM retirement, GPU unavailable): NVMLType says which
)

// EventOperational is a GPU operational event (driver R615+) that carries
// no legacy Xid: Event.Op says what.
const EventOperational = EventHealth + 1

// Source says where an event came from.
type Source uint8

// Event sources.
const (
	SourceNVML Source = iota + 1 // an NVML event set
	SourceKmsg                   // the kernel log (/dev/kmsg)
	SourcePoll                   // the poll loop (failed or hung calls)
)

// SourceOpEvent is an NVML GPU operational event (driver R615+).
const SourceOpEvent = SourcePoll + 1

func (s Source) String() string {
	switch s {
	case SourceNVML:
		return "nvml"
	case SourceKmsg:
		return "kmsg"
	case SourcePoll:
		return "poll"
	case SourceOpEvent:
		return "nvml-op"
	}
	return "unknown"
}

// Event is one GPU event.
type Event struct {
	// Time is when the event was received, as time.Now returned it. Files
	// print its wall time; the monitor's de-dup and burst windows subtract
	// these times, which Go does on the monotonic reading time.Now carries,
	// so a wall-clock step does not move them. Never set it from another
	// clock (the kernel's time is KernelTime) nor strip that reading (Round,
	// UTC, a time decoded from text): the windows would fall back to the
	// wall clock.
	Time     time.Time
	GPU      int // GPU index; -1 when no monitored GPU matched
	BusID    string
	Kind     EventKind
	Source   Source
	NVMLType uint64 // NVML event type mask (SourceNVML only)
	Data     uint64 // Xid number, recovery action, ...
	Text     string // the kernel log message (SourceKmsg), or other detail
	// Xid is what a kernel log Xid line says beyond its code, as the
	// source's parser took it apart (kmsg.ParseDriverXid), on the line's Xid
	// event and on the recovery action event of its Xid 154: nothing
	// downstream parses Text again. NVML's Xid and recovery action events
	// carry no text: zero.
	Xid XidDetail
	// KernelTime is the kernel log record's printk timestamp (SourceKmsg
	// only; 0 otherwise): it places the line among the rows by their
	// dmesg_time, which arrival time cannot.
	KernelTime time.Duration
	// Backlog marks a kernel log record read after the fact: logged while
	// no logger was reading (replayed after a restart in the same boot),
	// before the logger was ready, or a --kmsg file's content from before
	// its end was reached. Time is when it was read; KernelTime is when it
	// was logged.
	Backlog bool
	// Op is a GPU operational event's decoding (SourceOpEvent only; nil
	// otherwise). One that carries a legacy Xid is an EventXid (Data the
	// Xid): the same incident as that Xid from the other sources.
	Op *OpEvent
}

// OpEvent is a GPU operational event as the sampler decoded it: every field
// NVML gave, named where NVML names the value and as its number where not,
// and what it means for the incident desk.
type OpEvent struct {
	// Fields are the events.log fields, key then value, in order.
	Fields []string
	// Critical names why the event is critical ("fatal", "uncontained",
	// both joined by "|"); empty when it is not.
	Critical string
	// Overflow: the source dropped event records before this one.
	Overflow bool
}

// XidDetail is the part of an Xid report after its code: the process the
// driver blamed, the driver's text, and for an Xid 154 the new recovery
// action that text names. The kernel log's Xid lines have it (kmsg.ParseDriverXid
// fills it, xid.Detail reads the text); an NVML event has none.
type XidDetail struct {
	PID         int    // process the driver blamed; 0 when absent or '<unknown>'
	ProcessName string // its name; empty when absent or <unknown>
	// Text is the rest of the message, after the code and pid/name: what
	// xid.ExplainDetail decodes (the NVLink 5 fields of Xid 144-150).
	Text string
	// RecoveryAction is, for Xid 154 only, the new recovery action: the hex
	// value after "to" (0 none, 1 GPU reset, 2 node reboot, 3 drain P2P,
	// 4 drain and reset; see xid.RecoveryActionName). Absent when the text
	// carries no such value. RecoveryWords are the driver's words for it,
	// in parentheses after the value ("GPU Reset Required"); empty when
	// there are none.
	RecoveryAction Opt[uint64]
	RecoveryWords  string
}
