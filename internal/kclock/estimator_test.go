package kclock

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// printkClock is a simulated kernel log clock: printk = mono - offset -
// drift*mono, with the offset stepping by step at stepAt (on mono).
type printkClock struct {
	offset time.Duration
	drift  float64 // ppm as a fraction
	stepAt time.Duration
	step   time.Duration
}

func (c printkClock) at(mono time.Duration) time.Duration {
	off := c.offset
	if c.stepAt > 0 && mono >= c.stepAt {
		off += c.step
	}
	return mono - off - time.Duration(c.drift*float64(mono))
}

// feed drives an estimator with records every 0.3-2 s (printk time taken at
// the moment each is logged) that arrive after delay(rng). check is called
// after every record with the record's arrival time.
func feed(t *testing.T, c printkClock, from, to time.Duration, delay func(*rand.Rand) time.Duration,
	e *Estimator, check func(arrival time.Duration)) {
	t.Helper()
	rng := rand.New(rand.NewPCG(feedSeed, 2))
	for logged := from; logged < to; logged += 300*time.Millisecond + time.Duration(rng.Int64N(int64(1700*time.Millisecond))) {
		arrival := logged + delay(rng)
		e.Observe(arrival, c.at(logged), false)
		if check != nil {
			check(arrival)
		}
	}
}

// feedSeed seeds the feeds (a variable so that a run can try others).
var feedSeed uint64 = 1

// realistic delays: mostly tens of microseconds, a tenth of them up to 200 ms
// (the logger busy, the reader scheduled late).
func realistic(rng *rand.Rand) time.Duration {
	d := 20*time.Microsecond + time.Duration(rng.Int64N(int64(300*time.Microsecond)))
	if rng.IntN(10) == 0 {
		d += time.Duration(rng.Int64N(int64(200 * time.Millisecond)))
	}
	return d
}

// polled: the reader of a file polls every 100 ms, so delays are uniform.
func polled(rng *rand.Rand) time.Duration {
	return time.Duration(rng.Int64N(int64(100 * time.Millisecond)))
}

// closeTo fails unless the estimate of the printk time at mono is within tol.
func closeTo(t *testing.T, e *Estimator, c printkClock, mono, tol time.Duration) {
	t.Helper()
	got, want := e.Fit().PrintkAt(mono), c.at(mono)
	if d := got - want; d > tol || d < -tol {
		t.Fatalf("at mono %v: printk estimate %v, truth %v: off by %v (tolerance %v); fit %+v", mono, got, want, d, tol, e.Fit())
	}
}

func TestClockEstimatorFollowsOffsetAndDrift(t *testing.T) {
	for _, tt := range []struct {
		name   string
		offset time.Duration
		drift  float64
		delay  func(*rand.Rand) time.Duration
		warm   time.Duration // records before the bound applies
		tol    time.Duration
	}{
		{"37 s behind, 300 ppm slower", 37 * time.Second, 300e-6, realistic, 3 * time.Minute, 3 * time.Millisecond},
		{"52 s ahead, 450 ppm faster", -52 * time.Second, -450e-6, realistic, 3 * time.Minute, 3 * time.Millisecond},
		// A file is polled every 100 ms: few records per bucket land early in
		// the poll, so the drift takes longer to pin down.
		{"20 s, 250 ppm, polled file", 20 * time.Second, 250e-6, polled, 8 * time.Minute, 8 * time.Millisecond},
		{"no offset, no drift", 0, 0, realistic, 3 * time.Minute, time.Millisecond},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := printkClock{offset: tt.offset, drift: tt.drift}
			e := NewEstimator(Config{})
			start := 86400 * time.Second // a day of uptime: the drift has built up 26 s at 300 ppm
			warm := start + tt.warm
			feed(t, c, start, start+30*time.Minute, tt.delay, e, func(arrival time.Duration) {
				if arrival < warm {
					return
				}
				// dmesg_time of rows sampled now and up to 5 s later.
				closeTo(t, e, c, arrival, tt.tol)
				closeTo(t, e, c, arrival+5*time.Second, tt.tol)
			})
			if f := e.Fit(); f.Rate < tt.drift-20e-6 || f.Rate > tt.drift+20e-6 {
				t.Errorf("drift %.1f ppm, want %.1f +- 20", f.Rate*1e6, tt.drift*1e6)
			}
			if f := e.Fit(); f.Steps != 0 {
				t.Errorf("%d steps detected on a feed without any", f.Steps)
			}
		})
	}
}

