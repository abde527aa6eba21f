package live

import (
	"testing"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

// ringSample is an answered sample at t with temperature c, power mW and
// fan 0 at fan %.
func ringSample(t time.Time, c, mw uint64, fan uint32) reading.Sample {
	s := reading.Sample{Time: t, NumFans: 1}
	s.Values[reading.TempC] = reading.Some(c)
	s.Values[reading.PowerMW] = reading.Some(mw)
	s.Fans[0].Speed = reading.Some(fan)
	return s
}

// num is p's value, or -1 for null.
func num(p *float64) float64 {
	if p == nil {
		return -1
	}
	return *p
}

func TestHistoryRing(t *testing.T) {
	base := time.Date(2026, 12, 6, 14, 0, 0, 0, time.UTC)
	cases := []struct {
		name string
		add  func(h *History)
		end  time.Time
		span time.Duration
		key  string
		want []float64 // -1: null
	}{
		{"one value a second: the last sample of each second", func(h *History) {
			for i := range 30 { // 100 ms apart: 3 s
				s := ringSample(base.Add(time.Duration(i)*100*time.Millisecond), uint64(40+i), 0, 0)
				h.Add(&s)
			}
		}, base.Add(2 * time.Second), 3 * time.Second, "temperature_c", []float64{49, 59, 69}},
		{"power in W from mW", func(h *History) {
			s := ringSample(base, 50, 123456, 0)
			h.Add(&s)
		}, base, time.Second, "power_w", []float64{123.456}},
		{"fan 0's speed; a zero is a value", func(h *History) {
			s := ringSample(base, 50, 0, 0)
			h.Add(&s)
		}, base, time.Second, "fan0_speed_pct", []float64{0}},
		{"a reading the sample lacks is null, not 0", func(h *History) {
			s := ringSample(base, 50, 0, 30)
			h.Add(&s)
		}, base, time.Second, "memory_temperature_c", []float64{-1}},
		{"seconds without an answered sample are null", func(h *History) {
			s := ringSample(base, 50, 0, 30)
			h.Add(&s)
			f := ringSample(base.Add(time.Second), 99, 0, 30)
			f.Status = reading.StatusFailed
			h.Add(&f)
			s = ringSample(base.Add(3*time.Second), 52, 0, 30)
			h.Add(&s)
		}, base.Add(4 * time.Second), 5 * time.Second, "temperature_c", []float64{50, -1, -1, 52, -1}},
		{"span rounds up to whole seconds", func(h *History) {
			s := ringSample(base, 50, 0, 30)
			h.Add(&s)
		}, base, 1500 * time.Millisecond, "temperature_c", []float64{-1, 50}},
		{"wrap-around: 11 minutes keep the last 10", func(h *History) {
			for i := range 660 {
				s := ringSample(base.Add(time.Duration(i)*time.Second), uint64(i%200), 0, 30)
				h.Add(&s)
			}
		}, base.Add(659 * time.Second), 20 * time.Minute, "temperature_c", nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var h History
			c.add(&h)
			d := h.Doc(c.end, c.span)
			if d.StepS != 1 || !d.End.Equal(c.end.Truncate(time.Second)) || len(d.Series) != len(historyKeys) {
				t.Fatalf("step %v end %v, %d series", d.StepS, d.End, len(d.Series))
			}
			got := d.Values(c.key)
			if c.want == nil { // the wrap-around case
				if len(got) != 600 {
					t.Fatalf("%d values, want 600", len(got))
				}
				for j, p := range got {
					if want := float64((60 + j) % 200); num(p) != want {
						t.Fatalf("value %d = %v, want %v", j, num(p), want)
					}
				}
				return
			}
			if len(got) != len(c.want) {
				t.Fatalf("%d values, want %d", len(got), len(c.want))
			}
			for j, p := range got {
				if num(p) != c.want[j] {
					t.Errorf("value %d = %v, want %v", j, num(p), c.want[j])
				}
			}
		})
	}
	var h History
	if h.Doc(base, 0) != nil {
		t.Error("a span of 0 gave a history")
	}
	// A row overwritten by the second 600 s later is not the earlier one's.
	s := ringSample(base, 50, 0, 30)
	h.Add(&s)
	if v := h.Doc(base.Add(600*time.Second), time.Second).Values("temperature_c"); v[0] != nil {
		t.Errorf("the second 600 s later reads %v from an older row", num(v[0]))
	}
}

