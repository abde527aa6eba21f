package events

import (
	"strconv"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/internal/counters"
	"github.com/gpu-telemetry/gpu-telemetry/internal/kclock"
	"github.com/gpu-telemetry/gpu-telemetry/kmsg"
	"github.com/gpu-telemetry/gpu-telemetry/reading"
	"github.com/gpu-telemetry/gpu-telemetry/sink"
	"github.com/gpu-telemetry/gpu-telemetry/snapshot"
	"github.com/gpu-telemetry/gpu-telemetry/xid"
)

// Stage is the event path's one stage: every GPU event, from NVML's event
// sets, the kernel log or the poll loop, goes through Handle once, which
// merges the two sources' reports of one Xid (Dedup), collapses clock
// bursts (ClockBurst), explains Xids and recovery actions from the detail
// their source parsed (reading.Event.Xid) and returns the Record of what the
// event makes; a kernel AER or NVRM failure line goes through KernelLine,
// which bounds them (LineLimit), as Handle bounds an application's Xids
// (xidLimit). It counts what arrives (counters.go). It holds
// no GPU and does no I/O: the caller writes the lines, takes the incident
// to its incident desk and shows the report in the live view. It is safe
// for concurrent use.
type Stage struct {
	dedup  Dedup
	clocks ClockBurst
	limit  LineLimit // kernel lines per GPU and kind a minute (KernelLine)
	xids   LineLimit // an application's Xids per GPU and code a minute (xidLimit)
	clock  kclock.Clock
	health func(nvmlType uint64) (name string, critical bool)
	counts *counters.Registry // Config.Counters
}

// Config is what a Stage is built with.
type Config struct {
	// DedupWindow is how far apart NVML's and the kernel log's reports of
	// one Xid may come and still be one (Dedup.Window).
	DedupWindow time.Duration
	// KernelClock is the kernel log's clock: when a kernel record read
	// after the fact happened (kclock.Clock.LoggedAt). The zero Clock:
	// such a record happened when it was read.
	KernelClock kclock.Clock
	// HealthEvent names an NVML health event type and says whether it is
	// critical (sampler.HealthEvent: the sampler knows NVML's types).
	// nil: every health event is unnamed and not critical.
	HealthEvent func(nvmlType uint64) (name string, critical bool)
	// Counters is the registry the stage counts in (counters.go). Required.
	Counters *counters.Registry
}

// NewStage returns a Stage with c.
func NewStage(c Config) *Stage {
	return &Stage{dedup: Dedup{Window: c.DedupWindow}, clock: c.KernelClock, health: c.HealthEvent,
		counts: counters.Need(c.Counters, "events.Config.Counters")}
}

// Alert says what the daemon's log says of an event besides its events.log
// line.
type Alert uint8

// Alerts.
const (
	Quiet  Alert = iota // nothing: the line says it
	Notice              // a warning: a report of the consequence of other events (Xid 45 or 154, a recovery action)
	Error               // an error: a critical GPU event
)

// Record is what the Stage makes of one event: what to write, what to count
// in an incident, what to show and what to log. The caller only carries it
// out, for the GPU the event names when that GPU is monitored.
type Record struct {
	// Lines are the event's events.log lines, in order, without what the
	// writer adds (host, UUID, job) and without the incident and snapshot
	// the incident desk decides on: none for a clock event of a burst past
	// its first few, the CLOCK_BURST line after the event's own for the
	// burst's mark. The last is the event's own line, which names the
	// incident of Critical, or for a Duplicate the first report's.
	Lines []sink.EventLine
	// Burst is, on the event that marks a clock burst, how many events its
	// window held, for the daemon's log; 0 otherwise.
	Burst int
	// Critical is the critical event this one is on its GPU, for the
	// incident desk: the incident's and crash snapshot's reason, stage and
	// time (when it happened: a kernel record read after the fact happened
	// when the kernel logged it). nil: none (not critical, or a Duplicate).
	Critical *snapshot.Event
	// Duplicate: the other source reported the same Xid (or recovery
	// action) on the GPU first, within the window: no incident of its own;
	// its line names the first report's.
	Duplicate bool
	// Alert is how the daemon's log reports the event; Reason is its words
	// there (an Xid's, a recovery action's or a lost GPU's reason).
	Alert  Alert
	Reason string
	// Wake: the event is the GPU's own report (an Xid, a recovery action,
	// the GPU lost): the live view shows it (Kind, Code, At, Seen), and the GPU is
	// sampled at the next tick even if it is backing off after failures,
	// so that the row right after shows the state it left behind.
	Wake bool
	// FlagXid: the Xid is flagged on the GPU's next row. Not for a record
	// read after the fact: it was logged before that row (events.log has it,
	// with its ktime, and report places it by that).
	FlagXid bool
	// Xid is the catalog's explanation of an Xid (EventXid only).
	Xid xid.Explanation
	// Held is, for a kernel line over the burst limit (KernelLine), its
	// kind ("AER/corrected", an NVRM line's type): not written, counted
	// (kernel_lines_suppressed); for an application's Xid over it (Handle),
	// "Xid 13": not written nor logged and no incident, but still counted
	// on its GPU (Wake, FlagXid) and in xid_lines_suppressed. FirstHeld: the
	// first since start, which the daemon's log reports with what was lost.
	Held      string
	FirstHeld bool

	// The GPU's own report a Wake record is, for its live view: its kind
	// (an Xid, a recovery action, the GPU lost), its code, when it
	// happened and when it was received.
	Kind     reading.EventKind
	Code     uint64
	At, Seen time.Time
}

