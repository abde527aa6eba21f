package anomaly

import (
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

// LinkChange is one NVLink link's change, for events.log
// (type=HEALTH counter=nvlink_<name> link=L from=... to=...). Counter is
// "state" or a reading.LinkDefs name; a state is written by name.
type LinkChange struct {
	Link     int
	Counter  string
	State    bool // From and To are NVML_NVLINK_STATE_* values
	From, To uint64
}

// LinkWatch finds the per-link changes between the NVLink readings it is
// given. Per-link counters that grow continually on healthy links
// (corrected symbol errors, the bit error rates) are reported at most once
// a minute each; states and the other counters on every change. It is
// pure: time arrives as a value. Use it from one goroutine.
type LinkWatch struct {
	at     time.Time // the reading last examined
	state  [reading.MaxLinks]reading.Opt[uint32]
	c      [reading.MaxLinks][reading.NumLinkCounters]reading.Opt[uint64]
	cAt    [reading.MaxLinks][reading.NumLinkCounters]time.Time
	primed bool
}

// coalesced reports whether counter c is reported at most once a minute.
func coalesced(c reading.LinkCounterID) bool {
	return c == reading.LSymbolErrors || reading.LinkDefs[c].BER
}

// Check returns the changes of cur since the last reading; nil for a
// reading already examined. The first reading is the baseline: no changes.
func (w *LinkWatch) Check(cur *reading.NVLinks, now time.Time) []LinkChange {
	if cur.At.IsZero() || cur.At.Equal(w.at) {
		return nil
	}
	w.at = cur.At
	var out []LinkChange
	for l := range min(cur.N, reading.MaxLinks) {
		k := &cur.L[l]
		if s, ok := k.State.Get(); ok {
			if p, pok := w.state[l].Get(); pok && p != s && w.primed {
				out = append(out, LinkChange{Link: l, Counter: "state", State: true, From: uint64(p), To: uint64(s)})
			}
			w.state[l] = k.State
		}
		for c := range reading.NumLinkCounters {
			v, ok := k.C[c].Get()
			if !ok {
				continue
			}
			p, pok := w.c[l][c].Get()
			switch {
			case !pok:
				w.c[l][c], w.cAt[l][c] = k.C[c], now
			case v != p:
				if coalesced(c) && now.Sub(w.cAt[l][c]) < nanosEvery {
					continue
				}
				if w.primed {
					out = append(out, LinkChange{Link: l, Counter: reading.LinkDefs[c].Name, From: p, To: v})
				}
				w.c[l][c], w.cAt[l][c] = k.C[c], now
			}
		}
	}
	w.primed = true
	return out
}
