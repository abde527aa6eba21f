package sink

import (
	"slices"
	"strconv"
	"strings"
	"time"
)

// EventLine is one events.log line taken apart:
// "<timestamp> key=value key="quoted value" ...".
type EventLine struct {
	Time time.Time
	KV   map[string]string // every key=value, quotes undone
}

// Type is the line's type= field: Xid, GPU_LOST, TDP_CHANGE, AER, ...
func (e EventLine) Type() string { return e.KV["type"] }

// ParseEventLine takes an events.log line apart. ok is false for a line
// with a bad timestamp, a malformed field or no type.
func ParseEventLine(line string) (e EventLine, ok bool) {
	ts, rest, ok := strings.Cut(line, " ")
	if !ok {
		return EventLine{}, false
	}
	t, err := time.Parse(TimestampLayout, ts)
	if err != nil {
		return EventLine{}, false
	}
	e = EventLine{Time: t, KV: map[string]string{}}
	for rest != "" {
		rest = strings.TrimLeft(rest, " ")
		eq := strings.IndexByte(rest, '=')
		if eq <= 0 {
			break
		}
		key := rest[:eq]
		if strings.ContainsAny(key, " \"") {
			return EventLine{}, false
		}
		rest = rest[eq+1:]
		var val string
		if strings.HasPrefix(rest, `"`) {
			q, err := strconv.QuotedPrefix(rest)
			if err != nil {
				return EventLine{}, false
			}
			val, _ = strconv.Unquote(q)
			rest = rest[len(q):]
		} else {
			val, rest, _ = strings.Cut(rest, " ")
		}
		e.KV[key] = val
	}
	if e.Type() == "" {
		return EventLine{}, false
	}
	return e, true
}

// EventClass says what an events.log line tells of a GPU's trouble.
type EventClass uint8

// Event classes, from the least to the most telling.
const (
	EventRoutine  EventClass = iota // P-states, clock changes, recoveries, ...: no trouble
	EventNotable                    // trouble that starts no incident (a TDP change, a corrected AER, a second source's report of an incident)
	EventIncident                   // an incident: what makes the logger take a crash snapshot (UNCLEAN_STOP: a boot log)
)

// The types of events.log lines (the type= field), each named once: writers
// put "type="+TypeXid, readers compare a line's Type with them, and
// eventClasses gives each its class, so a new type is one edit here. The
// strings are what the files hold, read by operators and by `report`:
// never change one. An NVML event of a type with no name here is written as
// its number (type=0x...), routine.
const (
	TypeXid                   = "Xid"                     // an Xid, from NVML events or the kernel log
	TypeRecoveryAction        = "GpuRecoveryAction"       // the driver asks for a recovery action (NVML event or kernel log)
	TypeGPULost               = "GPU_LOST"                // NVML says the GPU is lost (event or sample)
	TypeNVMLHung              = "NVML_HUNG"               // a sample stuck in the driver past the deadline
	TypeNVMLFailed            = "NVML_FAILED"             // samples failing: the GPU backs off
	TypeNVMLRecovered         = "NVML_RECOVERED"          // the GPU answers again after a hang or failures
	TypeAER                   = "AER"                     // a PCIe AER kernel line on the GPU's path
	TypeFallenOffBus          = "FALLEN_OFF_BUS"          // kernel: fallen off the bus, without an Xid
	TypeRMInitFailed          = "RM_INIT_FAILED"          // kernel: RmInitAdapter failed
	TypeGSPTimeout            = "GSP_TIMEOUT"             // kernel: a GSP RPC timed out
	TypeGSPCrash              = "GSP_CRASH"               // kernel: GSP heartbeat lost or crash report
	TypeUncleanStop           = "UNCLEAN_STOP"            // the previous run did not stop cleanly (written at start)
	TypeTDPChange             = "TDP_CHANGE"              // the enforced power limit changed
	TypePState                = "PState"                  // NVML P-state change event
	TypeClock                 = "Clock"                   // NVML clock change event
	TypeClockBurst            = "ClockBurst"              // clock events past the burst limit: the rest of the second is not written
	TypeGPUEnumeratedAgain    = "GPU_ENUMERATED_AGAIN"    // a vanished GPU is in the driver's enumeration again
	TypeKernelLinesSuppressed = "KERNEL_LINES_SUPPRESSED" // kernel lines over the burst limit in the last window
	TypeHealthBaseline        = "HEALTH_BASELINE"         // a GPU's first health counter reading, every counter present
	TypeHealth                = "HEALTH"                  // a health counter changed (counter=, link= for NVLink, from=, to=)
	TypeHealthWarning         = "HEALTH_WARNING"          // a hardware health warning began (reason=)
	TypeHealthCritical        = "HEALTH_CRITICAL"         // a critical hardware health condition began (reason=): a crash snapshot
	TypeHealthEvent           = "HEALTH_EVENT"            // an NVML hardware health event (event=, severity=critical|notable)
)

// eventClasses is the class of every type the logger writes: what
// `gpu-telemetry report` (which incident a report is about) and the boot log
// (the last incidents before an unclean stop) read. An AER line is an
// incident only when uncorrectable (see Class).
var eventClasses = map[string]EventClass{
	TypeXid:                   EventIncident,
	TypeRecoveryAction:        EventIncident,
	TypeGPULost:               EventIncident,
	TypeNVMLHung:              EventIncident,
	TypeNVMLFailed:            EventIncident,
	TypeAER:                   EventIncident,
	TypeFallenOffBus:          EventIncident,
	TypeRMInitFailed:          EventIncident,
	TypeGSPTimeout:            EventIncident,
	TypeGSPCrash:              EventIncident,
	TypeUncleanStop:           EventIncident,
	TypeTDPChange:             EventNotable,
	TypeNVMLRecovered:         EventRoutine,
	TypePState:                EventRoutine,
	TypeClock:                 EventRoutine,
	TypeClockBurst:            EventRoutine,
	TypeGPUEnumeratedAgain:    EventRoutine,
	TypeKernelLinesSuppressed: EventRoutine,
	TypeHealthBaseline:        EventRoutine,
	TypeHealth:                EventNotable,
	TypeHealthWarning:         EventNotable,
	TypeHealthCritical:        EventIncident,
	TypeHealthEvent:           EventIncident,
}

// EventTypes returns the types Class does not call routine, sorted.
func EventTypes() []string {
	var out []string
	for t, c := range eventClasses {
		if c != EventRoutine {
			out = append(out, t)
		}
	}
	slices.Sort(out)
	return out
}

// Class says what the line tells: an incident, notable trouble, or nothing
// of the kind. A line that repeats another source's report of an event
// (duplicate_of=) starts no incident of its own, nor does an AER line that
// is not uncorrectable, nor a health event that is not critical: all are
// notable.
func (e EventLine) Class() EventClass {
	c := eventClasses[e.Type()]
	if c == EventIncident && (e.KV["duplicate_of"] != "" ||
		e.Type() == TypeAER && !strings.HasPrefix(e.KV["severity"], "uncorrectable") ||
		e.Type() == TypeHealthEvent && e.KV["severity"] != "critical") {
		return EventNotable
	}
	return c
}
