package sink

import (
	"maps"
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

// eventClasses are the types of events.log lines that tell of trouble: the
// one list that `gpu-telemetry report` (which incident a report is about)
// and the boot log (the last incidents before an unclean stop) read. An AER
// line is an incident only when uncorrectable (see Class).
var eventClasses = map[string]EventClass{
	"Xid":               EventIncident,
	"GpuRecoveryAction": EventIncident,
	"GPU_LOST":          EventIncident,
	"NVML_HUNG":         EventIncident,
	"NVML_FAILED":       EventIncident,
	"AER":               EventIncident,
	"FALLEN_OFF_BUS":    EventIncident,
	"RM_INIT_FAILED":    EventIncident,
	"GSP_TIMEOUT":       EventIncident,
	"GSP_CRASH":         EventIncident,
	"UNCLEAN_STOP":      EventIncident,
	"TDP_CHANGE":        EventNotable,
}

// EventTypes returns the types Class does not call routine, sorted.
func EventTypes() []string { return slices.Sorted(maps.Keys(eventClasses)) }

// Class says what the line tells: an incident, notable trouble, or nothing
// of the kind. A line that repeats another source's report of an event
// (duplicate_of=) starts no incident of its own, nor does an AER line that
// is not uncorrectable: both are notable.
func (e EventLine) Class() EventClass {
	c := eventClasses[e.Type()]
	if c == EventIncident && (e.KV["duplicate_of"] != "" ||
		e.Type() == "AER" && !strings.HasPrefix(e.KV["severity"], "uncorrectable")) {
		return EventNotable
	}
	return c
}
