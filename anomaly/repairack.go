package anomaly

import (
	"slices"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/action"
)

// An operator's acknowledgement of a board's repair (Repair.Ack) covers
// the action acknowledged, class by class (action.History's AckedAs), not
// a greater one the same occurrence asks for later; it covers an
// occurrence begun no later than itself, on the monotonic clock where
// both are of this run (acked).

// Instant is a time on the wall clock and on the monotonic one (zero: not
// read, as for a time from the board's history, which keeps the wall
// clock only): the wall clock stamps and persists, the monotonic one
// orders and measures (a step of the wall clock, chrony's makestep or
// date -s, moves it not).
type Instant struct {
	Wall time.Time
	Mono time.Duration
}

// After reports whether i is later than j: on the monotonic clock where
// both were read on it (this run: a hang begun after an ack is not
// covered by it when the wall clock stepped back between them), on the
// wall clock otherwise and where they are one reading there (one
// judgement).
func (i Instant) After(j Instant) bool {
	if i.Mono != 0 && j.Mono != 0 && i.Mono != j.Mono {
		return i.Mono > j.Mono
	}
	return i.Wall.After(j.Wall)
}

// acked reports whether an ack covers class's current occurrence.
func (r *Repair) acked(class string) bool { return r.ackCovers(class, r.began[class]) }

// ackCovers reports whether class's last ack covers an occurrence begun at
// t: the ack was made when it had begun, or later. One begun in this run
// after its first judgement, on the monotonic clock, is after every ack
// of an earlier run of the logger (that ack has no monotonic time: the
// history keeps the wall clock only, which may have stepped back since);
// also one found when its source was first read later: one an earlier
// run counted goes on from the history's time instead (Judge).
func (r *Repair) ackCovers(class string, t Instant) bool {
	at, ok := r.hist.AckedAt(class)
	mono, thisRun := r.ackedMono[class]
	if first := r.first[srcState]; !ok || !thisRun && first.Mono != 0 && t.Mono > first.Mono {
		return false
	}
	return !t.After(Instant{at, mono})
}

// afterAck is t, on the wall clock no earlier than just after class's last
// ack: an occurrence that ack does not cover, as the history, which keeps
// the wall clock only, must have it after a restart (the wall clock held
// at the ack's time, or stepped back behind it).
func (r *Repair) afterAck(class string, t Instant) Instant {
	if at, ok := r.hist.AckedAt(class); ok && !t.Wall.After(at) {
		t.Wall = at.Add(time.Nanosecond)
	}
	return t
}

// Ack acknowledges the board's current causes at t (after a Judge): their
// classes no longer count until they begin again. It returns the action
// acknowledged and the history to write. The ack covers what the operator
// saw: it is made no earlier than the latest of those causes began (a
// reboot after an ack at watch begins just after that ack, also while the
// wall clock is held behind the last judgement and every ack is at its
// time), on the monotonic clock at the last judgement's time.
func (r *Repair) Ack(cur action.Current, t time.Time, by, note string) action.AckRecord {
	ack := action.AckRecord{Action: cur.Action, Note: note, By: by}
	mono := r.lastJudge.Mono
	for _, c := range r.last {
		if !slices.Contains(ack.Classes, c.Class) {
			ack.Classes = append(ack.Classes, c.Class)
		}
		b := r.began[c.Class]
		if b.Wall.After(t) {
			t = b.Wall
		}
		mono = max(mono, b.Mono)
	}
	ack.Time = t
	slices.Sort(ack.Classes)
	r.hist.Acknowledge(ack)
	for _, c := range r.last {
		r.hist.AckAs(c.Class, max(c.Action, r.hist.AckedAs[c.Class])) // Acknowledge left it unknown
		r.ackedGPU[c.Class] = ack.Action
		r.ackedMono[c.Class] = mono
	}
	r.dirty = true
	return ack
}

// ackedBelow reports whether an ack covers c's occurrence at an action less
// than the one c asks for now.
func (r *Repair) ackedBelow(c Cause) bool {
	a, ok := r.hist.AckedAs[c.Class]
	return ok && c.Action > a && r.acked(c.Class)
}

// ackAsOfOldFile records what an ack in a state file written before
// AckedAs was kept covered, when it covers c's occurrence that goes on:
// what c asks when a run first finds it covered. Not a reboot a hang at
// watch asks for later (unknown taken as all, a reboot would stay
// hidden), but one asked for already (taken as watch, an acknowledged
// reboot would be counted again after an upgrade). A hang's is no more
// than the GPU's action the file's last ack acknowledged when that ack
// cleared it (a hang acknowledged at watch, the logger stopped before the
// minute and restarted after it). Only a hang's: an ack cleared every
// class the GPU held, one acknowledged before too, which counts as watch
// in the GPU's action (a retired page pending, acknowledged, still held
// when an Xid 13 is acknowledged at watch), and no other class's action
// grows. A hang whose reboot was acknowledged, then acknowledged again
// at less than reboot by an ack of another class, is ambiguous in such a
// file: it asks for its reboot again, counted.
func (r *Repair) ackAsOfOldFile(c Cause) {
	if _, known := r.hist.AckedAs[c.Class]; known || !r.acked(c.Class) {
		return
	}
	as := c.Action
	if a := r.hist.Ack; c.Class == hungClass && a != nil && slices.Contains(a.Classes, c.Class) {
		if at, _ := r.hist.AckedAt(c.Class); at.Equal(a.Time) {
			as = min(as, a.Action)
		}
	}
	r.hist.AckAs(c.Class, as)
	r.dirty = true
}
