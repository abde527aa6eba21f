package events

import (
	"sync"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

// Dedup recognizes an Xid, or a recovery action, that several sources
// report (NVML's Xid events, its GPU operational events' legacy Xid, the
// kernel log): each other source's report within Window of the first is a
// duplicate of it. The zero value is ready (with a zero Window, nothing is a
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

// xidSeen is the first report of an incident and the sources that have
// reported it since (a bit per reading.Source).
type xidSeen struct {
	at   time.Time
	src  reading.Source
	from uint32
}

// maxSeen is how many reports Dedup holds before it forgets those older
// than Window.
const maxSeen = 1024

// Duplicate reports whether the same Xid (or recovery action) on the same GPU
// was already reported by another source within Window, and the source that
// reported it first. Repeats from the same source are real repeats (an Xid
// flood) and are not duplicates: one starts a new incident. A kernel record read after the fact (Backlog) takes no part:
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
	bit := uint32(1) << e.Source
	if ok && prev.from&bit == 0 && e.Time.Sub(prev.at) < d.Window {
		prev.from |= bit // a second report from a source that has reported it is new again
		d.seen[k] = prev
		return true, prev.src
	}
	d.seen[k] = xidSeen{at: e.Time, src: e.Source, from: bit}
	if len(d.seen) > maxSeen {
		for kk, v := range d.seen {
			if e.Time.Sub(v.at) > d.Window {
				delete(d.seen, kk)
			}
		}
	}
	return false, 0
}