// TestHistoryKeysAreReadings: every series but fan 0's is a reading's key
// in the GPU's document, so a view reads a series as it reads the value.
func TestHistoryKeysAreReadings(t *testing.T) {
	var g GPUDoc
	for k, key := range historyKeys {
		if historyDefs[k] == nil {
			if key != "fan0_speed_pct" {
				t.Errorf("%s has no reading", key)
			}
			continue
		}
		g.Reading(key) // panics on a key that is not one
	}
}

// BenchmarkHistoryBudget reports the memory one GPU's ring takes (the
// budget docs/performance.md states: at most 1 MB per GPU) and what a
// sample's Add costs; the test fails beyond the budget.
func BenchmarkHistoryBudget(b *testing.B) {
	if HistoryBytes > 1<<20 {
		b.Fatalf("the history ring takes %d bytes per GPU, over the 1 MB budget", HistoryBytes)
	}
	h := new(History)
	s := ringSample(time.Unix(1_800_000_000, 0), 50, 300000, 40)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		s.Time = s.Time.Add(100 * time.Millisecond)
		h.Add(&s)
	}
	b.ReportMetric(float64(HistoryBytes), "bytes/GPU")
}

// TestHistoryBudget: a GPU's ring is at most 1 MB, allocated whole with
// its slot (an Add allocates nothing, so it never grows).
func TestHistoryBudget(t *testing.T) {
	if HistoryBytes > 1<<20 {
		t.Fatalf("the history ring takes %d bytes per GPU, over the 1 MB budget", HistoryBytes)
	}
	h := new(History)
	s := ringSample(time.Unix(1_800_000_000, 0), 50, 300000, 40)
	if n := testing.AllocsPerRun(1000, func() { s.Time = s.Time.Add(time.Second); h.Add(&s) }); n != 0 {
		t.Errorf("Add allocates %v times", n)
	}
	t.Logf("history ring: %d bytes per GPU", HistoryBytes)
}

// TestHistoryDocFreesTheLockEarly: Doc holds the ring's lock only to
// copy the rows; Add (the sample path) is not held while the document's
// pointers are made (issue 40 review: ~85 µs a GPU under the lock).
func TestHistoryDocFreesTheLockEarly(t *testing.T) {
	var h History
	base := time.Unix(1_800_000_000, 0)
	for i := range 600 {
		s := ringSample(base.Add(time.Duration(i-599)*time.Second), 50, 300000, 40)
		h.Add(&s)
	}
	held := true
	old := testHookHistoryCopied
	testHookHistoryCopied = func(h *History) {
		if h.mu.TryLock() {
			held = false
			h.mu.Unlock()
		}
	}
	defer func() { testHookHistoryCopied = old }()
	d := h.Doc(base, MaxHistory)
	if held {
		t.Errorf("the ring's lock is held while the document is made")
	}
	if v := d.Values("temperature_c"); len(v) != 600 || num(v[0]) != 50 || num(v[599]) != 50 {
		t.Errorf("temperatures %d, first %v, last %v", len(v), num(v[0]), num(v[599]))
	}
}

// BenchmarkHistoryDoc is what a GPU's full history in a status answer
// costs.
func BenchmarkHistoryDoc(b *testing.B) {
	var h History
	base := time.Now()
	for i := range 600 {
		s := ringSample(base.Add(time.Duration(i-600)*time.Second), 50, 300000, 40)
		h.Add(&s)
	}
	b.ReportAllocs()
	for b.Loop() {
		h.Doc(base, MaxHistory)
	}
}

func TestEventsRing(t *testing.T) {
	var e Events
	if e.Newest(5) != nil {
		t.Error("an empty ring gave lines")
	}
	for i := range MaxEvents + 20 {
		e.Add(string(rune('a'+i%26)) + "-" + itoa(i))
	}
	got := e.Newest(3)
	if len(got) != 3 || got[0] != e.lines[(e.first+e.n-1)%MaxEvents] || got[0] != string(rune('a'+(MaxEvents+19)%26))+"-"+itoa(MaxEvents+19) {
		t.Errorf("newest 3: %q", got)
	}
	if all := e.Newest(MaxEvents + 100); len(all) != MaxEvents || all[MaxEvents-1] != string(rune('a'+20%26))+"-"+itoa(20) {
		t.Errorf("all: %d lines, oldest %q", len(all), all[len(all)-1])
	}
	// Bytes bound the ring too: long lines push the oldest out.
	var l Events
	long := string(make([]byte, 10<<10)) // cut to maxEventLine
	for range 200 {
		l.Add(long)
	}
	if l.bytes > maxEventBytes || l.n != maxEventBytes/maxEventLine || len(l.Newest(1)[0]) != maxEventLine {
		t.Errorf("%d lines of %d bytes in all", l.n, l.bytes)
	}
}
