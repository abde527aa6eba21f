package kclock

import (
	"math"
	"time"
)

// Estimator estimates how the kernel log's printk clock relates to our
// CLOCK_MONOTONIC, so that dmesg_time can be written on the kernel log's clock
// instead of assuming the two are the same. The printk clock (local_clock(),
// based on sched_clock) is not disciplined by NTP; on bare metal it drifts
// from CLOCK_MONOTONIC by tens to hundreds of ppm, which after weeks of
// uptime puts kernel lines minutes away from the rows they belong to.
//
// Every record carries its printk timestamp, and the logger notes
// CLOCK_MONOTONIC when it arrives. A record can arrive late, never early, so
// arrival minus timestamp is an upper bound of the offset, and the smallest
// over recent records is a tight estimate. The estimator keeps the smallest
// per bucket of arrival time over a window, fits a line through those minima
// (the drift), and puts it under all of them (the lower envelope). A record
// that arrives well before the line allows is a step down of the offset (the
// clocks jumped, after a suspend for instance): the history is dropped. Minima
// well above the line for StepConfirm is a step up, handled the same way.
//
// Estimator is pure: time comes in as arguments, it does no I/O, and it
// is not safe for concurrent use (one goroutine reads the kernel log).
type Estimator struct {
	cfg  Config
	mins []clockPoint // the smallest observation of each bucket, oldest first
	fit  Fit
}

// Config tunes a Estimator; zero fields take the defaults.
type Config struct {
	// Bucket is the width of a bucket of arrival time; one minimum is kept
	// per bucket. Default 10 s: short enough that a drift of 500 ppm moves
	// the offset by at most 5 ms within one.
	Bucket time.Duration
	// Window is how far back minima are kept. Default 20 min.
	Window time.Duration
	// RateSpan is the least span of minima from which a drift is fitted;
	// before that the last known drift (at first none) is kept. Default 60 s:
	// a millisecond of noise over 60 s is 17 ppm.
	RateSpan time.Duration
	// MaxRate bounds the fitted drift. Default 2000 ppm, ten times the worst
	// a crystal-driven clock shows; anything more is noise.
	MaxRate float64
	// StepDown is how far a record may arrive before the fit allows before
	// the offset is taken to have stepped down. Default 250 ms: the record
	// the fit stands on may itself have been that late. A smaller step down
	// needs no detection: the earlier record is a new minimum at once.
	StepDown time.Duration
	// StepUp is how far above the fit the minima must stay, for StepConfirm,
	// before the offset is taken to have stepped up. Default 250 ms (more than
	// the reader's 100 ms poll of a file plus scheduling), and 30 s.
	StepUp, StepConfirm time.Duration
}

func (c Config) withDefaults() Config {
	def := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&c.Bucket, 10*time.Second)
	def(&c.Window, 20*time.Minute)
	def(&c.RateSpan, time.Minute)
	def(&c.StepDown, 250*time.Millisecond)
	def(&c.StepUp, 250*time.Millisecond)
	def(&c.StepConfirm, 30*time.Second)
	if c.MaxRate <= 0 {
		c.MaxRate = 2000e-6
	}
	return c
}

// clockPoint is one observation: arrival on CLOCK_MONOTONIC, and arrival
// minus the record's timestamp.
type clockPoint struct {
	mono, d time.Duration
}

// NewEstimator returns an estimator with cfg (zero fields: defaults).
func NewEstimator(cfg Config) *Estimator {
	return &Estimator{cfg: cfg.withDefaults()}
}

// Observe adds a record that arrived at arrival (CLOCK_MONOTONIC) with
// timestamp stamp (the record's printk time); marker says the logger wrote
// it itself. It returns the updated fit.
func (e *Estimator) Observe(arrival, stamp time.Duration, marker bool) Fit {
	p := clockPoint{mono: arrival, d: arrival - stamp}
	if e.fit.Valid() {
		// Below the fit by more than the fastest plausible drift since its
		// anchor allows: the offset stepped down.
		floor := e.fit.Offset - time.Duration(e.cfg.MaxRate*float64(abs(arrival-e.fit.Ref))) - e.cfg.StepDown
		if p.d < floor {
			e.step()
		}
	}
	e.add(p)
	if e.fit.Valid() && e.steppedUp() {
		e.fit.Steps++
	}
	e.refit()
	e.fit.Records++
	if marker {
		e.fit.Markers++
	}
	if p.d-e.fit.OffsetAt(arrival) <= ConfirmTolerance {
		e.fit.Confirmed = arrival
	}
	return e.fit
}

