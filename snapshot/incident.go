package snapshot

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/action"
	"github.com/gpu-telemetry/gpu-telemetry/internal/cooldown"
	"github.com/gpu-telemetry/gpu-telemetry/sink"
)

// maxIncidentEvents bounds the events an incident keeps for its snapshots
// and follow-ups (a crash floods 30 to 50 Xids); later ones are counted.
const maxIncidentEvents = 200

// crashState is one GPU's crash cooldown and its current incident, under
// the Manager's lock.
type crashState struct {
	cool       cooldown.Cooldown
	inc        *incident // the current or last incident; nil before the first
	lastBase   string    // the base name of its last crash snapshot
	sameBase   int       // how many snapshots took lastBase
	suppressed uint64    // suppressed in total
}

// decide is the crash cooldown and escalation decision for the GPU's
// critical event ev at now, with no clock, lock or I/O. The first event
// outside the cooldown begins an incident and takes a snapshot. Inside it,
// an event of a worse Stage, or asking for more (Asks), than every event
// the incident captured takes its own (an escalation); the others are
// suppressed. Every event is kept in the incident's list. An accepted
// snapshot's name is taken here, in the order the events came (the same
// millisecond as the one before gets "-2"), and the incident names it at
// once (Lost takes it back).
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
	if !ok {
		// An escalation is not a suppression: it must not use up the
		// burst's logged suppressions (Decide logs the first few).
		st.cool.Pass()
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
// cooldown ends. Manager.mu guards it.
type incident struct {
	id       string    // the base name of the snapshot that began it (events.log's incident=)
	newest   string    // the path of its newest snapshot
	onDisk   bool      // a snapshot of it was written (its follow-ups are taken)
	start    time.Time // the first event's time
	events   []Event
	dropped  uint64 // events beyond maxIncidentEvents
	captured []Event
	stage    Stage         // the worst stage captured
	asks     action.Action // the most asked for by an event captured
	// The follow-ups' context, from Decide; cancelled by a newer incident,
	// Lost, Close, or the end of its follow-ups.
	follow     context.Context
	stopFollow context.CancelCauseFunc
}

// add records ev; it reports whether ev escalates the incident (first: it
// begins it), which then counts it as captured, and its index in the list
// (-1 beyond maxIncidentEvents).
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

// headline names the incident by its worst events, in the order they came,
// then what it started with: "GSP RPC Timeout (Xid 119), then GPU has fallen
// off the bus (Xid 79); started with Internal micro-controller halt (Xid
// 62)". With one event captured it is that event.
func (in *incident) headline() string {
	var whats []string
	for _, c := range in.captured {
		whats = append(whats, c.what())
	}
	if len(whats) < 2 {
		return strings.Join(whats, "")
	}
	return strings.Join(whats[1:], ", then ") + "; started with " + whats[0]
}

// eventsSection lists the incident's events so far, each with its time, its
// offset from the incident's start, and the snapshot it took; the event at
// self (-1: none) is the one of the file being written.
func (in *incident) eventsSection(self int) Section {
	var b strings.Builder
	for i, e := range in.events {
		// The offset from the incident's start, to the millisecond: "+2.000s".
		fmt.Fprintf(&b, "%s %+.3fs %s", e.Time.Format(sink.TimestampLayout), e.Time.Sub(in.start).Seconds(), e.Reason)
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
