package anomaly

import (
	"sync"
	"testing"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

// step is one sample fed to a Tracker and what it must produce.
type step struct {
	s     *reading.Sample
	flags string // s.Flags after Observe
	spike bool   // Result.Spike
	tdp   bool   // Result.TDP present
}

// good returns n unremarkable-but-modified samples that must raise nothing.
func good(n int, mods ...mod) []step {
	out := make([]step, n)
	for i := range out {
		out[i] = step{s: mk(mods...)}
	}
	return out
}

// then joins step lists.
func then(parts ...[]step) []step {
	var out []step
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// one is a single step.
func one(s *reading.Sample, flags string) []step { return []step{{s: s, flags: flags}} }

// withFlag puts a flag on the sample before Observe, as the sampler may.
func withFlag(f reading.Flag) mod { return func(s *reading.Sample) { s.Flags.Add(f) } }

func TestTrackerScenarios(t *testing.T) {
	hot := []mod{tempAt(pct(90)), fansAt(pct(30))}
	tests := []struct {
		name  string
		steps []step
	}{
		{"lost GPU in the middle: no false TDP_REDUCED or FAN_SPIKE after recovery", then(
			good(12),
			one(mk(zeroed, status(reading.StatusLost)), ""),
			one(mk(zeroed, status(reading.StatusFailed)), ""),
			good(2, limitAt(watts(550)), fansAt(pct(80), pct(80))),
			[]step{{s: mk(limitAt(watts(500)), fansAt(pct(80), pct(80))), flags: "TDP_REDUCED(500W)", tdp: true}},
		)},
		{"hung sample restarts the inversion warm-up", then(
			good(11, hot...),
			one(mk(hot...), "TEMP_FAN_INV(90C@30%)"),
			one(mk(status(reading.StatusHung)), ""),
			good(11, hot...), // 0..10 samples seen: still warming up
			one(mk(hot...), "TEMP_FAN_INV(90C@30%)"),
		)},
		{"fan spike needs more than 2 samples seen", then(
			good(1, fansAt(pct(0))),
			good(1, fansAt(pct(50))),
			good(1, fansAt(pct(0))),
			[]step{{s: mk(fansAt(pct(50))), flags: "FAN_SPIKE", spike: true}},
		)},
		{"fan spike warm-up restarts after a failure", then(
			good(5, fansAt(pct(20))),
			one(mk(status(reading.StatusFailed)), ""),
			good(1, fansAt(pct(80))),
			good(1, fansAt(pct(20))),
			good(1, fansAt(pct(80))),
			[]step{{s: mk(fansAt(pct(20))), flags: "FAN_SPIKE", spike: true}},
		)},
		{"TDP compared with the last present limit", then(
			good(1, limitAt(watts(600))),
			good(1, limitAt(absent32)),
			[]step{{s: mk(limitAt(watts(590))), flags: "TDP_REDUCED(590W)", tdp: true}},
			[]step{{s: mk(limitAt(watts(600))), flags: "TDP_RESTORED(600W)", tdp: true}},
		)},
		{"absent fan speed in between: no spike", then(
			good(5, fansAt(pct(20))),
			good(1, fansAt(absent32)),
			good(1, fansAt(pct(80))),
		)},
		{"fanless GPU at 95 C", good(20, tempAt(pct(95)), fansAt())},
		{"flags in the Python logger's order, sampler's flags kept", then(
			good(11),
			[]step{{s: mk(withFlag(reading.Flag{Kind: reading.FlagXid, A: 79}),
				limitAt(watts(500)), fansAt(pct(20), pct(20)), tempAt(pct(90)),
				throttleAt(mask(reading.ThrottleSwPowerCap)), powerAt(watts(100))),
				flags: "XID(79)|TDP_REDUCED(500W)|FAN_SPIKE|TEMP_FAN_INV(90C@20%)|SPUR_THROT(20%ofLim)",
				spike: true, tdp: true}},
		)},
		{"power breach flagged only beyond 50 W", then(
			one(mk(powerAt(watts(650))), ""),
			one(mk(powerAt(mw(650_001))), "PWR+50W"),
		)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := NewTracker(0, DefaultConfig())
			for i, st := range tt.steps {
				r := tr.Observe(st.s, t0.Add(time.Duration(i)*tick))
				if got := st.s.Flags.String(); got != st.flags {
					t.Errorf("step %d: flags %q, want %q", i, got, st.flags)
				}
				if r.Spike != st.spike || r.TDP.OK != st.tdp {
					t.Errorf("step %d: spike %v tdp %v, want %v %v", i, r.Spike, r.TDP.OK, st.spike, st.tdp)
				}
			}
		})
	}
}

// TestTrackerNoticeCooldown: the flag is raised on every sample, the notice
// once per minute, carrying the count of those held back.
func TestTrackerNoticeCooldown(t *testing.T) {
	tests := []struct {
		name   string
		warmup []mod // the steady state before the anomaly
		mods   []mod // the anomaly
		kind   NoticeKind
	}{
		{"fan inversion", []mod{fansAt(pct(30))}, []mod{tempAt(pct(90)), fansAt(pct(30))}, NoticeFanInversion},
		{"spurious throttle", []mod{throttleAt(mask(reading.ThrottleSwPowerCap))},
			[]mod{throttleAt(mask(reading.ThrottleSwPowerCap)), powerAt(watts(50))}, NoticeSpuriousThrottle},
		{"power over", nil, []mod{powerAt(watts(700))}, NoticePowerOver},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := NewTracker(4, DefaultConfig())
			// 11 samples of warm-up; then the anomaly on every sample for 130 s.
			for i := 0; i < 11; i++ {
				tr.Observe(mk(tt.warmup...), t0.Add(time.Duration(i)*tick))
			}
			start := t0.Add(11 * tick)
			type got struct {
				at         time.Duration
				suppressed uint64
			}
			var notices []got
			const n = 1300
			for i := 0; i < n; i++ {
				s := mk(tt.mods...)
				r := tr.Observe(s, start.Add(time.Duration(i)*tick))
				if s.Flags.Len() != 1 {
					t.Fatalf("sample %d: flags %q, want one", i, s.Flags.String())
				}
				for j := 0; j < r.NumNotices(); j++ {
					nt := r.Notice(j)
					if nt.Kind != tt.kind || nt.GPU != 4 {
						t.Fatalf("sample %d: notice %+v", i, nt)
					}
					notices = append(notices, got{time.Duration(i) * tick, nt.Suppressed})
				}
			}
			want := []got{{0, 0}, {60 * time.Second, 599}, {120 * time.Second, 599}}
			if len(notices) != len(want) {
				t.Fatalf("notices %v, want %v", notices, want)
			}
			for i := range want {
				if notices[i] != want[i] {
					t.Errorf("notice %d = %+v, want %+v", i, notices[i], want[i])
				}
			}
			c := tr.Counters().Total
			counted := map[NoticeKind]uint64{
				NoticeFanInversion: c[CountFanInversions], NoticeSpuriousThrottle: c[CountSpuriousThrottles], NoticePowerOver: c[CountPowerBreaches],
			}[tt.kind]
			if counted != n {
				t.Errorf("counted %d, want %d", counted, n)
			}
		})
	}
}

