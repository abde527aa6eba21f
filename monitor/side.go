package monitor

import (
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/gpu-telemetry/gpu-telemetry/internal/counters"
)

// sideQueue is the side goroutine's queue: the file work the poll loop and
// the GPUs' workers must not wait for (hang rows, late rows, summaries,
// snapshot requests). When the side goroutine is that far behind (the disk
// is stuck), work is dropped and counted in side_drops, the first drop
// logged with what it carried. The queue itself is never closed: a worker
// that comes back from a stuck call after shutdown may still queue, which
// then drops its work and counts it (closed).
type sideQueue struct {
	log  *slog.Logger
	jobs chan sideJob
	// mu orders every queue against the side goroutine's last drain at
	// shutdown: work queued before closed is set is in jobs when the
	// drain begins, so it runs (or, if the drain is cut short, is counted
	// and dropped); work queued after is counted and dropped.
	mu     sync.Mutex
	closed bool
	reg    *counters.Registry // side_drops
}

// sideJob is one piece of work for the side goroutine, with what it
// carries and its GPU (-1: none), to count and log it if it is dropped.
type sideJob struct {
	what string
	gpu  int
	rows *atomic.Int64 // gpuState.sideRows when the job writes the GPU's rows, else nil
	f    func()
	// dropped, if set, is told why when the job is dropped instead of
	// run (a crash snapshot it was to gather is reported lost).
	dropped func(why string)
}

// queue runs f on the side goroutine; what f carries and its GPU (-1:
// none) name it when it is dropped. It reports whether f was queued.
func (q *sideQueue) queue(what string, gpu int, f func()) bool {
	return q.enqueue(sideJob{what: what, gpu: gpu, f: f})
}

// enqueue is queue for a job; a dropped job's rows are taken off its count.
func (q *sideQueue) enqueue(j sideJob) bool {
	q.mu.Lock()
	closed, queued := q.closed, false
	if !closed {
		select {
		case q.jobs <- j:
			queued = true
		default:
		}
	}
	q.mu.Unlock()
	if queued {
		return true
	}
	if closed {
		j.what += " (queued after shutdown)"
		q.drop(j, "queued after the side queue stopped at shutdown")
	} else {
		q.drop(j, "the side queue was full")
	}
	return false
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

// close makes every later queue drop its work (Run, before it stops the
// side goroutine).
func (q *sideQueue) close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
}

// dropQueued takes the jobs still queued off the queue once the side
// goroutine, stuck in one of them, did not finish them in time at
// shutdown, and drops each. It runs none: the stuck job is still running,
// and the files close next. It returns how many it dropped.
func (q *sideQueue) dropQueued() int {
	for n := 0; ; n++ {
		select {
		case j := <-q.jobs:
			j.what += " (still queued at shutdown)"
			q.drop(j, "still queued on the side queue at shutdown")
		default:
			return n
		}
	}
}

// run runs queued work until stop is closed, then what is still queued.
// Run closes the queue before it closes stop.
func (q *sideQueue) run(stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	serve(stop, q.jobs, func(j sideJob) { j.f() })
}

// serve calls f with each value received on ch until stop is closed, then
// with what is still queued there, once.
func serve[T any](stop <-chan struct{}, ch <-chan T, f func(T)) {
	for {
		select {
		case v := <-ch:
			f(v)
		case <-stop:
			for {
				select {
				case v := <-ch:
					f(v)
				default:
					return
				}
			}
		}
	}
}
