package sampler

import (
	"cmp"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/internal/counters"
	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

// Pacer watches how long the driver takes to answer a whole tick and, when
// that nears the poll interval, reads the less important columns less often
// so the crash-precursor columns (temperature, fans, power and its limits,
// clocks, throttle reasons) stay at full rate.
//
// A real driver's calls cost tenths of a millisecond each and some take a
// driver-wide lock: 16 GPUs x 14 calls can exceed 100 ms. The pacer takes
// the median, over the last second, of each tick's NVML span (first GPU's
// sample start to last GPU's sample end) and steps through stretchLevels:
// the slow tier first, then the secondary columns (P-state, utilization,
// memory used). It steps back down after a calm period that doubles each
// time a step down had to be undone. Ticks that still do not fit are
// skipped and counted by the poll loop.
//
// The host's GPUs share one Pacer (Record from every worker, the stats
// from anywhere). A nil *Pacer keeps every column at its normal rate.
type Pacer struct {
	iv  time.Duration
	log *slog.Logger
	reg *counters.Registry // nvml_stretches: its steps up

	level    atomic.Int32
	measured atomic.Pointer[PacerStats] // the last evaluation's medians (Level not set); nil: none yet

	mu                sync.Mutex
	groupStart        time.Time // first sample start of the tick being collected
	firstEnd, lastEnd time.Time // earliest and latest sample end of that tick
	spans, lates      [pacerWindow]time.Duration
	n                 int       // spans collected since the last evaluation
	changed, downAt   time.Time // last level change, last step down
	calm              time.Duration
}

// pacerWindow is how many ticks one evaluation looks at: the median of ten
// ignores a slow call or two (one in 1000 calls takes 50 ms in the
// realistic profile: about one per second at 8 GPUs).
const pacerWindow = 10

// Thresholds on the median tick NVML span, as fractions of the interval:
// above stretchHigh the pacer steps up (the rest is headroom for jitter and
// the logger's own work); below stretchLow, for a calm period, down.
const (
	stretchHigh = 0.5
	stretchLow  = 0.25
	calmFirst   = 30 * time.Second
	calmMax     = 10 * time.Minute
)

// stretchLevels: per level, the slow tier's period in normal periods, and
// the secondary columns' in slow-tier periods (0: every sample).
var stretchLevels = [...]struct {
	slowMult  int
	secondary int
}{
	{1, 0},
	{4, 0},
	{16, 1},
	{64, 4},
}

// NewPacer returns a pacer for the poll interval that counts its steps up
// in reg.
func NewPacer(interval time.Duration, reg *counters.Registry, log *slog.Logger) *Pacer {
	log = cmp.Or(log, slog.New(slog.DiscardHandler))
	return &Pacer{iv: interval, log: log, reg: counters.Need(reg, "sampler.NewPacer's registry"), calm: calmFirst}
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
	Level int // 0: every column at its normal rate
	// TickNVML is the median tick NVML span, last second; LastLate the
	// median time from the first GPU's sample end to the last one's.
	TickNVML, LastLate reading.Opt[time.Duration]
}

// Stats returns the pacer's counters; zero for a nil pacer.
func (p *Pacer) Stats() PacerStats {
	if p == nil {
		return PacerStats{}
	}
	var st PacerStats
	if m := p.measured.Load(); m != nil {
		st = *m
	}
	st.Level = p.Level()
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
	case !p.groupStart.IsZero() && start.Sub(p.groupStart) > half:
		p.close(end)
		fallthrough
	case p.groupStart.IsZero():
		p.groupStart, p.firstEnd, p.lastEnd = start, end, end
	case start.Before(p.groupStart.Add(-half)):
		// A sample of an older tick returning late (a hang, reported by the
		// poll loop) says nothing about the cost per tick.
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
	p.measured.Store(&PacerStats{TickNVML: reading.Some(span), LastLate: reading.Some(late)})
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
	l := stretchLevels[lvl]
	attrs := []any{"level", lvl, "tick_nvml", span.Round(100 * time.Microsecond), "interval", p.iv,
		"slow_tier_every", l.slowMult, "secondary_every", l.secondary}
	if up && p.reg.Add(nvmlStretches, 1) == 1 {
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

// SlowDue reports whether GPU idx's slow-tier work outside its sample (its
// process reads, every slowEvery ticks at the normal rate) is due on tick
// k at the current stretch level, as its sample's slow tier (due); held:
// due at the normal rate but held back by the stretch.
func (p *Pacer) SlowDue(k uint64, idx, slowEvery int) (now, held bool) {
	slowEvery = max(slowEvery, 1)
	normal, _ := due(k, idx, slowEvery, 0)
	now, _ = due(k, idx, slowEvery, p.Level())
	return now, normal && !now
}

// due reports which optional tiers GPU idx reads in its sample number n at
// stretch level lvl. GPU i reads on sample numbers = -i modulo the period,
// so a tick never reads every GPU's slow tier at once; sample 0 reads all.
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
