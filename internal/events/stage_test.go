package events

import (
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/internal/counters"
	"github.com/gpu-telemetry/gpu-telemetry/internal/kclock"
	"github.com/gpu-telemetry/gpu-telemetry/kmsg"
	"github.com/gpu-telemetry/gpu-telemetry/reading"
	"github.com/gpu-telemetry/gpu-telemetry/sink"
	"github.com/gpu-telemetry/gpu-telemetry/snapshot"
)

// kernelXid is the event the kernel log reader makes of an Xid line on GPU
// 0 received at t (kmsg.XidReport.Events), of kind.
func kernelXid(t *testing.T, kind reading.EventKind, msg string, at time.Time, rec kmsg.Record) reading.Event {
	t.Helper()
	x, ok := kmsg.ParseXid(msg)
	if !ok {
		t.Fatalf("not an Xid line: %q", msg)
	}
	rec.Message = msg
	for _, e := range x.Events(rec, at) {
		if e.Kind == kind {
			e.GPU = 0
			return e
		}
	}
	t.Fatalf("no event of kind %d in %q", kind, msg)
	return reading.Event{}
}

// TestStageRecords: what the stage makes of each kind of event, in one
// record: lines, incident, alert, live view, flag.
func TestStageRecords(t *testing.T) {
	logged := t0.Add(-time.Hour)
	clock := kclock.Anchored(t0, 2*time.Hour)
	healthEvent := func(typ uint64) (string, bool) { return "DoubleBitEccError", typ == 2 }
	s := NewStage(Config{Counters: counters.New(), DedupWindow: 5 * time.Second, KernelClock: clock, HealthEvent: healthEvent})
	xid79 := kernelXid(t, reading.EventXid, "NVRM: Xid (PCI:0000:01:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.", t0, kmsg.Record{Time: 3600 * time.Second})
	r := s.Handle(xid79)
	if len(r.Lines) != 1 || r.Lines[0].Type != sink.TypeXid || r.Critical == nil || r.Duplicate || !r.Wake || !r.FlagXid || r.Alert != Error {
		t.Fatalf("kernel Xid 79: %+v", r)
	}
	if r.Critical.Stage != snapshot.StageLost || !r.Critical.Time.Equal(t0) || !strings.HasPrefix(r.Reason, "Xid 79: ") || r.Xid.Code != 79 {
		t.Errorf("Xid 79's incident %+v, reason %q, explained %d", r.Critical, r.Reason, r.Xid.Code)
	}
	if got := r.Lines[0].Line(); !strings.Contains(got, " ktime=3600.000000 ") || !strings.Contains(got, ` text="NVRM: Xid (PCI:0000:01:00): 79,`) {
		t.Errorf("line %s: want its ktime and text", got)
	}
	if r.Kind != reading.EventXid || r.Code != 79 || !r.At.Equal(t0) {
		t.Errorf("report for the live view: %v %d at %v, want Xid 79 at the event", r.Kind, r.Code, r.At)
	}

	// NVML's report of it a second later is a duplicate: its line only.
	dup := s.Handle(reading.Event{Time: t0.Add(time.Second), GPU: 0, Kind: reading.EventXid, Source: reading.SourceNVML, Data: 79})
	if !dup.Duplicate || dup.Critical != nil || dup.Wake || dup.FlagXid || dup.Alert != Quiet || !strings.Contains(dup.Lines[0].Line(), " duplicate_of=kmsg") {
		t.Errorf("NVML's duplicate: %+v", dup)
	}

	// A replayed Xid 154 naming drain P2P: its recovery action is a notice,
	// of when the kernel logged it, with the driver's words; no row flag.
	rec := kmsg.Record{Time: clock.At(logged), Backlog: true}
	msg := "NVRM: Xid (PCI:0000:01:00): 154, GPU recovery action changed from 0x0 (None) to 0x3 (Drain P2P)"
	rv := s.Handle(kernelXid(t, reading.EventRecovery, msg, t0, rec))
	if rv.Alert != Notice || rv.FlagXid || !rv.Wake || rv.Critical == nil || !rv.Critical.Time.Equal(logged) {
		t.Errorf("replayed recovery action: %+v", rv)
	}
	if got := rv.Lines[0].Line(); !strings.Contains(got, ` driver="Drain P2P" `) || !strings.HasSuffix(got, " backlog=true") {
		t.Errorf("recovery line %s: want the driver's words, backlog last", got)
	}
	x154 := s.Handle(kernelXid(t, reading.EventXid, msg, t0, rec))
	if !x154.Xid.HasRecovery || x154.Xid.Recovery != 3 || x154.FlagXid {
		t.Errorf("replayed Xid 154: explained %+v, flag %v", x154.Xid, x154.FlagXid)
	}

	// A critical health event: an incident, no report of the GPU's own.
	h := s.Handle(reading.Event{Time: t0, GPU: 0, Kind: reading.EventHealth, Source: reading.SourceNVML, NVMLType: 2})
	if h.Critical == nil || h.Critical.Reason != "NVML event: DoubleBitEccError" || h.Wake || h.Alert != Quiet {
		t.Errorf("double-bit ECC event: %+v", h)
	}

	if got, want := counted(s), map[string]uint64{"nvml_events": 2, "kmsg_xids": 2, "kmsg_backlog_xids": 1, "duplicate_xids": 1}; !maps.Equal(got, want) {
		t.Errorf("counted %v, want %v", got, want)
	}
}