// Fit returns the current estimate (the zero value before the first record).
func (e *Estimator) Fit() Fit { return e.fit }

// step forgets the history: the offset jumped, and old minima describe the
// clocks as they were before.
func (e *Estimator) step() {
	e.mins = e.mins[:0]
	e.fit.Steps++
}

// add keeps p if it is the smallest of its bucket, and drops minima older
// than the window.
func (e *Estimator) add(p clockPoint) {
	b := p.mono / e.cfg.Bucket
	if n := len(e.mins); n > 0 && e.mins[n-1].mono/e.cfg.Bucket == b {
		if p.d < e.mins[n-1].d {
			e.mins[n-1] = p
		}
	} else {
		e.mins = append(e.mins, p)
	}
	cut := 0
	for cut < len(e.mins) && p.mono-e.mins[cut].mono > e.cfg.Window {
		cut++
	}
	e.mins = append(e.mins[:0], e.mins[cut:]...)
}

// steppedUp reports whether every minimum of the last StepConfirm (at least
// three buckets) lies more than StepUp above the fit made from the ones
// before them. It then keeps only those minima.
func (e *Estimator) steppedUp() bool {
	n := len(e.mins)
	if n < 4 {
		return false
	}
	last := e.mins[n-1].mono
	first := n
	for first > 0 && last-e.mins[first-1].mono <= e.cfg.StepConfirm {
		first--
	}
	// Need at least three buckets spanning StepConfirm, and something before them.
	if n-first < 3 || first == 0 || last-e.mins[first].mono < e.cfg.StepConfirm*2/3 {
		return false
	}
	for _, m := range e.mins[first:] {
		if m.d-e.fit.OffsetAt(m.mono) <= e.cfg.StepUp {
			return false
		}
	}
	e.mins = append(e.mins[:0], e.mins[first:]...)
	return true
}

// refit puts a line under the minima and anchors it at the newest. When they
// span RateSpan, the line is the one under all of them that is highest at
// their mean time: an edge of their lower convex hull, the linear program of
// one-way clock skew estimation (Moon, Skelly, Towsley 1999), which is not
// pulled up by late arrivals as least squares is. Before that, the last known
// drift (at first none) is kept and the line put under all minima.
func (e *Estimator) refit() {
	n := len(e.mins)
	newest := e.mins[n-1]
	rate := e.fit.Rate
	if n >= 3 && newest.mono-e.mins[0].mono >= e.cfg.RateSpan {
		if r, ok := hullRate(e.mins); ok {
			rate = math.Max(-e.cfg.MaxRate, math.Min(e.cfg.MaxRate, r))
		}
	}
	off := time.Duration(math.MaxInt64)
	for _, m := range e.mins {
		if o := m.d - time.Duration(rate*float64(m.mono-newest.mono)); o < off {
			off = o
		}
	}
	e.fit.Ref, e.fit.Offset, e.fit.Rate = newest.mono, off, rate
}

// hullRate returns the slope of the lower convex hull edge of pts (sorted by
// mono) above their mean mono.
func hullRate(pts []clockPoint) (float64, bool) {
	x0 := pts[0].mono
	xy := func(p clockPoint) (float64, float64) { return float64(p.mono - x0), float64(p.d) }
	var mean float64
	for _, p := range pts {
		x, _ := xy(p)
		mean += x
	}
	mean /= float64(len(pts))
	// Andrew's monotone chain, lower half.
	hull := make([]clockPoint, 0, len(pts))
	for _, p := range pts {
		for len(hull) >= 2 {
			ax, ay := xy(hull[len(hull)-2])
			bx, by := xy(hull[len(hull)-1])
			px, py := xy(p)
			if (bx-ax)*(py-ay)-(by-ay)*(px-ax) > 0 {
				break // a left turn: b stays on the lower hull
			}
			hull = hull[:len(hull)-1]
		}
		hull = append(hull, p)
	}
	for i := 1; i < len(hull); i++ {
		ax, ay := xy(hull[i-1])
		bx, by := xy(hull[i])
		if bx >= mean || i == len(hull)-1 {
			if bx == ax {
				return 0, false
			}
			return (by - ay) / (bx - ax), true
		}
	}
	return 0, false
}

func abs(d time.Duration) time.Duration {
	if d < 0 {
		return -d
	}
	return d
}
