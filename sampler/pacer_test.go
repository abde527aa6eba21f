package sampler

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/internal/counters"
	"github.com/gpu-telemetry/gpu-telemetry/reading"
	"github.com/gpu-telemetry/gpu-telemetry/sampler/fakenvml"
)

// feed records ticks of gpus GPU-samples each, every interval from t0, where
// GPU i's NVML calls end at tick start + (i+1) x per (one after another, as
// under a driver lock). It returns the time after the last tick.
func feed(p *Pacer, t0 time.Time, iv time.Duration, ticks, gpus int, per time.Duration) time.Time {
	for k := range ticks {
		start := t0.Add(time.Duration(k) * iv)
		for i := range gpus {
			p.Record(start.Add(time.Duration(i)*10*time.Microsecond), start.Add(time.Duration(i+1)*per))
		}
	}
	return t0.Add(time.Duration(ticks) * iv)
}

func TestPacerStepsUpOnceTheTickNearsTheInterval(t *testing.T) {
	var logs bytes.Buffer
	iv := 100 * time.Millisecond
	reg := counters.New()
	p := NewPacer(iv, reg, slog.New(slog.NewTextHandler(&logs, nil)))
	t0 := time.Unix(1000, 0)
	if st := p.Stats(); st.TickNVML.OK || st.LastLate.OK {
		t.Errorf("nothing measured yet, yet %+v: absent is not zero", st)
	}
	// 8 GPUs x 4 ms one after another: 32 ms per tick, under half the interval.
	t1 := feed(p, t0, iv, 50, 8, 4*time.Millisecond)
	if st := p.Stats(); st.Level != 0 || reg.Load(nvmlStretches) != 0 {
		t.Fatalf("32 ms per tick at 100 ms: %+v, want level 0", st)
	}
	if st := p.Stats(); st.TickNVML != reading.Some(32*time.Millisecond) || st.LastLate != reading.Some(28*time.Millisecond) {
		t.Errorf("tick NVML %v, last-GPU lateness %v; want 32 ms and 28 ms", st.TickNVML, st.LastLate)
	}
	// 16 GPUs x 4 ms: 64 ms per tick. One step per evaluated second, to the top.
	t2 := feed(p, t1, iv, 100, 16, 4*time.Millisecond)
	st := p.Stats()
	if st.Level != len(stretchLevels)-1 || reg.Load(nvmlStretches) != uint64(len(stretchLevels)-1) {
		t.Fatalf("64 ms per tick at 100 ms: %+v after %d stretches, want level %d after %d", st, reg.Load(nvmlStretches), len(stretchLevels)-1, len(stretchLevels)-1)
	}
	if n := strings.Count(logs.String(), "NVML is slow"); n != 1 {
		t.Errorf("the stretch is logged %d times, want once:\n%s", n, logs.String())
	}
	if !strings.Contains(logs.String(), "level=1") {
		t.Errorf("log lacks the level: %s", logs.String())
	}
	// Calm again (8 ms per tick): one step down per calm period (counted from
	// the last change, about 6 s before t2), not sooner.
	t3 := feed(p, t2, iv, 100, 2, 4*time.Millisecond)
	if got := p.Level(); got != len(stretchLevels)-1 {
		t.Fatalf("stepped down to %d before the calm period", got)
	}
	feed(p, t3, iv, int(calmFirst/iv), 2, 4*time.Millisecond)
	if got := p.Level(); got != len(stretchLevels)-2 {
		t.Fatalf("level %d after a calm period, want one step down", got)
	}
}

func TestPacerIgnoresASlowCallAndALateSample(t *testing.T) {
	iv := 100 * time.Millisecond
	p := NewPacer(iv, counters.New(), nil)
	t0 := time.Unix(1000, 0)
	for k := range 100 {
		start := t0.Add(time.Duration(k) * iv)
		per := 2 * time.Millisecond
		if k%10 == 3 { // one slow call a second: 90 ms on that tick
			per = 90 * time.Millisecond
		}
		for i := range 4 {
			p.Record(start, start.Add(time.Duration(i+1)*per/4))
		}
		if k == 50 { // a sample of tick 20 returns 3 s late (a hang)
			p.Record(t0.Add(20*iv), start.Add(time.Millisecond))
		}
	}
	if st := p.Stats(); st.Level != 0 || st.TickNVML.V > 10*time.Millisecond {
		t.Fatalf("%+v: one slow tick a second or a hung sample must not stretch", st)
	}
}

func TestPacerBacksOffWhenAStepDownDoesNotHold(t *testing.T) {
	iv := 100 * time.Millisecond
	p := NewPacer(iv, counters.New(), nil)
	t0 := time.Unix(1000, 0)
	t1 := feed(p, t0, iv, 20, 16, 4*time.Millisecond) // up to level 2
	t2 := feed(p, t1, iv, int(calmFirst/iv)+20, 1, time.Millisecond)
	if p.Level() != 1 {
		t.Fatalf("level %d, want 1 after one calm period", p.Level())
	}
	feed(p, t2, iv, 20, 16, 4*time.Millisecond) // the step down did not hold
	if p.calm != 2*calmFirst {
		t.Fatalf("calm period %v, want doubled to %v", p.calm, 2*calmFirst)
	}
}

func TestNilPacer(t *testing.T) {
	var p *Pacer
	p.Record(time.Now(), time.Now())
	if p.Level() != 0 || p.Stats() != (PacerStats{}) {
		t.Fatal("a nil pacer must read everything")
	}
}

