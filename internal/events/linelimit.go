package events

import (
	"cmp"
	"slices"
	"sync"
	"time"
)

// LineLimit bounds how many events.log lines of one kind for one GPU are
// written per LineWindow: a flaky link can print corrected AER errors by
// the thousand, and a user's CUDA program can make its GPU report Xid 13 or
// 31 as fast as it faults. The rest are held back, and their number is
// handed on when the window ends (Ended, driven by the poll loop's clock,
// or Allow, when the kind's next line opens a new window) for one line that
// sums them up. The zero value is ready; it is safe for concurrent use.
type LineLimit struct {
	mu     sync.Mutex
	bursts map[burstKey]*burst
}

const (
	// LineBurst is how many lines of one kind for one GPU a window lets
	// through.
	LineBurst = 10
	// LineWindow is the window.
	LineWindow = time.Minute
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

// Held is how many lines of one kind for one GPU a window that has ended
// held back.
type Held struct {
	GPU   int
	Kind  string
	Lines int
}

// Allow counts a line of kind for gpu received at now and says whether it is
// within the burst limit. held is, when the line begins a new window, how
// many the previous window held back and Ended has not handed on yet (0
// otherwise): one line should say so. now is the line's receipt time from
// time.Now, so the window is measured on Go's monotonic clock and a
// wall-clock step neither stretches nor cuts it; it must not be a time
// without that reading.
func (k *LineLimit) Allow(gpu int, kind string, now time.Time) (ok bool, held int) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.bursts == nil {
		k.bursts = map[burstKey]*burst{}
	}
	key := burstKey{gpu, kind}
	b := k.bursts[key]
	if b == nil || now.Sub(b.start) >= LineWindow {
		if b != nil {
			held = b.dropped
		}
		b = &burst{start: now}
		k.bursts[key] = b
	}
	b.n++
	ok = b.n <= LineBurst
	if !ok {
		b.dropped++
	}
	return ok, held
}

// Holding says whether the window of kind for gpu open at now is holding
// its lines back (past its burst), and if so counts one more line held: a
// line that only repeats one counted by Allow (another source's report of
// the same Xid) is held with it, and never opens a window.
func (k *LineLimit) Holding(gpu int, kind string, now time.Time) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	b := k.bursts[burstKey{gpu, kind}]
	if b == nil || now.Sub(b.start) >= LineWindow || b.n <= LineBurst {
		return false
	}
	b.dropped++
	return true
}

// Ended forgets the windows that ended by now (all of them with all, at
// stop) and returns those that held lines back, by GPU and kind: each is
// one line that sums them up, written when the window closes rather than
// when the kind's next line comes, which may be never.
func (k *LineLimit) Ended(now time.Time, all bool) []Held {
	k.mu.Lock()
	defer k.mu.Unlock()
	var out []Held
	for key, b := range k.bursts {
		if !all && now.Sub(b.start) < LineWindow {
			continue
		}
		delete(k.bursts, key)
		if b.dropped > 0 {
			out = append(out, Held{GPU: key.gpu, Kind: key.kind, Lines: b.dropped})
		}
	}
	slices.SortFunc(out, func(a, b Held) int {
		return cmp.Or(cmp.Compare(a.GPU, b.GPU), cmp.Compare(a.Kind, b.Kind))
	})
	return out
}
