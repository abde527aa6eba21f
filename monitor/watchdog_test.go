package monitor

import (
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// pingNotifier records when the watchdog was pinged.
type pingNotifier struct {
	mu    sync.Mutex
	pings []time.Time
}

func (n *pingNotifier) Ready()    {}
func (n *pingNotifier) Stopping() {}
func (n *pingNotifier) Watchdog() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.pings = append(n.pings, time.Now())
}

func (n *pingNotifier) times() []time.Time {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]time.Time(nil), n.pings...)
}

// watchdogRig runs one fake GPU at a 10 s interval under a 1 s watchdog
// (pings due every 500 ms).
func watchdogRig(t *testing.T) (*rig, *pingNotifier) {
	n := &pingNotifier{}
	r := newRig(t, 1, func(c *Config) {
		c.Interval = 10 * time.Second
		c.Notifier = n
		c.WatchdogEvery = 500 * time.Millisecond
	})
	return r, n
}

// The watchdog is pinged every half WatchdogSec however long the interval
// is: one ping per tick let systemd kill the logger at --interval 30 s and
// more under the shipped unit's WatchdogSec=30.
func TestWatchdogPingedBetweenLongTicks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, n := watchdogRig(t)
		start := time.Now()
		r.run(25*time.Second, nil)
		pings := n.times()
		if len(pings) < 49 {
			t.Fatalf("%d watchdog pings in 25 s at a 1 s watchdog, want 49 or more (every 500 ms)", len(pings))
		}
		prev := start
		for i, p := range pings {
			if d := p.Sub(prev); d > 500*time.Millisecond {
				t.Fatalf("ping %d came %v after the previous one (or the start); want at most 500 ms (WatchdogSec 1 s)", i, d)
			}
			prev = p
		}
	})
}

// A poll loop stuck in a tick stops the pings once half WatchdogSec has
// passed (the watchdog then restarts the logger); they resume when the tick
// returns.
func TestWatchdogNotPingedWhileTheLoopIsStuck(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, n := watchdogRig(t)
		start := time.Now()
		var once sync.Once
		r.m.loop.tickHook = func(now time.Time) {
			if now.Sub(start) >= 10*time.Second {
				once.Do(func() { time.Sleep(3 * time.Second) }) // the loop is stuck
			}
		}
		r.run(20*time.Second, nil)
		var during, after int
		for _, p := range n.times() {
			switch at := p.Sub(start); {
			case at > 10500*time.Millisecond && at < 13*time.Second:
				during++
			case at > 13*time.Second:
				after++
			}
		}
		if during != 0 {
			t.Errorf("%d pings while the loop was stuck (10.5 s to 13 s)", during)
		}
		if after == 0 {
			t.Errorf("no ping after the loop came back")
		}
		if !strings.Contains(r.logs.String(), "poll loop stuck; the watchdog is no longer pinged") {
			t.Errorf("the stall was not logged")
		}
	})
}