// TestTrackerTDPEventsNotRateLimited: every change gives an event; the log
// notices are rate-limited.
func TestTrackerTDPEventsNotRateLimited(t *testing.T) {
	tr := NewTracker(0, DefaultConfig())
	events, notices := 0, 0
	for i := 0; i < 100; i++ {
		limit := uint32(600)
		if i%2 == 1 {
			limit = 500
		}
		r := tr.Observe(mk(limitAt(watts(limit))), t0.Add(time.Duration(i)*tick))
		if r.TDP.OK {
			events++
		}
		notices += r.NumNotices()
	}
	if events != 99 || notices != 1 || tr.Counters().Total[CountTDPChanges] != 99 {
		t.Errorf("events %d notices %d counted %d, want 99 1 99", events, notices, tr.Counters().Total[CountTDPChanges])
	}
}

func TestTrackerThrottleNotice(t *testing.T) {
	tr := NewTracker(2, DefaultConfig())
	tr.Observe(mk(throttleAt(mask(0))), t0)
	r := tr.Observe(mk(throttleAt(mask(reading.ThrottleSwPowerCap))), t0.Add(tick))
	if r.NumNotices() != 1 {
		t.Fatalf("notices %d, want 1", r.NumNotices())
	}
	n := r.Notice(0)
	if n.Kind != NoticeThrottleChange || n.V != [2]uint64{0, reading.ThrottleSwPowerCap} || n.GPU != 2 {
		t.Errorf("notice %+v", n)
	}
	if c := tr.Counters().Total[CountThrottleChanges]; c != 1 {
		t.Errorf("ThrottleChanges %d, want 1", c)
	}
}

