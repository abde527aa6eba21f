package sampler

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

// Worker runs one GPU's samples on a goroutine of its own, so that a call
// stuck in the driver holds up only that GPU; Dispatch refuses while the
// previous sample is in flight, so a hung GPU never piles up goroutines.
//
// Times are the caller's readings of a monotonic clock (durations since a
// base of its choosing): a missed deadline must not depend on the wall
// clock, which can step by hours (NTP, an RTC corrected after boot).
type Worker struct {
	gpu      *GPU
	kick     chan struct{}
	busy     atomic.Bool
	start    atomic.Int64 // monotonic reading (ns) when the sample in flight was dispatched
	handle   func(*reading.Sample)
	s        reading.Sample
	initBusy bool // created while the static facts were read: Run clears busy once they are
}

// NewWorker returns a worker that samples g and passes each sample to handle
// on the worker's goroutine; handle must not keep the pointer. While the
// start-up read of the static facts is stuck, it counts as the sample in
// flight (so the GPU is reported hung), dispatched at now.
func NewWorker(g *GPU, handle func(*reading.Sample), now time.Duration) *Worker {
	w := &Worker{gpu: g, kick: make(chan struct{}, 1), handle: handle}
	if !g.StaticDone() {
		w.busy.Store(true)
		w.start.Store(int64(now))
		w.initBusy = true
	}
	return w
}

// Run takes samples when dispatched until ctx is cancelled. A sample stuck
// in the driver keeps Run with it: do not wait for Run without a deadline.
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

// Busy reports whether a sample is in flight and the reading it was
// dispatched at, exactly as given (it tells one sample from the next).
func (w *Worker) Busy() (since time.Duration, busy bool) {
	if !w.busy.Load() {
		return 0, false
	}
	return time.Duration(w.start.Load()), true
}

// Stuck reports whether, at now, the sample in flight has missed its
// deadline inside an NVML call, which, and when it was dispatched. A sample
// late for another reason (its handler blocked writing) is not stuck.
func (w *Worker) Stuck(now, deadline time.Duration) (fn Fn, since time.Duration, stuck bool) {
	since, busy := w.Busy()
	if fn, _, ok := w.gpu.InFlight(); ok && busy && now-since >= deadline {
		return fn, since, true
	}
	return FnNone, 0, false
}