// Handle runs one event through the stage and returns its record. An Xid's
// (or recovery action's) de-duplication happens here: the caller that
// decides on a first report's incident makes Handle and that decision one
// step for the GPU, so that a duplicate arriving at once from the other
// source names that incident.
func (s *Stage) Handle(e reading.Event) Record {
	s.count(e)
	line := sink.EventLine{Time: e.Time, GPU: e.GPU, Bus: e.BusID, Source: e.Source.String()}
	data := strconv.FormatUint(e.Data, 10)
	switch e.Kind {
	case reading.EventClock:
		var r Record
		n, alone, burst := s.clocks.Add(e.Time)
		if alone {
			line.Type, line.Fields = sink.TypeClock, sink.KV("data", data)
			r.Lines = append(r.Lines, line)
		}
		if burst {
			r.Burst = n
			line.Type, line.Fields = sink.TypeClockBurst, sink.KV("events", strconv.Itoa(n), "window", "1s")
			r.Lines = append(r.Lines, line)
		}
		return r
	case reading.EventPState:
		line.Type, line.Fields = sink.TypePState, sink.KV("data", data)
		return Record{Lines: []sink.EventLine{line}}
	case reading.EventOther:
		line.Type, line.Fields = "0x"+strconv.FormatUint(e.NVMLType, 16), sink.KV("data", data)
		return Record{Lines: []sink.EventLine{line}}
	case reading.EventOperational:
		return s.operational(e, line)
	case reading.EventHealth:
		var name string
		var critical bool
		if s.health != nil {
			name, critical = s.health(e.NVMLType)
		}
		sev := "notable"
		if critical {
			sev = "critical"
		}
		line.Type, line.Fields = sink.TypeHealthEvent, sink.KV("event", name, "severity", sev, "data", data)
		r := Record{Lines: []sink.EventLine{line}}
		if critical {
			r.Critical = &snapshot.Event{Time: e.Time, Reason: "NVML event: " + name, Stage: snapshot.StageFault}
		}
		return r
	}
	return s.report(e, line)
}

// count counts e by its source: an Xid of the kernel log is one a line (its
// Xid 154's recovery action is not another).
func (s *Stage) count(e reading.Event) {
	switch {
	case e.Source == reading.SourceNVML || e.Source == reading.SourceOpEvent:
		s.counts.Inc(nvmlEvents)
		if e.Op != nil && e.Op.Overflow {
			s.counts.Inc(opOverflows)
		}
	case e.Source == reading.SourceKmsg && e.Kind == reading.EventXid:
		s.counts.Inc(kmsgXids)
		if e.Backlog {
			s.counts.Inc(kmsgBacklogXids)
		}
	}
}

