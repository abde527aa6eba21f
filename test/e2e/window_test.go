package e2e

import (
	"regexp"
	"strconv"
	"sync"
	"testing"
	"time"
)

// counterLog asks the daemon's control socket for its status every 200 ms
// and keeps the named counters with when each answer was asked for, so a
// test can tell how many ticks the logger counted as late or skipped in one
// window of its run rather than in the whole run.
type counterLog struct {
	names []string
	stopc chan struct{}
	done  sync.WaitGroup

	mu   sync.Mutex
	seen []counterSeen
	last map[string]uint64 // from the final status line, once stopped
}

type counterSeen struct {
	asked, got time.Time
	sum        uint64 // the named counters, added
}

// logCounters starts asking p's socket for the sum of the named counters.
func logCounters(p *proc, names ...string) *counterLog {
	l := &counterLog{names: names, stopc: make(chan struct{})}
	sock := p.socketPath()
	l.done.Add(1)
	go func() {
		defer l.done.Done()
		tk := time.NewTicker(200 * time.Millisecond)
		defer tk.Stop()
		for {
			asked := time.Now()
			if d, ok := rawStatus(sock); ok {
				var sum uint64
				for _, c := range d.Host.Counters {
					for _, n := range names {
						if c.Name == n {
							sum += c.Value
						}
					}
				}
				l.mu.Lock()
				l.seen = append(l.seen, counterSeen{asked: asked, got: time.Now(), sum: sum})
				l.mu.Unlock()
			}
			select {
			case <-l.stopc:
				return
			case <-tk.C:
			}
		}
	}()
	return l
}

// stop ends the asking; call it after p.stop, so that the final status line
// closes every window.
func (l *counterLog) stop(t *testing.T, p *proc) {
	t.Helper()
	close(l.stopc)
	l.done.Wait()
	var sum uint64
	for _, n := range l.names {
		m := regexp.MustCompile(`final status.* ` + n + `=(\d+)`).FindStringSubmatch(p.stderr.String())
		if m == nil {
			t.Fatalf("final status lacks %s", n)
		}
		v, _ := strconv.ParseUint(m[1], 10, 64)
		sum += v
	}
	l.mu.Lock()
	l.seen = append(l.seen, counterSeen{asked: time.Now(), got: time.Now(), sum: sum})
	l.mu.Unlock()
}

// between returns how many the counters grew from before from to after to:
// from the last answer got before from-200ms (0 if none: the counters
// start at 0) to the first asked after to+1.5s (a tick skipped near to is
// counted when the late loop wakes, and status publishes the counters a
// little later). The window is wider than [from, to], never narrower.
func (l *counterLog) between(from, to time.Time) uint64 {
	n, _, _ := l.span(from, to)
	return n
}

// span is between, with the window the growth may cover: a count made
// after lo (the zero time: from the start) and no later than hi may be in
// it; one made outside is not.
func (l *counterLog) span(from, to time.Time) (n uint64, lo, hi time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var base uint64
	for _, s := range l.seen {
		if s.got.Before(from.Add(-200 * time.Millisecond)) {
			base, lo = s.sum, s.asked
		}
	}
	last := l.seen[len(l.seen)-1]
	end, hi := last.sum, last.got
	for _, s := range l.seen {
		if s.asked.After(to.Add(1500 * time.Millisecond)) {
			end, hi = s.sum, s.got
			break
		}
	}
	return end - base, lo, hi
}

// missedTicks is how many 100 ms ticks a gap between two rows stands for
// beyond the one expected, at least: a row is stamped when the loop runs,
// which a loaded machine delays by up to a tick without skipping one
// (nothing counts that), so a gap of d has missed d/100ms - 1 ticks,
// rounded down: none below 200 ms, one below 300 ms, and so on.
func missedTicks(d time.Duration) uint64 {
	if d < 200*time.Millisecond {
		return 0
	}
	return uint64(d/(100*time.Millisecond)) - 1
}
