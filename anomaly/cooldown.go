package anomaly

import "time"

// cooldown rate-limits one kind of log notice for one GPU: at most one notice
// per period, counting the ones it holds back so the next notice can say how
// many there were. Flags and counters are never rate-limited, only logging.
type cooldown struct {
	last       time.Time // when the last notice was let through
	sent       bool      // whether any notice was let through yet
	suppressed uint64    // notices held back since the last one let through
}

// allow reports whether a notice due at now may be logged, and if so how many
// were held back since the previous one (the count restarts at zero). A clock
// that went backwards lets the notice through rather than muting the kind
// until the clock catches up.
func (c *cooldown) allow(now time.Time, period time.Duration) (suppressed uint64, ok bool) {
	if c.sent {
		if d := now.Sub(c.last); d >= 0 && d < period {
			c.suppressed++
			return 0, false
		}
	}
	suppressed = c.suppressed
	c.suppressed = 0
	c.last = now
	c.sent = true
	return suppressed, true
}
