package events

import (
	"sync"
	"time"
)

// ClockBurst collapses chatty clock-change events, as the reference logger
// gpu-telemetry-deep.py did (clocks change many times a second under
// load, and one line each buries the events that matter): every
// event of a burst is counted, only the first few go to events.log, and a
// burst line marks the tenth within one second. The window runs on the
// events' receipt times, on Go's monotonic clock (see Dedup.Duplicate). The
// zero value is ready; it is safe for concurrent use.
type ClockBurst struct {
	mu    sync.Mutex
	start time.Time
	n     int
}

const (
	// ClockBurstWindow is the window a burst is counted over.
	ClockBurstWindow = time.Second
	// ClockBurstMark is the event of a window that marks a burst
	// (gpu-telemetry-deep.py's clock_burst_count == 10).
	ClockBurstMark = 10
	// clockBurstLogged is how many events of a window are logged one by one.
	clockBurstLogged = 3
)

// Add counts a clock event received at t and returns its number n in its
// window, whether it is to be written on its own (log: one of the first
// few) and whether it marks a burst (the ClockBurstMark-th).
func (b *ClockBurst) Add(t time.Time) (n int, log, burst bool) {
	b.mu.Lock()
	if t.Sub(b.start) > ClockBurstWindow {
		b.start, b.n = t, 0
	}
	b.n++
	n = b.n
	b.mu.Unlock()
	return n, n <= clockBurstLogged, n == ClockBurstMark
}