// TestStageOperationalEvents: an operational event without a legacy Xid is
// an OP_EVENT line with its fields, an incident when fatal or uncontained;
// one with a legacy Xid is that Xid (its fields on the Xid line), and the
// kernel's report of the same Xid is its duplicate; overflow is counted.
func TestStageOperationalEvents(t *testing.T) {
	s := NewStage(Config{Counters: counters.New(), DedupWindow: 5 * time.Second})
	op := func(at time.Duration, kind reading.EventKind, data uint64, o reading.OpEvent) reading.Event {
		return reading.Event{Time: t0.Add(at), GPU: 0, Kind: kind, Source: reading.SourceOpEvent, Data: data, Op: &o}
	}
	for _, tc := range []struct {
		name     string
		o        reading.OpEvent
		critical bool
	}{
		{"corrected", reading.OpEvent{Fields: []string{"severity", "corrected", "attributes", "none"}}, false},
		{"fatal", reading.OpEvent{Fields: []string{"severity", "fatal", "attributes", "none"}, Critical: "fatal"}, true},
		{"uncontained", reading.OpEvent{Fields: []string{"severity", "recoverable", "attributes", "uncontained"}, Critical: "uncontained"}, true},
		{"unknown severity", reading.OpEvent{Fields: []string{"severity", "45", "attributes", "overflow"}, Overflow: true}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := s.Handle(op(0, reading.EventOperational, 7, tc.o))
			if len(r.Lines) != 1 || r.Lines[0].Type != sink.TypeOpEvent || (r.Critical != nil) != tc.critical || r.Wake || r.FlagXid {
				t.Fatalf("record %+v", r)
			}
			line := r.Lines[0].Line()
			for i := 0; i < len(tc.o.Fields); i += 2 {
				if !strings.Contains(line, " "+tc.o.Fields[i]+"="+tc.o.Fields[i+1]) {
					t.Errorf("line %s lacks %s=%s", line, tc.o.Fields[i], tc.o.Fields[i+1])
				}
			}
			p, _ := sink.ParseEventLine(line)
			if want := map[bool]sink.EventClass{true: sink.EventIncident, false: sink.EventNotable}[tc.critical]; p.Class() != want {
				t.Errorf("line %s: class %d, want %d", line, p.Class(), want)
			}
			if tc.critical && (r.Alert != Error || r.Critical.Stage != snapshot.StageFault) {
				t.Errorf("critical record %+v", r)
			}
		})
	}
	x := s.Handle(op(time.Minute, reading.EventXid, 79, reading.OpEvent{Fields: []string{"severity", "fatal", "context0", "legacy_xid,source_type:1,size:4,version:1,xid:79"}, Critical: "fatal"}))
	if x.Critical == nil || x.Duplicate || !x.Wake || x.Lines[0].Type != sink.TypeXid || !strings.Contains(x.Lines[0].Line(), " xid=79 ") ||
		!strings.Contains(x.Lines[0].Line(), " source=nvml-op ") || !strings.Contains(x.Lines[0].Line(), ",xid:79") {
		t.Fatalf("operational Xid 79: %+v %s", x, x.Lines[0].Line())
	}
	k := s.Handle(kernelXid(t, reading.EventXid, "NVRM: Xid (PCI:0000:01:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.", t0.Add(time.Minute+time.Second), kmsg.Record{Time: time.Hour}))
	if !k.Duplicate || k.Critical != nil || !strings.Contains(k.Lines[0].Line(), " duplicate_of=nvml-op") {
		t.Errorf("the kernel's Xid 79 after the operational one: %+v", k)
	}
	if got := counted(s); got["op_event_overflows"] != 1 || got["nvml_events"] != 5 || got["duplicate_xids"] != 1 {
		t.Errorf("counted %v", got)
	}
}

// counted returns the counters that are not 0 in the registry the stage
// was given, by name.
func counted(s *Stage) map[string]uint64 {
	out := map[string]uint64{}
	for _, v := range s.counts.Read() {
		if v.Value != 0 {
			out[v.Name] = v.Value
		}
	}
	return out
}

// TestStageClockBurst: a burst's first few clock events have their line,
// its tenth the burst line, the others none.
func TestStageClockBurst(t *testing.T) {
	s := NewStage(Config{Counters: counters.New()})
	var lines, bursts int
	for i := range 12 {
		r := s.Handle(reading.Event{Time: t0.Add(time.Duration(i) * time.Millisecond), Kind: reading.EventClock, Source: reading.SourceNVML})
		lines += len(r.Lines)
		if r.Burst > 0 {
			bursts++
			if r.Burst != ClockBurstMark || r.Lines[len(r.Lines)-1].Type != sink.TypeClockBurst {
				t.Errorf("burst record %+v", r)
			}
		}
	}
	if lines != 4 || bursts != 1 {
		t.Errorf("%d lines, %d bursts; want 3 clock lines and one burst line", lines, bursts)
	}
}

// TestStagePollTextIsWritten: an event of the poll loop carries its own words
// (a GPU vanished from the enumeration): its line has them as text=, without
// a ktime (it is no kernel record).
func TestStagePollTextIsWritten(t *testing.T) {
	s := NewStage(Config{Counters: counters.New()})
	r := s.Handle(reading.Event{Time: t0, GPU: 1, Kind: reading.EventLost, Source: reading.SourcePoll, Text: "GPU vanished from enumeration (GPU-b)"})
	if len(r.Lines) != 1 || r.Critical == nil {
		t.Fatalf("vanished GPU: %+v", r)
	}
	got := r.Lines[0].Line()
	if !strings.HasSuffix(got, `type=GPU_LOST text="GPU vanished from enumeration (GPU-b)"`) || strings.Contains(got, "ktime=") {
		t.Errorf("line %s: want its text, no ktime", got)
	}
}
