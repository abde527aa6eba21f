// Package cooldown lets one of a kind of thing through per period and counts
// the ones it holds back in between: the log notices of a GPU's detectors
// (anomaly) and the crash and spike snapshots (snapshot).
package cooldown

import "time"

// Cooldown is one cooldown's state; the zero value has let nothing through
// yet. It is not safe for concurrent use: its owner's lock covers it.
type Cooldown struct {
	last time.Time // when the last one was let through
	any  bool      // whether any was let through yet
	held uint64    // held back since the last one let through
}

// Allow reports whether the one due at now may go through: the first does,
// then one per period. A clock that went backwards lets it through rather
// than holding everything back until the clock catches up (a lost crash
// snapshot is worse than one extra). held is how many were held back since
// the last one let through: when ok, those before this one (the count then
// restarts at zero); otherwise, this one included. left is how long the
// period still runs when it is held back, 0 when ok.
func (c *Cooldown) Allow(now time.Time, period time.Duration) (ok bool, held uint64, left time.Duration) {
	if el := now.Sub(c.last); c.any && el >= 0 && el < period {
		c.held++
		return false, c.held, period - el
	}
	held = c.held
	c.last, c.any, c.held = now, true, 0
	return true, held, 0
}

// Pass lets through after all the one Allow just held back (a crash
// incident's escalation): it no longer counts as held back, so the next one
// held back is the first of the burst again, and the period still runs from
// the last one Allow let through.
func (c *Cooldown) Pass() {
	if c.held > 0 {
		c.held--
	}
}
