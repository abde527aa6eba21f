package anomaly

import (
	"sync/atomic"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

// Counts is how many of each thing a Tracker saw, over some span.
type Counts struct {
	Samples           uint64 // good samples examined
	Skipped           uint64 // failed, hung or lost samples, not examined
	Spikes            uint64 // FAN_SPIKE
	PowerBreaches     uint64 // power above the limit, flagged or not
	FanInversions     uint64 // TEMP_FAN_INV
	SpuriousThrottles uint64 // SPUR_THROT
	TDPChanges        uint64 // TDP_REDUCED and TDP_RESTORED
	ThrottleChanges   uint64 // clocks event reasons transitions
}

// Add returns the field-wise sum of c and o.
func (c Counts) Add(o Counts) Counts {
	return Counts{
		Samples:           c.Samples + o.Samples,
		Skipped:           c.Skipped + o.Skipped,
		Spikes:            c.Spikes + o.Spikes,
		PowerBreaches:     c.PowerBreaches + o.PowerBreaches,
		FanInversions:     c.FanInversions + o.FanInversions,
		SpuriousThrottles: c.SpuriousThrottles + o.SpuriousThrottles,
		TDPChanges:        c.TDPChanges + o.TDPChanges,
		ThrottleChanges:   c.ThrottleChanges + o.ThrottleChanges,
	}
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

// PerMinute holds rates per minute over one window.
type PerMinute struct {
	Window            time.Duration // the window the rates were computed over, at least 1 s
	Samples           float64
	Skipped           float64
	Spikes            float64
	PowerBreaches     float64
	FanInversions     float64
	SpuriousThrottles float64
	TDPChanges        float64
	ThrottleChanges   float64
}

// minRateWindow keeps a summary taken right after the previous one from
// dividing by (nearly) zero, as the seed's max(window_sec, 1.0) did.
const minRateWindow = time.Second

// Rates converts the counts of a window that lasted elapsed into rates per
// minute (count * 60 / seconds), as the seed's summary line does. A window
// shorter than one second counts as one second.
func Rates(window Counts, elapsed time.Duration) PerMinute {
	elapsed = max(elapsed, minRateWindow)
	perMin := float64(time.Minute) / float64(elapsed)
	r := func(n uint64) float64 { return float64(n) * perMin }
	return PerMinute{
		Window:            elapsed,
		Samples:           r(window.Samples),
		Skipped:           r(window.Skipped),
		Spikes:            r(window.Spikes),
		PowerBreaches:     r(window.PowerBreaches),
		FanInversions:     r(window.FanInversions),
		SpuriousThrottles: r(window.SpuriousThrottles),
		TDPChanges:        r(window.TDPChanges),
		ThrottleChanges:   r(window.ThrottleChanges),
	}
}

// counter indexes atomicCounts.
type counter int

// The counters, in Counts order.
const (
	cSamples counter = iota
	cSkipped
	cSpikes
	cPowerBreaches
	cFanInversions
	cSpuriousThrottles
	cTDPChanges
	cThrottleChanges
	numCounters
)

// atomicCounts is Counts that one goroutine updates while others read.
type atomicCounts [numCounters]atomic.Uint64

// counts reads the counts; each field is read atomically, the set is not a
// single snapshot (a sample being counted may show in some fields only).
func (a *atomicCounts) counts(take bool) Counts {
	var v [numCounters]uint64
	for i := range a {
		if take {
			v[i] = a[i].Swap(0)
		} else {
			v[i] = a[i].Load()
		}
	}
	return Counts{
		Samples:           v[cSamples],
		Skipped:           v[cSkipped],
		Spikes:            v[cSpikes],
		PowerBreaches:     v[cPowerBreaches],
		FanInversions:     v[cFanInversions],
		SpuriousThrottles: v[cSpuriousThrottles],
		TDPChanges:        v[cTDPChanges],
		ThrottleChanges:   v[cThrottleChanges],
	}
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
