package sink

import (
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-logfmt/logfmt"
)

// An events.log line is logfmt, one event per line, self-describing:
//
//	time=2026-11-30T19:08:17.623Z host=gpu-node-07 uuid=GPU-... level=critical gpu=0
//	bus=00000000:01:00.0 source=nvml type=Xid xid=79 name="GPU has fallen off the bus" ...
//	incident=crash-20261130-200817.623-gpu0 snapshot=/var/log/gpu-telemetry/crashes/crash-....log
//
// EventLine is the line as the logger writes it (Line), ParsedLine the line as
// a reader takes it apart (ParseEventLine): the writer and its parser sit
// side by side here, both through go-logfmt, what Loki's `| logfmt` and
// Vector's parse_logfmt read. Lines written before time= (a bare local
// timestamp first: "2026-11-30T20:08:17.623+01:00 host=..."), which older
// versions left on disk, still parse.

// EventLine is one events.log line to write: who and how bad first (host, the
// GPU's UUID, level), then the GPU, where the event came from and its type,
// then the event's own fields, then the incident it belongs to and the job
// that was on the GPU.
type EventLine struct {
	Time     time.Time // written in UTC
	Host     string    // the logger's host identity (--host)
	UUID     string    // the GPU's; "" before it is known
	GPU      int       // NVML index; negative: no monitored GPU (gpu=?)
	Bus      string    // the GPU's PCI bus id, NVML form; "" unknown
	Source   string    // nvml, kmsg, poll, start; "" for the poll loop's own findings
	Type     string    // one of the Type constants, or an NVML event's number (0x...)
	Fields   []Field   // the event's own, in order; one with an empty value is not written
	Incident string    // the incident the event belongs to (the base name of the crash snapshot that began it); "" none
	Snapshot string    // the crash snapshot holding its evidence (its own, or its incident's newest); "" none
	Job      string    // the jobs on the GPU (incident lines only); "" none
}

// Field is one key=value of an event, its value as it reads (the writer
// quotes it where logfmt needs quotes).
type Field struct{ Key, Value string }

// KV pairs alternating keys and values into Fields: KV("from", "600W", "to", "450W").
// A key left without a value gets "".
func KV(kv ...string) []Field {
	f := make([]Field, 0, (len(kv)+1)/2)
	for i := 0; i < len(kv); i += 2 {
		v := ""
		if i+1 < len(kv) {
			v = kv[i+1]
		}
		f = append(f, Field{kv[i], v})
	}
	return f
}

// Get is the value of the event's field key ("" when absent), its common
// fields included.
func (e *EventLine) Get(key string) string {
	switch key {
	case "type":
		return e.Type
	case "source":
		return e.Source
	}
	for _, f := range e.Fields {
		if f.Key == key {
			return f.Value
		}
	}
	return ""
}

// Class is the event's class (see ParsedLine.Class).
func (e *EventLine) Class() EventClass { return classOf(e.Get) }

// Level is how bad the event is for a log pipeline (Loki's level, a
// journal priority): critical for an incident, warning for notable trouble,
// info for the rest. An application's Xid (13, 31, 43) is the job's fault,
// not the GPU's: the logger still snapshots it, but it is no page.
func (e *EventLine) Level() string {
	c := e.Class()
	if c == EventIncident && e.Get("class") == "application error" {
		c = EventNotable
	}
	return levels[c]
}

// levels names each event class as the level= field.
var levels = [...]string{EventRoutine: "info", EventNotable: "warning", EventIncident: "critical"}

// Line is the event as one events.log line, without its newline.
func (e *EventLine) Line() string {
	var b strings.Builder
	enc := logfmt.NewEncoder(&b)
	kv := func(k, v string) {
		// Keys are the logger's own words and values strings: neither
		// can fail to encode.
		_ = enc.EncodeKeyval(k, v)
	}
	kv("time", e.Time.UTC().Format(TimestampLayout))
	kv("host", e.Host)
	if e.UUID != "" {
		kv("uuid", e.UUID)
	}
	kv("level", e.Level())
	if e.GPU >= 0 {
		kv("gpu", strconv.Itoa(e.GPU))
	} else {
		kv("gpu", "?")
	}
	if e.Bus != "" {
		kv("bus", e.Bus)
	}
	if e.Source != "" {
		kv("source", e.Source)
	}
	kv("type", e.Type)
	for _, f := range e.Fields {
		// An empty value reads in logfmt as a key alone, which strict
		// consumers take for a flag: a field with nothing to say is left out.
		if f.Value != "" {
			kv(f.Key, f.Value)
		}
	}
	if e.Incident != "" {
		kv("incident", e.Incident)
	}
	if e.Snapshot != "" {
		kv("snapshot", e.Snapshot)
	}
	if e.Job != "" {
		kv("job", e.Job)
	}
	return b.String()
}