// report is Handle for a GPU's own report: an Xid, a recovery action, the
// GPU lost. Each is critical unless the other source reported it first.
func (s *Stage) report(e reading.Event, line sink.EventLine) Record {
	dup, first := s.dedup.Duplicate(e)
	// A record read after the fact still takes its snapshot (the GPU may
	// still be broken: its state now is the evidence left), and says so.
	from := e.Source.String()
	if e.Backlog {
		kt := KernelTimeField(e.KernelTime)
		from += " backlog, logged at " + kt.Key + "=" + kt.Value
	}
	r := Record{Kind: e.Kind, Code: e.Data, Seen: e.Time}
	var ev snapshot.Event
	switch e.Kind {
	case reading.EventXid:
		// The catalog reads the driver's text after the code (NVLink 5
		// fields, Xid 154's action), as the source parsed it; an NVML
		// report has none.
		r.Xid = xid.ExplainDetail(int(e.Data), e.Xid)
		line.Type, line.Fields = sink.TypeXid, sink.KV(r.Xid.Fields()...)
		if e.Op != nil { // an operational event's legacy Xid: its fields too
			line.Fields = append(line.Fields, sink.KV(e.Op.Fields...)...)
		}
		r.Reason = r.Xid.Reason(from)
		ev = snapshot.XidEvent(e.Time, r.Xid, r.Reason)
	case reading.EventRecovery:
		words := e.Xid.RecoveryWords
		line.Type, line.Fields = sink.TypeRecoveryAction, sink.KV(xid.RecoveryFields(e.Data, words)...)
		r.Reason = xid.RecoveryReason(e.Data, words, from)
		ev = snapshot.RecoveryEvent(e.Time, e.Data, r.Reason)
	case reading.EventLost:
		line.Type = sink.TypeGPULost
		r.Reason = "GPU lost (" + e.Source.String() + ")"
		ev = snapshot.Event{Time: e.Time, What: "GPU lost", Reason: r.Reason, Stage: snapshot.StageLost}
	}
	var dupOf []sink.Field
	if dup {
		s.counts.Inc(duplicateXids)
		dupOf = []sink.Field{{Key: "duplicate_of", Value: first.String()}}
	}
	line.Fields = lineTail(line.Fields, e.Source == reading.SourceKmsg, kmsg.Record{Time: e.KernelTime, Message: e.Text, Backlog: e.Backlog}, dupOf...)
	held := s.xidLimit(e, ev, dup, &r)
	r.At = s.clock.LoggedAt(e.Time, e.KernelTime, e.Backlog)
	if held {
		// Still the GPU's Xid: its count, last Xid and row flag.
		r.Wake, r.FlagXid = !dup, !dup && !e.Backlog
		return r
	}
	r.Lines = append(r.Lines, line)
	if dup {
		r.Duplicate = true
		return r
	}
	ev.Time = r.At
	r.Critical = &ev
	r.Wake, r.FlagXid = true, e.Kind == reading.EventXid && !e.Backlog
	r.Alert = Error
	if ev.Stage == snapshot.StageNotice {
		// Xid 45 or 154, a recovery action: the consequence of other
		// events, which are the critical ones.
		r.Alert = Notice
	}
	return r
}

// operational is Handle for a GPU operational event that carries no legacy
// Xid: its OP_EVENT line with every field, critical when fatal or
// uncontained (a fatal or uncontained one with a legacy Xid is that Xid's
// incident, report).
func (s *Stage) operational(e reading.Event, line sink.EventLine) Record {
	line.Type, line.Fields = sink.TypeOpEvent, sink.KV(e.Op.Fields...)
	if e.Op.Critical != "" {
		line.Fields = append(line.Fields, sink.Field{Key: "critical", Value: e.Op.Critical})
	}
	r := Record{Lines: []sink.EventLine{line}}
	if e.Op.Critical != "" {
		r.Reason = "GPU operational event (" + e.Op.Critical + ")"
		r.Alert = Error
		r.Critical = &snapshot.Event{Time: e.Time, What: "GPU operational event", Reason: r.Reason, Stage: snapshot.StageFault}
	}
	return r
}

// KernelTimeField is the events.log field of a kernel line's printk
// timestamp, in seconds as dmesg prints it: `gpu-telemetry report` places
// the line among the rows by their dmesg_time (same clock), not by when it
// was read.
func KernelTimeField(t time.Duration) sink.Field {
	return sink.Field{Key: "ktime", Value: strconv.FormatFloat(t.Seconds(), 'f', 6, 64)}
}

// lineTail appends what ends the events.log line of an event, after the
// fields of what it reports: for a kernel log record (kernel) its printk
// timestamp (ktime); the source's text (rec.Message: a kernel record's, or
// a poll event's own words, as a GPU vanished from the enumeration); more (a
// duplicate's duplicate_of); and backlog=true last for a record read after
// the fact. Every event's line ends so: Handle's Xids, recovery actions and
// lost GPUs, and the kernel's AER and NVRM lines (KernelLine).
func lineTail(fields []sink.Field, kernel bool, rec kmsg.Record, more ...sink.Field) []sink.Field {
	if kernel {
		// The record's own timestamp, whatever it reads: 0.000000 is a
		// time (logged before the kernel's clock ran), not "none".
		fields = append(fields, KernelTimeField(rec.Time))
	}
	if rec.Message != "" {
		// As the kernel printed it (\xNN kept): events.log is UTF-8.
		fields = append(fields, sink.Field{Key: "text", Value: kmsg.Printed(rec.Message)})
	}
	fields = append(fields, more...)
	if rec.Backlog {
		// Logged while no logger was reading, or before it was ready
		// (kmsg.Record.Backlog): the line's time is when it was read,
		// ktime when it was logged.
		fields = append(fields, sink.Field{Key: "backlog", Value: "true"})
	}
	return fields
}
