package snapshot

import (
	"context"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/internal/cooldown"
	"github.com/gpu-telemetry/gpu-telemetry/sink"
	"github.com/gpu-telemetry/gpu-telemetry/xid"
)

// Stage is how far a GPU's failure has gone. The crash cooldown holds back
// a flood of events of one stage, never the next, worse stage of the same
// failure: within an incident, an event of a stage above every one already
// captured takes its own snapshot.
type Stage int

// Stages, least severe first.
const (
	StageNotice      Stage = iota // the consequence of other events (Xid 45, 154): part of the story, never a new stage
	StageApplication              // the workload faulted (Xid 13, 31, 43: class application): the GPU is usually fine, so a hardware fault after it is a worse stage
	StageFault                    // an Xid, an NVML hang or failure, an uncorrectable AER error: how incidents start
	StageFirmware                 // the GSP firmware timed out or failed (Xid 119, 120, the driver's GSP lines)
	StageLost                     // fell off the bus, or NVML reports the GPU lost
)

// Asks is what a recovery action asks the operator to do, least first: a
// recovery action that asks for more than any event already captured in the
// incident takes its own snapshot.
type Asks int

// What recovery actions ask for.
const (
	AsksNothing    Asks = iota
	AsksDrainP2P        // recovery action 3
	AsksReset           // recovery action 1; Xids whose bucket is RESET_GPU
	AsksDrainReset      // recovery action 4
	AsksReboot          // recovery action 2; Xids whose bucket is a node restart
	AsksUnknown         // an action number this version does not know: news once
)

// Event is one critical event of a GPU as the Manager keeps it for the
// incident it belongs to.
type Event struct {
	Time   time.Time // when it happened; zero: when Decide was called
	What   string    // a few words for the headline: "GSP RPC Timeout (Xid 119)"; empty: Reason
	Reason string    // the whole reason line
	Stage  Stage
	Asks   Asks

	file string // in an incident's list: the snapshot the event took ("" none)
}

// XidEvent is the event of an Xid report: its stage from the code and the
// catalog's class, what it asks for from NVIDIA's bucket (Xid 154: from the
// new recovery action).
func XidEvent(t time.Time, e xid.Explanation, reason string) Event {
	ev := Event{Time: t, What: e.Name + " (Xid " + strconv.Itoa(e.Code) + ")", Reason: reason, Stage: StageFault}
	switch {
	case e.Code == 79:
		ev.Stage = StageLost
	case e.Code == 119 || e.Code == 120:
		ev.Stage = StageFirmware
	case e.Known && e.Class == xid.ClassInformational:
		ev.Stage = StageNotice
	case e.Known && e.Class == xid.ClassApplication:
		ev.Stage = StageApplication
	}
	switch {
	case e.HasRecovery:
		ev.Asks = RecoveryAsks(e.Recovery)
	case e.Bucket == "RESET_GPU":
		ev.Asks = AsksReset
	case e.Bucket == "RESTART_BM" || e.Bucket == "RESTART_VM": // the node, bare metal or VM
		ev.Asks = AsksReboot
		// RESTART_APP asks the application to restart: nothing of the
		// operator, and no reason to hold back the GPU's next fault.
	}
	return ev
}

// RecoveryAsks is what recovery action v asks for.
func RecoveryAsks(v uint64) Asks {
	switch v {
	case 0:
		return AsksNothing
	case 1:
		return AsksReset
	case 2:
		return AsksReboot
	case 3:
		return AsksDrainP2P
	case 4:
		return AsksDrainReset
	}
	return AsksUnknown
}

// RecoveryEvent is the event of a recovery action report: a notice that
// asks for what the action says.
func RecoveryEvent(t time.Time, v uint64, reason string) Event {
	return Event{Time: t, What: "recovery action " + strconv.FormatUint(v, 10) + " (" + xid.RecoveryActionName(v) + ")",
		Reason: reason, Stage: StageNotice, Asks: RecoveryAsks(v)}
}

// maxIncidentEvents bounds the events an incident keeps for its snapshots
// and follow-ups (a crash floods 30 to 50 Xids); later ones are counted.
const maxIncidentEvents = 200

// crashState is one GPU's crash cooldown and its current incident: what
// decide reads and updates. The Manager keeps one per GPU, under its lock.
type crashState struct {
	cool       cooldown.Cooldown
	inc        *incident // the current or last incident; nil before the first
	lastBase   string    // the base name of its last crash snapshot
	sameBase   int       // how many snapshots took lastBase
	suppressed uint64    // suppressed in total
}

