package anomaly

import (
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

// HealthChange is one health counter's change, for events.log
// (type=HEALTH counter=... from=... to=...).
type HealthChange struct {
	ID       reading.ID
	From, To uint64
}

// nanosEvery is how often a clock-event time counter's growth is reported:
// it grows every second a reason holds, and one line per second would bury
// the rest of events.log. A change is reported at most this long after it.
const nanosEvery = time.Minute

// healthChanges finds the health counters whose value changed since the
// value last reported. The first reading of a GPU is a baseline, reported
// whole; a counter that turns absent keeps its last value, so the next
// present one is compared with it.
type healthChanges struct {
	last     [reading.NumReadings]reading.Opt[uint64]
	lastAt   [reading.NumReadings]time.Time
	baseline bool
}

// check writes the changes of s at now to out, returns how many, and
// reports whether s is the baseline (the first sample with any counter
// present). It does not allocate.
func (d *healthChanges) check(s *reading.Sample, now time.Time, out *[reading.NumReadings]HealthChange) (int, bool) {
	first, n := false, 0
	for _, id := range reading.HealthIDs {
		cur := s.Values[id]
		v, ok := cur.Get()
		if !ok {
			continue
		}
		if !d.baseline {
			first = true
		}
		p, pok := d.last[id].Get()
		switch {
		case !pok:
			d.last[id], d.lastAt[id] = cur, now
			if d.baseline {
				// appeared later (re-probed, or a link came up): a change from absent
				out[n] = HealthChange{ID: id, From: 0, To: v}
				n++
			}
		case v != p:
			if reading.Table[id].Kind == reading.HealthNanos && now.Sub(d.lastAt[id]) < nanosEvery {
				continue
			}
			out[n] = HealthChange{ID: id, From: p, To: v}
			n++
			d.last[id], d.lastAt[id] = cur, now
		}
	}
	if first {
		d.baseline = true
	}
	return n, first
}
