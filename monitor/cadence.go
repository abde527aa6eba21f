package monitor

import (
	"sync"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/live"
)

// The published tick-period figures cover cadenceWindow: long enough for a
// p99 over 600 ticks at 100 ms, short enough to show a problem while it
// lasts. The histogram holds periods up to 4 intervals in steps of
// interval/100 (1 ms at 100 ms), longer ones in the last bucket.
const (
	cadenceWindow  = time.Minute
	cadenceBuckets = 400
)

// cadence measures the poll loop's tick periods (tick); readers call get.
// It never allocates after construction.
type cadence struct {
	mu       sync.Mutex
	step     time.Duration // bucket width
	last     time.Time     // previous tick
	cur      periodHist
	done     periodHist // the last complete window
	haveDone bool
}

// periodHist is one window's periods.
type periodHist struct {
	start   time.Time
	n       uint64
	sum     time.Duration
	max     time.Duration
	buckets [cadenceBuckets + 1]uint32
}

// tick records a tick at now.
func (c *cadence) tick(now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.last.IsZero() {
		c.last, c.cur.start = now, now
		return
	}
	p := now.Sub(c.last)
	c.last = now
	if now.Sub(c.cur.start) >= cadenceWindow {
		c.done, c.haveDone = c.cur, true
		c.cur = periodHist{start: now}
	}
	c.cur.n++
	c.cur.sum += p
	c.cur.max = max(c.cur.max, p)
	c.cur.buckets[min(int(max(p, 0)/c.step), cadenceBuckets)]++
}

// get fills the period figures of the last complete window, or of the
// current one before a window completed.
func (c *cadence) get(out *live.Cadence) {
	c.mu.Lock()
	defer c.mu.Unlock()
	h := &c.cur
	if c.haveDone {
		h = &c.done
	}
	out.Window = time.Duration(0)
	if h.n == 0 {
		return
	}
	out.Window = h.sum
	out.Mean = h.sum / time.Duration(h.n)
	out.Max = h.max
	// p99: the upper edge of the bucket holding the 99th percentile.
	want := (h.n*99 + 99) / 100
	var seen uint64
	for i, b := range h.buckets {
		seen += uint64(b)
		if seen >= want {
			if i == cadenceBuckets {
				out.P99 = h.max
			} else {
				out.P99 = min(time.Duration(i+1)*c.step, h.max)
			}
			break
		}
	}
}