// decide is the crash cooldown and escalation decision for the GPU's
// critical event ev at now: state, event and time in, decision out, with
// no clock, lock or I/O (the Manager's Decide holds the lock around it).
// The first event outside the cooldown begins an incident and takes a
// snapshot. Inside the cooldown, an event of a worse stage, or one asking
// for more (Event.Stage, Event.Asks), than every event the incident has
// captured takes its own snapshot (an escalation: at most one per stage and
// ask level); the others are suppressed. Every event is kept in the
// incident's list, which its snapshots and follow-ups show. An accepted
// snapshot's name is taken here, in the order the events came (an
// escalation in the same millisecond as the snapshot before it gets "-2"),
// and the incident names it at once (Lost takes it back).
func (st *crashState) decide(gpu int, ev Event, now time.Time, cooldown time.Duration, crashDir string) Decision {
	ok, burst, left := st.cool.Allow(now, cooldown)
	if ok || st.inc == nil {
		st.inc = &incident{start: ev.Time}
		ok = true
	}
	inc := st.inc
	escalates, idx := inc.add(ev, ok)
	d := Decision{gpu: gpu, at: now, inc: inc, idx: idx,
		Headline: inc.headline(), IncidentStart: inc.start, Incident: inc.id, Snapshot: inc.newest}
	if !escalates {
		st.suppressed++
		d.Burst, d.Suppressed, d.CooldownLeft = burst, st.suppressed, left
		return d
	}
	d.Accepted, d.Escalation, d.Suppressed, d.prevNewest = true, !ok, st.suppressed, inc.newest
	d.base = st.name(baseName("crash", now, gpu))
	inc.wrote(idx, d.base+".log") // corrected once written, should the disk hold that name already
	if inc.id == "" {
		inc.id = d.base
	}
	inc.newest = filepath.Join(crashDir, d.base+".log")
	d.Incident, d.Snapshot = inc.id, inc.newest
	return d
}

// name returns base, or base-2, base-3 ... when the GPU's last snapshot had
// the same base name (two in one millisecond).
func (st *crashState) name(base string) string {
	if base != st.lastBase {
		st.lastBase, st.sameBase = base, 1
		return base
	}
	st.sameBase++
	return base + "-" + strconv.Itoa(st.sameBase)
}

// incident is one GPU's incident: from the snapshot that began it until its
// cooldown ends. Its fields are guarded by Manager.mu.
type incident struct {
	id       string    // the base name of the snapshot that began it (events.log's incident=)
	newest   string    // the path of its newest snapshot
	start    time.Time // the first event's time
	events   []Event
	dropped  uint64 // events beyond maxIncidentEvents
	captured []Event
	stage    Stage // the worst stage captured
	asks     Asks  // the most asked for by an event captured
	// The follow-ups' context, and its cancel: set by Decide when the
	// incident begins, cancelled by a newer incident, Lost, or Close.
	follow     context.Context
	stopFollow context.CancelCauseFunc
}

// add records ev; it reports whether ev escalates the incident (a stage or
// an ask above every event captured; first: it begins the incident), which
// then counts it as captured, and its index in the list (-1 beyond
// maxIncidentEvents).
func (in *incident) add(ev Event, first bool) (escalates bool, idx int) {
	escalates = first || ev.Stage > in.stage || ev.Asks > in.asks
	if escalates {
		in.captured = append(in.captured, ev)
		in.stage, in.asks = max(in.stage, ev.Stage), max(in.asks, ev.Asks)
	}
	if len(in.events) >= maxIncidentEvents {
		in.dropped++
		return escalates, -1
	}
	in.events = append(in.events, ev)
	return escalates, len(in.events) - 1
}

// wrote notes the file the event at idx took.
func (in *incident) wrote(idx int, file string) {
	if idx >= 0 {
		in.events[idx].file = file
	}
}

// what is the event's few words.
func (e Event) what() string {
	if e.What != "" {
		return e.What
	}
	return e.Reason
}

// headline names the incident by its worst events, in the order they came,
// then what it started with: "GSP RPC Timeout (Xid 119), then GPU has fallen
// off the bus (Xid 79); started with Internal micro-controller halt (Xid
// 62)". With one event captured it is that event.
func (in *incident) headline() string {
	if len(in.captured) == 0 {
		return ""
	}
	if len(in.captured) == 1 {
		return in.captured[0].what()
	}
	var b strings.Builder
	for i, c := range in.captured[1:] {
		if i > 0 {
			b.WriteString(", then ")
		}
		b.WriteString(c.what())
	}
	return b.String() + "; started with " + in.captured[0].what()
}

// eventsSection lists the incident's events so far, each with its time, its
// offset from the incident's start, and the snapshot it took; the event at
// self (-1: none) is the one of the file being written.
func (in *incident) eventsSection(self int) Section {
	var b strings.Builder
	for i, e := range in.events {
		b.WriteString(e.Time.Format(sink.TimestampLayout) + " " + offsetFrom(in.start, e.Time) + " " + e.Reason)
		switch {
		case i == self:
			b.WriteString(" [this snapshot]")
		case e.file != "":
			b.WriteString(" [snapshot " + e.file + "]")
		}
		b.WriteByte('\n')
	}
	if in.dropped > 0 {
		b.WriteString("(" + strconv.FormatUint(in.dropped, 10) + " later events not listed)\n")
	}
	return Section{Title: "Critical events of this GPU in this incident (" + strconv.Itoa(len(in.events)+int(in.dropped)) + ")", Body: b.String()}
}

// offsetFrom is "+2.000s" (t after start) to the millisecond.
func offsetFrom(start, t time.Time) string {
	d := t.Sub(start)
	sign := "+"
	if d < 0 {
		sign, d = "-", -d
	}
	return sign + strconv.FormatFloat(d.Seconds(), 'f', 3, 64) + "s"
}
