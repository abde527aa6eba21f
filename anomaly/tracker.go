package anomaly

import (
	"sync/atomic"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/internal/cooldown"
	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

// Result is what one Observe found beyond the flags it added to the sample.
// It is a plain value: returning it does not allocate.
type Result struct {
	// Spike reports a FAN_SPIKE on this sample; the caller decides whether
	// to take a (rate-limited) spike snapshot.
	Spike bool
	// TDP is the power limit change on this sample, if any, for events.log.
	// It is reported on every change, even when its log notice is suppressed.
	TDP reading.Opt[TDPChange]
	// HealthBaseline: this sample holds the GPU's first health reading,
	// for events.log (type=HEALTH_BASELINE with every counter present).
	HealthBaseline bool
	// HealthCritical is the first critical health reason that began on
	// this sample, if any: the caller raises an incident.
	HealthCritical reading.Opt[HealthReason]
	// Verdict is the GPU's hardware health after this sample.
	Verdict HealthVerdict

	n       int
	notices [maxDetectors]Notice
	nh      int
	health  [reading.NumReadings]HealthChange
}

// NumHealthChanges returns how many health counters changed on this sample.
func (r *Result) NumHealthChanges() int { return r.nh }

// HealthChange returns change i, 0 <= i < NumHealthChanges().
func (r *Result) HealthChange(i int) HealthChange { return r.health[:r.nh][i] }

// NumNotices returns how many log notices are due.
func (r *Result) NumNotices() int { return r.n }

// Notice returns due notice i, 0 <= i < NumNotices().
func (r *Result) Notice(i int) Notice { return r.notices[:r.n][i] }

// Tracker runs the detectors over one GPU's samples. Observe must be called
// from one goroutine only (the GPU's poll loop); Counters and TakeWindow may
// be called from any goroutine at the same time.
type Tracker struct {
	gpu      int
	cooldown time.Duration // Config.LogCooldown

	dets []Detector          // indexed like Detectors
	cool []cooldown.Cooldown // each detector's notice cooldown, likewise

	hchg    healthChanges
	hwatch  healthWatch
	reasons uint32        // the verdict's reasons after the last sample
	raised  atomic.Uint32 // event reasons raised (Raise) and not cleared
	quiet   atomic.Uint32 // event reasons restored (Restore): held, not begun
	verdict atomic.Uint32 // the same, for other goroutines

	// Memory of earlier good samples, cleared by every failed, hung or lost one.
	prev    reading.Sample // the previous good sample; valid when hasPrev
	hasPrev bool           // whether prev holds a sample
	seen    int            // good samples since start or the last outage

	total, window       atomicCounts
	peakTemp, peakPower atomicPeak
}

// NewTracker returns a Tracker for GPU gpu. cfg should have passed Validate.
func NewTracker(gpu int, cfg Config) *Tracker {
	t := &Tracker{gpu: gpu, cooldown: cfg.LogCooldown, cool: make([]cooldown.Cooldown, len(Detectors))}
	for _, d := range Detectors {
		t.dets = append(t.dets, d.New(cfg.Knobs))
	}
	return t
}

// Observe examines sample s taken at now: it runs every detector in
// Detectors' order, adds their flags to s.Flags, updates the counters and
// peaks and returns what the caller must act on. A sample whose Status is
// not StatusAnswered is only counted as skipped; it clears the memory of earlier
// samples and the warm-up, so the next good sample is compared with nothing.
// It does not allocate.
func (t *Tracker) Observe(s *reading.Sample, now time.Time) Result {
	var r Result
	if s.Status != reading.StatusAnswered {
		t.Forget()
		t.count(CountSkipped)
		return r
	}
	in := Input{Cur: s, Seen: t.seen, Now: now}
	if t.hasPrev {
		in.Prev = &t.prev
	}
	for i, d := range t.dets {
		f := d.Check(in)
		def := Detectors[i]
		if f.Count {
			t.count(def.counter)
		}
		if f.Flag > 0 {
			s.Flags.Add(reading.Flag{Kind: def.kinds[f.Flag-1], A: f.A, B: f.B})
			r.Spike = r.Spike || def.SpikeSnapshot
			if rs, ok := def.Evidence.Get(); ok {
				t.hwatch.held[rs] = t.hwatch.stampOf(s, now) // HealthWatch.Began
			}
		}
		if f.TDP.OK {
			r.TDP = f.TDP
		}
		if f.Notice {
			t.notify(&r, now, i, f.V)
		}
	}

	t.health(&r, s, now)

	if v, ok := s.U32(reading.TempC).Get(); ok {
		t.peakTemp.observe(v)
	}
	if v, ok := s.U32(reading.PowerMW).Get(); ok {
		t.peakPower.observe(v)
	}
	t.count(CountSamples)
	t.prev = *s
	t.hasPrev = true
	t.seen++
	return r
}

// health runs the health counter detectors: changes for events.log, the
// verdict, a flag and a count for each reason that began.
func (t *Tracker) health(r *Result, s *reading.Sample, now time.Time) {
	r.nh, r.HealthBaseline = t.hchg.check(s, now, &r.health)
	v := t.hwatch.check(s, now)
	v.Reasons |= t.raised.Load()
	began := v.Reasons &^ t.reasons &^ t.quiet.Swap(0)
	for rs := range NumHealthReasons {
		if began&(1<<rs) == 0 {
			continue
		}
		d := HealthReasonDefs[rs]
		if d.Critical {
			s.Flags.Add(reading.Flag{Kind: reading.FlagHealthCrit, S: d.Name})
			t.count(countHealthCritical)
			if !r.HealthCritical.OK {
				r.HealthCritical = reading.Some(rs)
			}
		} else {
			s.Flags.Add(reading.Flag{Kind: reading.FlagHealthWarn, S: d.Name})
			t.count(countHealthWarnings)
		}
	}
	t.reasons = v.Reasons
	t.verdict.Store(v.Reasons)
	r.Verdict = v
}

// Raise raises event reason r (IsEventReason) from now on: the next sample's
// verdict holds it, and its beginning is that sample's (a flag, a count, the
// incident of a critical one), once however often it is raised until
// Clear. It reports whether r was not raised already. Safe for concurrent use.
func (t *Tracker) Raise(r HealthReason) bool {
	if !IsEventReason(r) {
		return false
	}
	return t.raised.Or(1<<r)&(1<<r) == 0
}

// Raised reports whether event reason r is raised. Safe for concurrent use.
func (t *Tracker) Raised(r HealthReason) bool { return t.raised.Load()&(1<<r) != 0 }

// Restore raises event reason r that an earlier run of the logger raised
// and nobody acknowledged (a restart in the same boot): the verdict holds it
// from the next sample, which does not begin it again (no flag, count or
// incident: the earlier run's was). Safe for concurrent use.
func (t *Tracker) Restore(r HealthReason) {
	if IsEventReason(r) {
		t.quiet.Or(1 << r)
		t.raised.Or(1 << r)
	}
}

// Clear clears event reason r (an operator acknowledged the GPU's action,
// which r was a reason of): the next sample's verdict no longer holds it.
// Safe for concurrent use.
func (t *Tracker) Clear(r HealthReason) { t.raised.And(^uint32(1 << r)) }

// Verdict returns the GPU's hardware health as of the last sample. Safe
// for concurrent use.
func (t *Tracker) Verdict() HealthVerdict { return HealthVerdict{Reasons: t.verdict.Load()} }

// Forget clears the memory of earlier samples, as a failed sample does. Call
// it from the Observe goroutine after an outage the tracker did not see (a
// call that hung: its rows were written by another goroutine), so the first
// sample afterwards is not compared with one from before the outage.
// Cooldowns are kept: they limit log volume, which an outage does not change.
func (t *Tracker) Forget() {
	t.hasPrev = false
	t.seen = 0
}

// notify adds detector i's notice with values v to r unless its cooldown
// holds it back.
func (t *Tracker) notify(r *Result, now time.Time, i int, v [2]uint64) {
	ok, suppressed, _ := t.cool[i].Allow(now, t.cooldown)
	if !ok {
		return
	}
	r.notices[r.n] = Notice{Kind: NoticeKind(i + 1), GPU: t.gpu, Suppressed: suppressed, V: v}
	r.n++
}

// count adds one to counter c in the totals and the window.
func (t *Tracker) count(c Counter) {
	t.total[c].Add(1)
	t.window[c].Add(1)
}

// Counters returns the totals, the current window and the peaks. Safe for
// concurrent use.
func (t *Tracker) Counters() Counters {
	return Counters{
		Total:       t.total.counts(false),
		Window:      t.window.counts(false),
		PeakTempC:   t.peakTemp.get(),
		PeakPowerMW: t.peakPower.get(),
	}
}

// TakeWindow returns the counters with Window holding the window just closed,
// and starts a new window. Safe for concurrent use; a count made while it runs
// lands in either window, never in both or neither.
func (t *Tracker) TakeWindow() Counters {
	w := t.window.counts(true)
	return Counters{
		Total:       t.total.counts(false),
		Window:      w,
		PeakTempC:   t.peakTemp.get(),
		PeakPowerMW: t.peakPower.get(),
	}
}
