package events

import (
	"sync"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

// Dedup recognizes an Xid, or a recovery action, that NVML and the kernel log
// both report: the second source's report within Window is a duplicate of
// the first. The zero value is ready (with a zero Window, nothing is a
// duplicate); it is safe for concurrent use (the NVML events and the kernel
// log arrive on goroutines of their own).
type Dedup struct {
	Window time.Duration

	mu   sync.Mutex
	seen map[xidKey]xidSeen
}

// xidKey identifies an Xid report for de-duplication across sources.
type xidKey struct {
	gpu  int
	kind reading.EventKind
	data uint64
}

type xidSeen struct {
	at  time.Time
	src reading.Source
}

// maxSeen is how many reports Dedup holds before it forgets those older
// than Window.
const maxSeen = 1024

// Duplicate reports whether the same Xid (or recovery action) on the same GPU
// was already reported by the other source within Window, and that source.
// Repeats from the same source are real repeats (an Xid flood) and are not
// duplicates. A kernel record read after the fact (Backlog) takes no part:
// logged maybe hours ago, it is no report of an Xid NVML reports now, nor is
// a fresh report of one of it. Both sources' times are receipt times from
// time.Now (reading.Event.Time), so the window is measured on Go's monotonic
// clock: a wall-clock step neither splits one Xid into two incidents nor
// merges two. (Not the kernel's printk time: NVML events have none.)
func (d *Dedup) Duplicate(e reading.Event) (bool, reading.Source) {
	if e.Backlog {
		return false, 0
	}
	k := xidKey{gpu: e.GPU, kind: e.Kind, data: e.Data}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.seen == nil {
		d.seen = map[xidKey]xidSeen{}
	}
	prev, ok := d.seen[k]
	if ok && prev.src != e.Source && e.Time.Sub(prev.at) < d.Window {
		delete(d.seen, k) // a second report from the first source is new again
		return true, prev.src
	}
	d.seen[k] = xidSeen{at: e.Time, src: e.Source}
	if len(d.seen) > maxSeen {
		for kk, v := range d.seen {
			if e.Time.Sub(v.at) > d.Window {
				delete(d.seen, kk)
			}
		}
	}
	return false, 0
}
