package sampler

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

// Worker runs one GPU's samples on a goroutine of its own, so that a call stuck
// in the driver holds up only that GPU. At most one sample per GPU is ever in
// flight: Dispatch refuses while the previous one has not returned, so a hung
// GPU never piles up goroutines.
//
// Times are the caller's readings of a monotonic clock (durations since a
// base of its choosing, never negative): whether a sample missed its
// deadline must not depend on the wall clock, which can step by hours (NTP,
// an RTC corrected after boot). Rows keep their wall-clock times; the
// worker never sees them.
type Worker struct {
	gpu    *GPU
	kick   chan struct{}
	busy   atomic.Bool
	start  atomic.Int64 // monotonic reading (ns) when the sample in flight was dispatched
	handle func(*reading.Sample)
	s      reading.Sample
	// initBusy: the worker was created while the static facts were still
	// being read; Run clears busy once they arrive.
	initBusy bool
}

// NewWorker returns a worker that samples g and passes each sample to handle
// on the worker's goroutine. handle must not keep the pointer. now is the
// monotonic reading at creation: while the start-up read of the static facts
// is still stuck, it counts as the sample in flight, dispatched at now.
func NewWorker(g *GPU, handle func(*reading.Sample), now time.Duration) *Worker {
	w := &Worker{gpu: g, kick: make(chan struct{}, 1), handle: handle}
	if !g.StaticDone() {
		// The start-up read of static facts is still stuck in the driver:
		// it counts as the sample in flight, so the GPU is reported hung.
		w.busy.Store(true)
		w.start.Store(int64(now))
		w.initBusy = true
	}
	return w
}

// Run takes samples when dispatched until ctx is cancelled. A sample in
// flight is finished first; if the driver never returns, neither does Run, and
// the caller must not wait for it without a deadline.
func (w *Worker) Run(ctx context.Context) {
	if w.initBusy {
		select {
		case <-ctx.Done():
			return
		case <-w.gpu.staticDone:
		}
		w.busy.Store(false)
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-w.kick:
		}
		w.gpu.Sample(&w.s)
		w.handle(&w.s)
		w.busy.Store(false)
	}
}

// Dispatch starts a sample at the monotonic reading now. It returns false,
// and does nothing, when the previous sample is still in flight.
func (w *Worker) Dispatch(now time.Duration) bool {
	if !w.busy.CompareAndSwap(false, true) {
		return false
	}
	w.start.Store(int64(now))
	w.kick <- struct{}{}
	return true
}

// Busy reports whether a sample is in flight and the monotonic reading it
// was dispatched at: exactly the value given to Dispatch (or NewWorker), so
// it tells one sample from the next when each dispatch has its own reading.
func (w *Worker) Busy() (since time.Duration, busy bool) {
	if !w.busy.Load() {
		return 0, false
	}
	return time.Duration(w.start.Load()), true
}

// Stuck reports whether, at the monotonic reading now, the sample in flight
// has missed its deadline while inside an NVML call, which call, and when
// that sample was dispatched (as Busy). A sample that is late for another
// reason (its handler is blocked writing) is not reported: the driver is not
// the one stuck.
func (w *Worker) Stuck(now, deadline time.Duration) (fn Fn, since time.Duration, stuck bool) {
	since, busy := w.Busy()
	if !busy || now-since < deadline {
		return FnNone, 0, false
	}
	fn, _, ok := w.gpu.InFlight()
	if !ok {
		return FnNone, 0, false
	}
	return fn, since, true
}