// ParsedLine is one events.log line taken apart.
type ParsedLine struct {
	Time time.Time         // time=, or an older line's leading timestamp
	KV   map[string]string // every other key=value, quotes undone
}

// Type is the line's type= field: Xid, GPU_LOST, TDP_CHANGE, AER, ...
func (e ParsedLine) Type() string { return e.KV["type"] }

// ParseEventLine takes an events.log line apart: logfmt with time= (as
// Line writes it), or an older version's line that starts with a bare
// timestamp (parseOlderEventLine). A key without a value reads as ""
// (logfmt does not tell them apart). ok is false for a line that is not
// logfmt, or has a bad or no time, or no type.
func ParseEventLine(line string) (e ParsedLine, ok bool) {
	if ts, rest, found := strings.Cut(line, " "); found && !strings.Contains(ts, "=") {
		return parseOlderEventLine(ts, rest)
	}
	d := logfmt.NewDecoder(strings.NewReader(line))
	if !d.ScanRecord() {
		return ParsedLine{}, false
	}
	e.KV = map[string]string{}
	for d.ScanKeyval() {
		k, v := string(d.Key()), d.Value()
		if k == "time" {
			t, err := time.Parse(TimestampLayout, string(v))
			if err != nil {
				return ParsedLine{}, false
			}
			e.Time = t
			continue
		}
		e.KV[k] = string(v)
	}
	if d.Err() != nil || d.ScanRecord() || e.Time.IsZero() || e.Type() == "" {
		return ParsedLine{}, false
	}
	return e, true
}

