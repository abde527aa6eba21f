package anomaly

import (
	"slices"
	"sync/atomic"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

// Counter names one thing a Tracker counts; it indexes Counts and
// CounterDefs.
type Counter int

// The Tracker's own counters; each detector's follows (Def.Counter), then
// the health verdict's.
const (
	CountSamples Counter = iota // good samples examined
	CountSkipped                // failed, hung or lost samples
)

// CounterDef declares one counter. Every output walks CounterDefs (status
// line, summary.log, snapshot headers).
type CounterDef struct {
	Name     string // summary.log name: "pwr_breaches"
	Short    string // status line name: "pwr"
	Snapshot string // snapshot header name, as the Python logger wrote it ("pwr_breach"); empty: not in headers
	Help     string
	// Window is how the summary line and the status line show the current
	// window next to the total.
	Window WindowStyle
}

// WindowStyle is how a counter's current window is shown next to its total.
type WindowStyle uint8

// Window styles, as the Python logger's summary line had them.
const (
	WindowNone   WindowStyle = iota // total only
	WindowDelta                     // "(+N)"
	WindowRate                      // "(rate=R/min)"; the status line shows "(+N, R/min)"
	WindowPeriod                    // "(period=N)"
)

// CounterDefs declares every counter, indexed by Counter: the Tracker's,
// the detectors' (in pythonOrder.counters), the health verdict's. register
// builds it.
var CounterDefs []CounterDef

// maxCounters bounds CounterDefs: Counts has room for this many.
const maxCounters = 4 + maxDetectors

// The health verdict's counters (healthverdict.go): reasons begun; their
// places follow the detectors' (counterDefs sets them).
var countHealthWarnings, countHealthCritical Counter

// counterDefs builds CounterDefs and sets each detector's place in it.
func counterDefs() []CounterDef {
	defs := []CounterDef{
		CountSamples: {Name: "samples", Short: "samples", Help: "good samples examined", Window: WindowDelta},
		CountSkipped: {Name: "skipped", Short: "skipped", Help: "failed, hung or lost samples, not examined"},
	}
	for _, d := range inOrder(pythonOrder.counters, Detectors) {
		d.counter = Counter(len(defs))
		defs = append(defs, d.Counter)
	}
	countHealthWarnings, countHealthCritical = Counter(len(defs)), Counter(len(defs)+1)
	return append(defs,
		CounterDef{Name: "health_warnings", Short: "hw_warn", Snapshot: "health_warn", Help: "hardware health warnings begun (HEALTH_WARN)"},
		CounterDef{Name: "health_critical", Short: "hw_crit", Snapshot: "health_crit", Help: "hardware health critical conditions begun (HEALTH_CRIT)"})
}

// CounterNamed returns the counter called name (CounterDef.Name); it panics
// for an unknown name, a programming error every test finds.
func CounterNamed(name string) Counter {
	i := slices.IndexFunc(CounterDefs, func(d CounterDef) bool { return d.Name == name })
	if i < 0 {
		panic("anomaly: no counter " + name)
	}
	return Counter(i)
}

// Counts is how many of each thing a Tracker saw, over some span, indexed
// by Counter.
type Counts [maxCounters]uint64

// Add returns the counter-wise sum of c and o.
func (c Counts) Add(o Counts) Counts {
	for i := range c {
		c[i] += o[i]
	}
	return c
}

// Counters is what a Tracker has counted: totals since it was made, the
// current window (since the last TakeWindow) and the peaks, which are absent
// until a present reading was examined.
type Counters struct {
	Total       Counts
	Window      Counts
	PeakTempC   reading.Opt[uint32]
	PeakPowerMW reading.Opt[uint32]
}

// Sum adds up the counters of several GPUs; peaks are the highest present.
func Sum(cs []Counters) Counters {
	var s Counters
	for _, c := range cs {
		s.Total = s.Total.Add(c.Total)
		s.Window = s.Window.Add(c.Window)
		s.PeakTempC = maxOpt(s.PeakTempC, c.PeakTempC)
		s.PeakPowerMW = maxOpt(s.PeakPowerMW, c.PeakPowerMW)
	}
	return s
}

// maxOpt returns the larger of two optional values, ignoring absent ones.
func maxOpt(a, b reading.Opt[uint32]) reading.Opt[uint32] {
	if !b.OK || (a.OK && a.V >= b.V) {
		return a
	}
	return b
}

// PerMinute holds rates per minute over one window, indexed by Counter.
type PerMinute [maxCounters]float64

// minRateWindow keeps a summary taken right after the previous one from
// dividing by (nearly) zero, as the Python logger's max(window_sec, 1.0) did.
const minRateWindow = time.Second

// RateWindow is the span rates are computed over for a window that lasted
// elapsed: at least one second.
func RateWindow(elapsed time.Duration) time.Duration { return max(elapsed, minRateWindow) }

// Rates converts the counts of a window that lasted elapsed into rates per
// minute (count * 60 / seconds), as the Python logger's summary line did. A window
// shorter than one second counts as one second (RateWindow).
func Rates(window Counts, elapsed time.Duration) PerMinute {
	perMin := float64(time.Minute) / float64(RateWindow(elapsed))
	var r PerMinute
	for i, n := range window {
		r[i] = float64(n) * perMin
	}
	return r
}

// atomicCounts is Counts that one goroutine updates while others read.
type atomicCounts [maxCounters]atomic.Uint64

// counts reads the counts; each field is read atomically, the set is not a
// single snapshot (a sample being counted may show in some fields only).
func (a *atomicCounts) counts(take bool) Counts {
	var v Counts
	for i := range a {
		if take {
			v[i] = a[i].Swap(0)
		} else {
			v[i] = a[i].Load()
		}
	}
	return v
}

// atomicPeak is a running maximum written by one goroutine and read by
// others; it stores the value plus one so that zero means absent.
type atomicPeak struct{ v atomic.Uint64 }

// observe raises the peak to v if v is higher. Only the owner calls it.
func (p *atomicPeak) observe(v uint32) {
	if cur := p.v.Load(); cur == 0 || uint64(v)+1 > cur {
		p.v.Store(uint64(v) + 1)
	}
}

// get returns the peak, absent if nothing was observed.
func (p *atomicPeak) get() reading.Opt[uint32] {
	cur := p.v.Load()
	if cur == 0 {
		return reading.Opt[uint32]{}
	}
	return reading.Some(uint32(cur - 1))
}