func TestClockEstimatorUsesTheEarliestArrival(t *testing.T) {
	e := NewEstimator(Config{})
	// The same offset (10 s) seen with delays of 80, 5 and 40 ms.
	e.Observe(100*time.Second+80*time.Millisecond, 90*time.Second, false)
	e.Observe(101*time.Second+5*time.Millisecond, 91*time.Second, false)
	f := e.Observe(102*time.Second+40*time.Millisecond, 92*time.Second, false)
	if got := f.OffsetAt(102 * time.Second); got != 10*time.Second+5*time.Millisecond {
		t.Errorf("offset %v, want 10.005s (the smallest arrival minus timestamp)", got)
	}
	if f.Records != 3 || f.Confirmed != 101*time.Second+5*time.Millisecond {
		t.Errorf("records %d, confirmed at %v; want 3 and the 5 ms record's arrival", f.Records, f.Confirmed)
	}
}

// TestClockEstimatorStep: a step of the kernel log clock's offset is found
// once (Steps 1), and the estimate follows it; each window of a case (mono
// after the step) must see records, and every estimate in it is within tol.
func TestClockEstimatorStep(t *testing.T) {
	type window struct {
		after, before time.Duration // since stepAt, exclusive; before 0: to the end
		tol           time.Duration
	}
	for _, tt := range []struct {
		name    string
		c       printkClock
		length  time.Duration // of the feed, from 1000 s
		windows []window
	}{
		{
			// After a suspend the offset drops by 1.5 s: records arrive "early".
			name:   "step down",
			c:      printkClock{offset: 30 * time.Second, drift: 200e-6, stepAt: 1000*time.Second + 10*time.Minute, step: -1500 * time.Millisecond},
			length: 20 * time.Minute,
			windows: []window{
				// The first record after the step is a hard bound: the estimate
				// follows at once (to within that record's delay and the drift).
				{after: 0, tol: 250 * time.Millisecond},
				{after: 3 * time.Minute, tol: 3 * time.Millisecond},
			},
		},
		{
			// The offset grows by 2 s: every record now looks 2 s late.
			name:   "step up",
			c:      printkClock{offset: 30 * time.Second, drift: -150e-6, stepAt: 1000*time.Second + 10*time.Minute, step: 2 * time.Second},
			length: 25 * time.Minute,
			windows: []window{
				// Confirmed after StepConfirm; the drift is carried over.
				{after: 90 * time.Second, before: 3 * time.Minute, tol: 20 * time.Millisecond},
				{after: 5 * time.Minute, tol: 3 * time.Millisecond},
			},
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := NewEstimator(Config{})
			seen := make([]int, len(tt.windows))
			feed(t, tt.c, 1000*time.Second, 1000*time.Second+tt.length, realistic, e, func(arrival time.Duration) {
				for i, w := range tt.windows {
					if arrival > tt.c.stepAt+w.after && (w.before == 0 || arrival < tt.c.stepAt+w.before) {
						seen[i]++
						closeTo(t, e, tt.c, arrival, w.tol)
					}
				}
			})
			if f := e.Fit(); f.Steps != 1 || slices.Contains(seen, 0) {
				t.Errorf("steps %d (want 1), records in each window after the step %v", f.Steps, seen)
			}
		})
	}
}

func TestClockEstimatorBurstAfterStallIsNotAStep(t *testing.T) {
	// The logger stalls for 40 s; the records logged meanwhile all arrive at
	// its end, up to 40 s late. Nothing about the clocks changed.
	c := printkClock{offset: 12 * time.Second, drift: 100e-6}
	e := NewEstimator(Config{})
	feed(t, c, 0, 10*time.Minute, realistic, e, nil)
	stallEnd := 10*time.Minute + 40*time.Second
	for logged := 10 * time.Minute; logged < stallEnd; logged += 500 * time.Millisecond {
		e.Observe(stallEnd, c.at(logged), false)
	}
	feed(t, c, stallEnd, stallEnd+5*time.Minute, realistic, e, func(arrival time.Duration) {
		closeTo(t, e, c, arrival, 3*time.Millisecond)
	})
	if f := e.Fit(); f.Steps != 0 {
		t.Errorf("a stall was taken for %d steps", f.Steps)
	}
}

func TestClockEstimatorQuietLogExtrapolates(t *testing.T) {
	c := printkClock{offset: 45 * time.Second, drift: 400e-6}
	e := NewEstimator(Config{})
	feed(t, c, 0, 20*time.Minute, realistic, e, nil)
	// An hour without records: the fitted drift carries the estimate; 400
	// ppm unfitted would be 1.44 s off.
	closeTo(t, e, c, 80*time.Minute, 60*time.Millisecond)
	f := e.Fit()
	if age := f.Age(80 * time.Minute); age < time.Hour {
		t.Errorf("age %v after an hour without records", age)
	}
	// One record after the quiet hour confirms it again.
	f = e.Observe(80*time.Minute+50*time.Microsecond, c.at(80*time.Minute), true)
	closeTo(t, e, c, 80*time.Minute, time.Millisecond)
	if f.Age(80*time.Minute+time.Second) > 2*time.Second || f.Markers != 1 {
		t.Errorf("after a marker: age %v, markers %d", f.Age(80*time.Minute+time.Second), f.Markers)
	}
}