func TestTrackerCounters(t *testing.T) {
	tr := NewTracker(0, DefaultConfig())
	if c := tr.Counters(); c != (Counters{}) {
		t.Fatalf("new tracker: %+v", c)
	}
	// Failed samples and absent readings leave the peaks absent.
	tr.Observe(mk(zeroed, status(reading.StatusLost)), t0)
	tr.Observe(mk(tempAt(absent32), powerAt(absent32)), t0.Add(tick))
	c := tr.Counters()
	if c.PeakTempC.OK || c.PeakPowerMW.OK {
		t.Errorf("peaks %+v %+v, want absent", c.PeakTempC, c.PeakPowerMW)
	}
	if c.Total[CountSamples] != 1 || c.Total[CountSkipped] != 1 || c.Window != c.Total {
		t.Errorf("counters %+v", c)
	}
	tr.Observe(mk(tempAt(pct(70)), powerAt(watts(700))), t0.Add(2*tick)) // breach, no flag
	tr.Observe(mk(tempAt(pct(65)), powerAt(watts(200))), t0.Add(3*tick))
	w := tr.TakeWindow()
	wantWin := Counts{CountSamples: 3, CountSkipped: 1}
	wantWin[CountPowerBreaches] = 1
	if w.Window != wantWin || w.Total != wantWin {
		t.Errorf("TakeWindow = %+v, want window and total %+v", w, wantWin)
	}
	if w.PeakTempC != pct(70) || w.PeakPowerMW != watts(700) {
		t.Errorf("peaks %+v %+v, want 70 C 700 W", w.PeakTempC, w.PeakPowerMW)
	}
	tr.Observe(mk(), t0.Add(4*tick))
	c = tr.Counters()
	if c.Window != (Counts{CountSamples: 1}) || c.Total[CountSamples] != 4 {
		t.Errorf("after TakeWindow: %+v", c)
	}
}

// TestTrackerConcurrentCounters runs Observe against readers; go test -race
// checks the access, and the windows must add up to the totals.
func TestTrackerConcurrentCounters(t *testing.T) {
	tr := NewTracker(0, DefaultConfig())
	var wg sync.WaitGroup
	var taken Counts
	done := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-done:
				return
			default:
				taken = taken.Add(tr.TakeWindow().Window)
				_ = tr.Counters()
			}
		}
	}()
	const n = 5000
	for i := 0; i < n; i++ {
		s := mk(powerAt(watts(uint32(550 + i%2*100))))
		if i%50 == 0 {
			s.Status = reading.StatusFailed
		}
		tr.Observe(s, t0.Add(time.Duration(i)*tick))
	}
	close(done)
	wg.Wait()
	taken = taken.Add(tr.TakeWindow().Window)
	total := tr.Counters().Total
	if taken != total {
		t.Errorf("windows add up to %+v, totals %+v", taken, total)
	}
	if total[CountSamples]+total[CountSkipped] != n || total[CountSkipped] != n/50 || total[CountPowerBreaches] == 0 {
		t.Errorf("totals %+v", total)
	}
}

// allocSamples are two samples that between them fire every detector and,
// with no cooldown, every notice.
func allocSamples() [2]reading.Sample {
	a := *mk(limitAt(watts(600)), fansAt(pct(80), pct(80)), throttleAt(mask(0)), powerAt(watts(700)))
	b := *mk(limitAt(watts(500)), fansAt(pct(20), pct(20)), tempAt(pct(90)),
		throttleAt(mask(reading.ThrottleSwPowerCap)), powerAt(watts(100)))
	return [2]reading.Sample{a, b}
}

func TestObserveDoesNotAllocate(t *testing.T) {
	cfg := DefaultConfig()
	cfg.LogCooldown = 0
	tr := NewTracker(0, cfg)
	ss := allocSamples()
	i := 0
	notices := 0
	allocs := testing.AllocsPerRun(1000, func() {
		s := &ss[i%2]
		s.Flags.Reset()
		if i%97 == 96 {
			s.Status = reading.StatusLost
		}
		r := tr.Observe(s, t0.Add(time.Duration(i)*tick))
		s.Status = reading.StatusAnswered
		notices += r.NumNotices()
		i++
	})
	if allocs != 0 {
		t.Errorf("Observe allocates %v times per call", allocs)
	}
	if notices == 0 || tr.Counters().Total[CountSpikes] == 0 {
		t.Errorf("the samples did not exercise the detectors: %+v", tr.Counters())
	}
}

func BenchmarkObserve(b *testing.B) {
	tr := NewTracker(0, DefaultConfig())
	ss := allocSamples()
	now := t0
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		s := &ss[i%2]
		s.Flags.Reset()
		tr.Observe(s, now)
		now = now.Add(tick)
		i++
	}
}

