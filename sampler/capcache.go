package sampler

import "time"

// capCache is the capability cache of a GPU's sampler (its calls, fields,
// links and NVLink error counters) and of its process reader: each entry
// is the time, in ns since base, until which a call the driver refused
// (not supported, no permission, function not found) stays off; 0: on.
// Each function's first refusal is logged, the rest only re-probed.
type capCache struct {
	base time.Time // origin of the monotonic nanoseconds
	told [maxFns]bool
}

func (c *capCache) mono() int64 { return int64(time.Since(c.base)) }

// on reports whether a call whose cache entry is off may be made now.
func (c *capCache) on(off int64) bool { return off == 0 || c.mono() >= off }

// note sets fn's cache entry *off from its call's class cl: on after a
// success, off for reprobe after a refusal. It reports whether this is
// fn's first refusal, for the caller to log.
func (c *capCache) note(fn Fn, off *int64, cl Class, reprobe time.Duration) (first bool) {
	switch {
	case cl == ClassOK:
		*off = 0
	case cl.capability():
		*off = c.mono() + int64(reprobe)
		first, c.told[fn] = !c.told[fn], true
	}
	return first
}
