package events

import (
	"sync"
	"time"
)

// KernelLines bounds how many kernel lines of one kind for one GPU are
// written per KernelLineWindow: a flaky link can print corrected AER errors
// by the thousand. The rest are held back, and their number is handed on
// when the window ends, for one line that sums them up. The zero value is
// ready; it is safe for concurrent use.
type KernelLines struct {
	mu     sync.Mutex
	bursts map[burstKey]*burst
}

const (
	// KernelLineBurst is how many lines of one kind for one GPU a window
	// lets through.
	KernelLineBurst = 10
	// KernelLineWindow is the window.
	KernelLineWindow = time.Minute
)

type burstKey struct {
	gpu  int
	kind string
}

type burst struct {
	start   time.Time
	n       int
	dropped int
}

// Allow counts a line of kind for gpu received at now and says whether it is
// within the burst limit. held is, when the line begins a new window, how
// many the previous window held back (0 otherwise): one line should say so.
// now is the line's receipt time from time.Now, so the window is measured on
// Go's monotonic clock and a wall-clock step neither stretches nor cuts it;
// it must not be a time without that reading.
func (k *KernelLines) Allow(gpu int, kind string, now time.Time) (ok bool, held int) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.bursts == nil {
		k.bursts = map[burstKey]*burst{}
	}
	key := burstKey{gpu, kind}
	b := k.bursts[key]
	if b == nil || now.Sub(b.start) >= KernelLineWindow {
		if b != nil {
			held = b.dropped
		}
		b = &burst{start: now}
		k.bursts[key] = b
	}
	b.n++
	ok = b.n <= KernelLineBurst
	if !ok {
		b.dropped++
	}
	return ok, held
}