func TestForgetRestartsWarmup(t *testing.T) {
	tr := NewTracker(0, DefaultConfig())
	for i := range 5 {
		tr.Observe(mk(fansAt(pct(30))), t0.Add(time.Duration(i)*tick))
	}
	tr.Forget()
	// After an unseen outage the fans and the limit moved: no spike, no TDP flag.
	s := mk(fansAt(pct(90)), limitAt(watts(300)))
	tr.Observe(s, t0.Add(time.Second))
	if s.Flags.Len() != 0 {
		t.Errorf("flags after Forget: %s", s.Flags.String())
	}
}

// An event reason (nvswitch_fatal, a fatal SXid) begins on the next sample
// once, however often it is raised (a burst of SXid lines is one incident),
// holds until Clear, and begins again when raised after it; a reason read
// from samples cannot be raised.
func TestTrackerRaisedReason(t *testing.T) {
	tr := NewTracker(0, DefaultConfig())
	at := func(i int) time.Time { return t0.Add(time.Duration(i) * tick) }
	if r := tr.Observe(mk(), at(0)); r.Verdict.Has(ReasonNVSwitchFatal) {
		t.Fatal("nvswitch_fatal before any raise")
	}
	if tr.Raise(ReasonDBE) || tr.Raised(ReasonDBE) {
		t.Error("a reason read from samples was raised")
	}
	if !tr.Raise(ReasonNVSwitchFatal) || tr.Raise(ReasonNVSwitchFatal) {
		t.Error("Raise does not report the first raise only")
	}
	r := tr.Observe(mk(), at(1))
	if c, ok := r.HealthCritical.Get(); !ok || c != ReasonNVSwitchFatal || r.Verdict.Level() != "critical" {
		t.Fatalf("raised nvswitch_fatal: critical %v, verdict %v", r.HealthCritical, r.Verdict.Names())
	}
	tr.Raise(ReasonNVSwitchFatal) // the burst goes on
	for i := 2; i < 5; i++ {
		if r := tr.Observe(mk(), at(i)); r.HealthCritical.OK || !r.Verdict.Has(ReasonNVSwitchFatal) {
			t.Fatalf("sample %d: critical %v verdict %v, want the reason held and not begun again", i, r.HealthCritical, r.Verdict.Names())
		}
	}
	if n := tr.Counters().Total[countHealthCritical]; n != 1 {
		t.Errorf("health_critical %d, want 1", n)
	}
	tr.Clear(ReasonNVSwitchFatal)
	if r := tr.Observe(mk(), at(5)); r.Verdict.Has(ReasonNVSwitchFatal) || tr.Verdict().Reasons != 0 {
		t.Errorf("cleared: verdict %v", r.Verdict.Names())
	}
	tr.Raise(ReasonNVSwitchFatal)
	if r := tr.Observe(mk(), at(6)); !r.HealthCritical.OK {
		t.Error("raised again after Clear: not begun again")
	}
}

// A restored event reason (an earlier run's, not acknowledged) is held from
// the next sample without beginning: no critical, no count; cleared, it can
// begin again.
func TestTrackerRestoreEventReason(t *testing.T) {
	tr := NewTracker(0, DefaultConfig())
	tr.Restore(ReasonNVSwitchFatal)
	for i := range 3 {
		r := tr.Observe(mk(), t0.Add(time.Duration(i)*time.Second))
		if r.HealthCritical.OK || !r.Verdict.Has(ReasonNVSwitchFatal) {
			t.Fatalf("sample %d: critical %v verdict %v, want held, not begun", i, r.HealthCritical, r.Verdict.Names())
		}
	}
	if n := tr.Counters().Total[countHealthCritical]; n != 0 {
		t.Errorf("health_critical %d, want 0 (the earlier run counted it)", n)
	}
	tr.Clear(ReasonNVSwitchFatal)
	tr.Observe(mk(), t0.Add(3*time.Second))
	tr.Raise(ReasonNVSwitchFatal)
	if r := tr.Observe(mk(), t0.Add(4*time.Second)); !r.HealthCritical.OK {
		t.Error("raised after the restored one was cleared: not begun")
	}
}

// A replay (HealthWatch.Began from a row's flag) holds an event reason to
// the end: its clearing is on no row.
func TestHealthWatchBeganEventReason(t *testing.T) {
	var h HealthWatch
	h.Began(ReasonNVSwitchFatal, mk(), t0)
	for i := range 3 {
		if v := h.Check(mk(), t0.Add(time.Duration(i)*time.Hour)); !v.Has(ReasonNVSwitchFatal) {
			t.Fatalf("after %dh: nvswitch_fatal not held", i)
		}
	}
}
