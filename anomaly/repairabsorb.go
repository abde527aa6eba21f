package anomaly

import (
	"slices"

	"github.com/gpu-telemetry/gpu-telemetry/action"
)

// Absorb takes into r what early counted in this boot from the board's
// state (a loss, a hang, every call failing, a recovery action): early is
// the same GPU's judge while its UUID was not known (a GPU stuck at start),
// without its history; r is its board's, read once the UUID is. A class
// early found at its first judgement that this boot's history holds
// already goes on from an earlier run of the logger in this boot (its
// count and any acknowledgement stand, as NewRepair takes it up); the
// others began in this run and are counted. Each occurrence is counted
// once: early's counts are told by when each began, on the monotonic
// clock (Instant.After), as the classes active at early's last judgement
// are by when they began; of a class the history holds, those begun after
// the first judgement are added, not the one going on then (the earlier
// run counted it), also after a step of the wall clock back behind the
// first judgement (recorded after an ack that does not cover it, as begin
// does). Xid classes are not taken:
// their events are given to r again (Xid). The acknowledgements made of
// early (by the GPU's index) are the board's: each class as of when it was
// acknowledged, the occurrence acknowledged still covered while it goes on
// (a hang at watch still stuck when the UUID reads); but not a class that
// the board's history escalates beyond the action acknowledged (a repair
// seen in inspectAfter earlier boots: Inspect, where early, without the
// history, asked for a reboot). An ack covers the action acknowledged,
// not a greater one: with the UUID known the board would have asked for
// Inspect, and an ack of less been refused.
// Those classes are returned (sorted), the board's to acknowledge itself.
// The history is then to be written.
func (r *Repair) Absorb(early *Repair) (escalated []string) {
	// One run: what began in it after early's first judgement that read
	// its source is after every ack of an earlier run (ackCovers).
	r.read, r.first = early.read, early.first
	if a := early.hist.Ack; a != nil { // made in this run: later than any in the board's history
		for class := range early.hist.Acked { // before Acknowledge: the earlier boots as they count now
			if early.hist.AckedAs[class].Drains() && early.ackedGPU[class] < action.Inspect && r.earlierBoots(class) >= r.inspectAfter {
				escalated = append(escalated, class)
			}
		}
		slices.Sort(escalated)
		ack := *a
		ack.Classes = slices.DeleteFunc(slices.Clone(a.Classes), func(c string) bool { return slices.Contains(escalated, c) })
		r.hist.Acknowledge(ack)
		for class, at := range early.hist.Acked { // an earlier ack's classes at their own time
			if slices.Contains(escalated, class) {
				continue
			}
			if at.After(r.hist.Acked[class]) {
				r.hist.Acked[class] = at
			}
			if at.Equal(r.hist.Acked[class]) { // what it covered, and when on the monotonic clock, go with the time that stands
				if a, ok := early.hist.AckedAs[class]; ok {
					r.hist.AckAs(class, a)
				}
				r.ackedMono[class] = early.ackedMono[class]
			}
		}
		r.dirty = true
	}
	eb := early.hist.Boot(early.boot)
	if b := r.hist.Boot(r.boot); eb.Answered && !b.Answered { // it came back in this boot before its UUID was read
		b.Answered, r.dirty = true, true
	}
	for class, c := range eb.Classes {
		if _, isXid := xidClass(class); isXid || c.Count == 0 {
			continue
		}
		n := c.Count
		if _, known := r.began[class]; known {
			n = early.countedNew[class] // the one found at the first judgement goes on from the earlier run, which counted it
		}
		if n == 0 {
			continue
		}
		last := early.countedAt[class] // the last count: one after the first judgement's, if any
		if !r.ackCovers(class, last) { // as begin: recorded after an ack that does not cover it
			last = r.afterAck(class, last)
		}
		b := r.hist.Boot(r.boot)
		if b.Classes == nil {
			b.Classes = map[string]action.ClassCount{}
		}
		was := b.Classes[class]
		was.Count += n
		if last.Wall.After(was.Last) {
			was.Last = last.Wall
		}
		b.Classes[class] = was
		r.began[class], r.counted[class] = last, true
		r.dirty = true
	}
	// The state classes active at early's last judgement go on in r from
	// when early saw them begin, those no history counts too (a hang at
	// watch): an ack made of early covers the occurrence acknowledged
	// while it goes on (a hang still stuck when the UUID reads), and Judge
	// takes one that began again since for a new one. One the history
	// knows goes on from the earlier run only if early found it at its
	// first judgement: one early saw begin again since is this occurrence,
	// counted as early counted it (an ack of early before it does not
	// cover it).
	for class := range early.active {
		if _, isXid := xidClass(class); isXid {
			continue
		}
		if _, known := r.began[class]; !known || early.began[class].After(early.first[sourceOf(class)]) {
			r.began[class], r.counted[class] = early.began[class], early.counted[class]
		}
		r.active[class] = true
	}
	// Early's judgements are this run's: a class it judged absent (its
	// source read) that is there at the board's first judgement began
	// since, a new occurrence (Judge), not the one an earlier run counted.
	r.lastJudge = early.lastJudge
	r.last = early.last // its classes go on through a gap in their readings at the board's first judgement (goOn)
	return escalated
}