func TestDueStaggersAndStretches(t *testing.T) {
	// Level 0, slow tier every 10th sample: GPUs read it on different ticks.
	for n := uint64(1); n < 100; n++ {
		readers := 0
		for gpu := range 16 {
			slow, second := due(n, gpu, 10, 0)
			if !second {
				t.Fatalf("level 0 skips the secondary columns (sample %d gpu %d)", n, gpu)
			}
			if slow {
				readers++
			}
		}
		if readers > 2 {
			t.Fatalf("sample %d: %d of 16 GPUs read the slow tier at once", n, readers)
		}
	}
	count := func(gpu, lvl int) (slow, second int) {
		for n := uint64(1); n <= 640; n++ {
			a, b := due(n, gpu, 10, lvl)
			if a {
				slow++
			}
			if b {
				second++
			}
		}
		return
	}
	for _, tc := range []struct{ lvl, slow, second int }{{0, 64, 640}, {1, 16, 640}, {2, 4, 64}, {3, 1, 16}} {
		if s, c := count(5, tc.lvl); s != tc.slow || c != tc.second {
			t.Errorf("level %d, 640 samples: slow tier %d, secondary %d; want %d, %d", tc.lvl, s, c, tc.slow, tc.second)
		}
	}
	if s, c := due(0, 7, 10, 3); !s || !c {
		t.Error("the first sample must read every tier")
	}
}

// TestStretchedSampleKeepsPrecursors: at the top level most samples read only
// the crash-precursor columns; the secondary and slow ones are carried, and
// every precursor column is present in every sample.
func TestStretchedSampleKeepsPrecursors(t *testing.T) {
	d := fakenvml.NewDev()
	cfg := testConfig
	cfg.SlowEvery, cfg.Interval = 10, 100*time.Millisecond
	h := openFakeConfig(t, &fakenvml.Lib{Devs: []*fakenvml.Dev{d}}, cfg)
	if h.Pacer == nil {
		t.Fatal("no pacer with an interval")
	}
	h.Pacer.level.Store(int32(len(stretchLevels) - 1))
	var s reading.Sample
	for i := range 100 {
		h.GPUs[0].Sample(&s)
		if !s.Values[reading.TempC].OK || !s.Values[reading.PowerMW].OK || !s.Values[reading.PowerLimitMW].OK || !s.Values[reading.EnforcedLimitMW].OK || !s.Values[reading.GraphicsMHz].OK ||
			!s.Values[reading.SMMHz].OK || !s.Values[reading.MemMHz].OK || !s.Values[reading.Throttle].OK || !s.Fans[0].Speed.OK || !s.Fans[0].Target.OK {
			t.Fatalf("sample %d lacks a precursor column: %+v", i, s)
		}
		if !s.Values[reading.PState].OK || !s.Values[reading.GPUUtil].OK || !s.Values[reading.VRAMUsedBytes].OK || !s.Values[reading.DecUtil].OK {
			t.Fatalf("sample %d: a stretched column is not carried: %+v", i, s)
		}
	}
	if n := d.Count("GetTemperature"); n != 100 {
		t.Errorf("temperature read %d times in 100 samples", n)
	}
	if n := d.Count("GetUtilizationRates"); n < 2 || n > 4 {
		t.Errorf("utilization read %d times in 100 samples at the top level, want 2-4", n)
	}
	if n := d.Count("GetDecoderUtilization"); n != 1 {
		t.Errorf("decoder read %d times in 100 samples at the top level, want 1 (the first)", n)
	}
}

// BenchmarkPacerRecord: what the pacer adds to every GPU-sample.
func BenchmarkPacerRecord(b *testing.B) {
	p := NewPacer(100*time.Millisecond, counters.New(), nil)
	t0 := time.Unix(1000, 0)
	b.ReportAllocs()
	for i := range b.N {
		start := t0.Add(time.Duration(i/8) * 100 * time.Millisecond)
		p.Record(start, start.Add(time.Millisecond))
	}
}

// TestSlowDueStretchesWithTheLevel: work outside the sample that belongs to
// the slow tier (process reads) is due once per period at level 0, staggered
// across GPUs, and at the stretch level's multiple above it; every normal
// occasion the stretch skips is reported held.
func TestSlowDueStretchesWithTheLevel(t *testing.T) {
	for _, tc := range []struct{ lvl, due, held int }{{0, 64, 0}, {1, 16, 48}, {2, 4, 60}, {3, 1, 63}} {
		p := NewPacer(100*time.Millisecond, counters.New(), nil)
		p.level.Store(int32(tc.lvl))
		for gpu := range 3 {
			due, held := 0, 0
			for k := uint64(1); k <= 640; k++ {
				d, h := p.SlowDue(k, gpu, 10)
				if d && h {
					t.Fatalf("level %d tick %d: due and held at once", tc.lvl, k)
				}
				if d {
					due++
				}
				if h {
					held++
				}
			}
			if due != tc.due || held != tc.held {
				t.Errorf("level %d GPU %d, 640 ticks: due %d held %d, want %d and %d", tc.lvl, gpu, due, held, tc.due, tc.held)
			}
		}
	}
	var nilPacer *Pacer
	if d, _ := nilPacer.SlowDue(0, 5, 10); !d {
		t.Error("tick 0 must be due for every GPU")
	}
	for k := uint64(1); k < 10; k++ {
		if d, _ := nilPacer.SlowDue(k, 0, 10); d {
			t.Errorf("GPU 0 due on tick %d at a period of 10", k)
		}
	}
}