// parseOlderEventLine takes apart a line written before time= (versions
// before d800c48): "<timestamp> key=value key="quoted value" ...", its
// quoted values written by strconv.Quote. It is not logfmt: those values
// hold Go's escapes (\x1b, \a, \xff: the kernel's \xNN bytes, which
// kmsg undoes), which go-logfmt refuses, so they are undone the way they
// were written.
func parseOlderEventLine(ts, rest string) (e ParsedLine, ok bool) {
	t, err := time.Parse(TimestampLayout, ts)
	if err != nil {
		return ParsedLine{}, false
	}
	e = ParsedLine{Time: t, KV: map[string]string{}}
	for rest != "" {
		rest = strings.TrimLeft(rest, " ")
		eq := strings.IndexByte(rest, '=')
		if eq <= 0 {
			break
		}
		key := rest[:eq]
		if strings.ContainsAny(key, " \"") {
			return ParsedLine{}, false
		}
		rest = rest[eq+1:]
		var val string
		if strings.HasPrefix(rest, `"`) {
			q, err := strconv.QuotedPrefix(rest)
			if err != nil {
				return ParsedLine{}, false
			}
			val, _ = strconv.Unquote(q)
			rest = rest[len(q):]
		} else {
			val, rest, _ = strings.Cut(rest, " ")
		}
		e.KV[key] = val
	}
	if e.Type() == "" {
		return ParsedLine{}, false
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
// set EventLine.Type to one, readers compare a line's Type with them, and
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
	TypeSXid                  = "SXid"                    // kernel: an NVSwitch's SXid (switch=, sxid=, name=, severity=); the switch's, not a GPU's
	TypeUncleanStop           = "UNCLEAN_STOP"            // the previous run did not stop cleanly (written at start)
	TypeTDPChange             = "TDP_CHANGE"              // the enforced power limit changed
	TypePState                = "PState"                  // NVML P-state change event
	TypeClock                 = "Clock"                   // NVML clock change event
	TypeClockBurst            = "ClockBurst"              // clock events past the burst limit: the rest of the second is not written
	TypeGPUEnumeratedAgain    = "GPU_ENUMERATED_AGAIN"    // a vanished GPU is in the driver's enumeration again
	TypeKernelLinesSuppressed = "KERNEL_LINES_SUPPRESSED" // kernel lines over the burst limit in the last window
	TypeXidLinesSuppressed    = "XID_LINES_SUPPRESSED"    // an application's Xids (13, 31, 43, ...) of one code over the burst limit in the last window (xid=, lines=)
	TypeHealthBaseline        = "HEALTH_BASELINE"         // a GPU's first health counter reading, every counter present
	TypeHealth                = "HEALTH"                  // a health counter changed (counter=, link= for NVLink, from=, to=)
	TypeHealthWarning         = "HEALTH_WARNING"          // a hardware health warning began (reason=)
	TypeHealthCritical        = "HEALTH_CRITICAL"         // a critical hardware health condition began (reason=): a crash snapshot
	TypeHealthEvent           = "HEALTH_EVENT"            // an NVML hardware health event (event=, severity=critical|notable)
	TypeOpEvent               = "OP_EVENT"                // an NVML GPU operational event without a legacy Xid (severity=, attributes=, ...; critical= when fatal or uncontained)
	TypeInventory             = "INVENTORY"               // at start: a board of the previous run missing, new, or at another index or bus id (change=)
	TypeGPUMissing            = "GPU_MISSING"             // at start: a board of the previous run is not enumerated, or fewer GPUs than --expect-gpus (detail=)
	TypeAction                = "ACTION"                  // a GPU's repair action changed (action=, from=, reason=)
	TypeAck                   = "ACK"                     // an operator acknowledged a GPU's action (action=, by=, note=, classes=)
	TypeFanGuard              = "FAN_GUARD"               // the fan guard took, changed, handed back a fan, or was refused (kind=engaged|set|released|refused|hung)
	TypeCPER                  = "CPER"                    // a Common Platform Error Record from the driver or the host's BERT (record_id=, severity=, sections=, file=)
	TypeFabricService         = "FABRIC_SERVICE"          // a fabric daemon stopped or started running (service=, state=stopped|running, pid=)
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
	TypeSXid:                  EventNotable, // a switch's error: the GPUs behind it report their own Xids
	TypeUncleanStop:           EventIncident,
	TypeTDPChange:             EventNotable,
	TypeNVMLRecovered:         EventRoutine,
	TypePState:                EventRoutine,
	TypeClock:                 EventRoutine,
	TypeClockBurst:            EventRoutine,
	TypeGPUEnumeratedAgain:    EventRoutine,
	TypeKernelLinesSuppressed: EventRoutine,
	TypeXidLinesSuppressed:    EventRoutine,
	TypeHealthBaseline:        EventRoutine,
	TypeHealth:                EventNotable,
	TypeHealthWarning:         EventNotable,
	TypeHealthCritical:        EventIncident,
	TypeHealthEvent:           EventIncident,
	TypeOpEvent:               EventIncident,
	TypeInventory:             EventNotable,  // routine for a board new, moved or identified, a VBIOS, driver or maximum link change (classOf)
	TypeGPUMissing:            EventIncident, // a board gone since the previous run: a page (its evidence is the boot log, when there is one)
	TypeAction:                EventNotable,  // what the events already written ask for: no incident of its own
	TypeAck:                   EventRoutine,
	TypeFanGuard:              EventNotable, // routine for a change of speed and a hand-back (classOf)
	TypeCPER:                  EventNotable,
	TypeFabricService:         EventNotable, // routine when a daemon starts (classOf)
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
// notable, as is an operational event neither fatal nor uncontained. An INVENTORY line is notable for a board gone missing, routine
// for one new, moved or identified.
func (e ParsedLine) Class() EventClass {
	return classOf(func(k string) string { return e.KV[k] })
}

// classOf is the class of the event whose fields get returns.
func classOf(get func(key string) string) EventClass {
	typ := get("type")
	c := eventClasses[typ]
	if ch := get("change"); typ == TypeInventory && (ch == InventoryNew || ch == InventoryMoved || ch == InventoryIdentified || ch == InventoryVBIOS || ch == InventoryDriver || ch == InventoryPCIeMax) {
		return EventRoutine
	}
	if typ == TypeFabricService && get("state") == FabricServiceRunning {
		return EventRoutine // a daemon back; its stop was the notable line
	}
	if k := get("kind"); typ == TypeFanGuard && (k == "set" || k == "released") {
		return EventRoutine // the guard at work; taking the fans, a refusal and a hang are notable
	}
	if c == EventIncident && (get("duplicate_of") != "" ||
		typ == TypeAER && !strings.HasPrefix(get("severity"), "uncorrectable") ||
		typ == TypeHealthEvent && get("severity") != "critical" ||
		typ == TypeOpEvent && get("critical") == "") {
		return EventNotable
	}
	return c
}
