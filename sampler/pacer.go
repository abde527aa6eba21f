package sampler

import (
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

// Pacer watches how long the driver takes to answer a whole tick and, when
// that nears the poll interval, reads the less important columns less often
// so the crash-precursor columns (temperature, fans, power and its limits,
// clocks, throttle reasons) stay at full rate.
//
// A real driver's calls cost tenths of a millisecond each, some take a
// driver-wide lock, and then the GPUs of a tick are read one after another:
// 16 GPUs x 14 calls can exceed 100 ms. The pacer measures, per tick, the time
// from the first GPU's sample start to the last GPU's sample end (the tick's
// NVML span), takes the median over the last second (so one slow call does not
// count), and steps through stretchLevels: first the slow tier (encoder and
// decoder utilization, PCIe link, thermal sensor) is read less often, then the
// secondary columns (P-state, utilization, memory used) join a slower cadence.
// It steps back down after a calm period that doubles each time a step down
// had to be undone. Ticks that still do not fit are skipped by the poll loop
// and counted there: the pacer never makes the loop run late or catch up.
//
// All GPUs of a process share one Pacer; Record is called from every GPU's
// worker goroutine and the stats from anywhere. A nil *Pacer keeps every
// column at its normal rate.
type Pacer struct {
	iv  time.Duration
	log *slog.Logger

	level     atomic.Int32
	stretches atomic.Uint64 // steps up, ever
	tickNs    atomic.Int64  // median tick NVML span of the last evaluation
	lateNs    atomic.Int64  // median last-minus-first GPU read of the last evaluation
	measured  atomic.Bool   // tickNs and lateNs hold an evaluation

	mu         sync.Mutex
	groupStart time.Time // first sample start of the tick being collected
	firstEnd   time.Time // earliest and latest sample end of that tick
	lastEnd    time.Time
	spans      [pacerWindow]time.Duration
	lates      [pacerWindow]time.Duration
	n          int       // spans collected since the last evaluation
	changed    time.Time // last level change
	calm       time.Duration
	downAt     time.Time // last step down
	told       bool
}

// pacerWindow is how many ticks one evaluation looks at. The median of ten
// ignores a slow call or two (the realistic profile has one in 1000 calls
// taking 50 ms: about one per second at 8 GPUs).
const pacerWindow = 10

// Thresholds on the median tick NVML span, as fractions of the interval:
// above stretchHigh the pacer steps up (the rest of the interval is headroom
// for jitter, slow calls and the logger's own work); below stretchLow, for a
// calm period, it steps down.
const (
	stretchHigh = 0.5
	stretchLow  = 0.25
	calmFirst   = 30 * time.Second
	calmMax     = 10 * time.Minute
)

// stretchLevels: per level, how many times the slow tier's normal period it
// is read at, and every how many slow-tier periods the secondary columns are
// read (0: every sample).
var stretchLevels = [...]struct {
	slowMult  int
	secondary int
}{
	{1, 0},
	{4, 0},
	{16, 1},
	{64, 4},
}

// NewPacer returns a pacer for the poll interval; log receives the first
// stretch (once) and later level changes (debug).
func NewPacer(interval time.Duration, log *slog.Logger) *Pacer {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Pacer{iv: interval, log: log, calm: calmFirst}
}

// Level is the current stretch level; 0 reads every column at its normal rate.
func (p *Pacer) Level() int {
	if p == nil {
		return 0
	}
	return int(p.level.Load())
}

// PacerStats is what the status line shows of the pacer.
type PacerStats struct {
	Level     int    // 0: every column at its normal rate
	Stretches uint64 // times the pacer stepped up
	// TickNVML is the median time from the first GPU's sample start to the
	// last one's end, last second; LastLate the median time from the first
	// GPU's sample end to the last one's. Both absent until first measured.
	TickNVML, LastLate reading.Opt[time.Duration]
}

// Stats returns the pacer's counters; zero for a nil pacer.
func (p *Pacer) Stats() PacerStats {
	if p == nil {
		return PacerStats{}
	}
	st := PacerStats{Level: p.Level(), Stretches: p.stretches.Load()}
	if p.measured.Load() {
		st.TickNVML, st.LastLate = reading.Some(time.Duration(p.tickNs.Load())), reading.Some(time.Duration(p.lateNs.Load()))
	}
	return st
}

// Record adds one GPU-sample that started at start and whose NVML calls
// ended at end. Samples whose start is within half an interval of the tick's
// first one belong to the same tick.
func (p *Pacer) Record(start, end time.Time) {
	if p == nil || p.iv <= 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	half := p.iv / 2
	switch {
	case p.groupStart.IsZero():
		p.open(start, end)
	case start.Sub(p.groupStart) > half:
		p.close(end)
		p.open(start, end)
	case start.Before(p.groupStart.Add(-half)):
		// A sample of an older tick returning late (a hang): the hang is
		// reported by the poll loop; it says nothing about the cost per tick.
	default:
		if start.Before(p.groupStart) {
			p.groupStart = start
		}
		if end.Before(p.firstEnd) {
			p.firstEnd = end
		}
		if end.After(p.lastEnd) {
			p.lastEnd = end
		}
	}
}

func (p *Pacer) open(start, end time.Time) {
	p.groupStart, p.firstEnd, p.lastEnd = start, end, end
}

// close ends the tick being collected and evaluates every pacerWindow ticks.
func (p *Pacer) close(now time.Time) {
	p.spans[p.n] = p.lastEnd.Sub(p.groupStart)
	p.lates[p.n] = p.lastEnd.Sub(p.firstEnd)
	p.n++
	if p.n < pacerWindow {
		return
	}
	p.n = 0
	span, late := median(&p.spans), median(&p.lates)
	p.tickNs.Store(int64(span))
	p.lateNs.Store(int64(late))
	p.measured.Store(true)
	lvl := int(p.level.Load())
	switch {
	case float64(span) > stretchHigh*float64(p.iv) && lvl < len(stretchLevels)-1:
		if !p.downAt.IsZero() && now.Sub(p.downAt) < 2*p.calm {
			p.calm = min(2*p.calm, calmMax) // the last step down did not hold
		}
		p.set(lvl+1, now, span)
	case float64(span) < stretchLow*float64(p.iv) && lvl > 0 && now.Sub(p.changed) >= p.calm:
		p.downAt = now
		p.set(lvl-1, now, span)
	}
}

func (p *Pacer) set(lvl int, now time.Time, span time.Duration) {
	up := lvl > int(p.level.Load())
	p.level.Store(int32(lvl))
	p.changed = now
	if up {
		p.stretches.Add(1)
	}
	l := stretchLevels[lvl]
	attrs := []any{"level", lvl, "tick_nvml", span.Round(100 * time.Microsecond), "interval", p.iv,
		"slow_tier_every", l.slowMult, "secondary_every", l.secondary}
	if up && !p.told {
		p.told = true
		p.log.Warn("NVML is slow: reading the slow tier (and then P-state, utilization, memory) less often to keep temperature, fans, power, clocks and throttle reasons at full rate; counted as stretches in the status", attrs...)
		return
	}
	p.log.Debug("NVML pacing level changed", attrs...)
}

func median(v *[pacerWindow]time.Duration) time.Duration {
	s := *v // a copy on the stack: no allocation on the sampling path
	slices.Sort(s[:])
	return s[len(s)/2]
}

// SlowDue reports whether once-a-period slow-tier work of GPU idx outside
// its sample (its process reads), which runs every slowEvery ticks at the
// normal rate, is due on tick k at the current stretch level; held says it
// would have been due at the normal rate and the stretch holds it back (the
// caller counts it). GPUs are staggered as in their samples; tick 0 is due
// for every GPU.
func (p *Pacer) SlowDue(k uint64, idx, slowEvery int) (due, held bool) {
	if k == 0 {
		return true, false
	}
	period := uint64(max(slowEvery, 1))
	at := k + uint64(idx)
	normal := at%period == 0
	due = at%(period*uint64(stretchLevels[p.Level()].slowMult)) == 0
	return due, normal && !due
}

// due reports which optional tiers GPU idx reads in its sample number n at
// stretch level lvl, with the slow tier's normal period slowEvery. GPUs are
// staggered (GPU i reads on sample numbers = -i modulo the period) so that a
// tick never reads every GPU's slow tier at once; the first sample reads all.
func due(n uint64, idx, slowEvery, lvl int) (slow, secondary bool) {
	if n == 0 {
		return true, true
	}
	l := stretchLevels[lvl]
	period := uint64(slowEvery * l.slowMult)
	slow = (n+uint64(idx))%period == 0
	secondary = true
	if l.secondary > 0 {
		sp := uint64(slowEvery * l.secondary)
		// Offset by half a period from the slow tier: never both at once.
		secondary = (n+uint64(idx)+sp/2)%sp == 0
	}
	return slow, secondary
}
