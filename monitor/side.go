package monitor

import (
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/gpu-telemetry/gpu-telemetry/internal/counters"
)

// sideQueue is the side goroutine's queue: the file work the poll loop and
// the GPUs' workers must not wait for (hang rows, late rows, summaries,
// snapshot requests). When it is full (the disk is stuck), work is dropped
// and counted in side_drops, the first drop logged with what it carried.
// The channel is never closed: a worker that comes back from a stuck call
// after shutdown may still queue, and its work is dropped and counted.
type sideQueue struct {
	dropQueue[sideJob]
	log *slog.Logger
	reg *counters.Registry // side_drops
}

// dropQueue is a queue whose senders never wait: what it cannot take
// (full, or closed at shutdown) the sender counts as dropped. mu orders
// every put against close, before the last drain at shutdown: what was
// put before runs in the drain (or is dropped if the drain is cut short),
// what is put after is refused, counted either way.
type dropQueue[T any] struct {
	jobs   chan T
	mu     sync.Mutex
	closed bool
}

// put queues v unless the queue is closed or full.
func (q *dropQueue[T]) put(v T) (closed, full bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return true, false
	}
	select {
	case q.jobs <- v:
		return false, false
	default:
		return false, true
	}
}

// close makes every later put refuse its value.
func (q *dropQueue[T]) close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
}

// drain calls f with each value still queued and returns how many.
func (q *dropQueue[T]) drain(f func(T)) int {
	for n := 0; ; n++ {
		select {
		case v := <-q.jobs:
			f(v)
		default:
			return n
		}
	}
}

// serve calls f with each value queued until stop is closed, then with
// what is still queued, once.
func (q *dropQueue[T]) serve(stop <-chan struct{}, f func(T)) {
	for {
		select {
		case v := <-q.jobs:
			f(v)
		case <-stop:
			q.drain(f)
			return
		}
	}
}

// sideJob is one piece of work for the side goroutine; what it carries and
// its GPU (-1: none) name it when it is dropped.
type sideJob struct {
	what    string
	gpu     int
	rows    *atomic.Int64 // gpuState.sideRows when the job writes the GPU's rows
	f       func()
	dropped func(why string) // if set, told why the job was dropped instead of run
}

// queue runs f on the side goroutine.
func (q *sideQueue) queue(what string, gpu int, f func()) {
	q.enqueue(sideJob{what: what, gpu: gpu, f: f})
}

// enqueue is queue for a job.
func (q *sideQueue) enqueue(j sideJob) {
	switch closed, full := q.put(j); {
	case closed:
		j.what += " (queued after shutdown)"
		q.drop(j, "queued after the side queue stopped at shutdown")
	case full:
		q.drop(j, "the side queue was full")
	}
}

// drop counts j in side_drops (the first logged with what it carried),
// takes it off its GPU's queued rows and tells it why.
func (q *sideQueue) drop(j sideJob, why string) {
	lose(q.reg, q.log, sideDrops, j.what, slog.Int("gpu", j.gpu))
	if j.rows != nil {
		j.rows.Add(-1)
	}
	if j.dropped != nil {
		j.dropped(why)
	}
}

// dropQueued drops the jobs still queued when the side goroutine, stuck in
// one, did not finish in time at shutdown (the files close next), and
// returns how many.
func (q *sideQueue) dropQueued() int {
	return q.drain(func(j sideJob) {
		j.what += " (still queued at shutdown)"
		q.drop(j, "still queued on the side queue at shutdown")
	})
}
