package anomaly

import (
	"math"
	"testing"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

func TestSum(t *testing.T) {
	tests := []struct {
		name string
		in   []Counters
		want Counters
	}{
		{"none", nil, Counters{}},
		{"counts add, peaks take the highest present", []Counters{
			{Total: cnt(map[Counter]uint64{CountSamples: 10, CountSpikes: 1}), Window: cnt(map[Counter]uint64{CountSamples: 2}), PeakTempC: pct(80), PeakPowerMW: watts(500)},
			{Total: cnt(map[Counter]uint64{CountSamples: 5, CountPowerBreaches: 3}), Window: cnt(map[Counter]uint64{CountSamples: 1, CountPowerBreaches: 1})},
			{Total: cnt(map[Counter]uint64{CountSamples: 1}), PeakTempC: pct(90), PeakPowerMW: watts(400)},
		}, Counters{
			Total:  cnt(map[Counter]uint64{CountSamples: 16, CountSpikes: 1, CountPowerBreaches: 3}),
			Window: cnt(map[Counter]uint64{CountSamples: 3, CountPowerBreaches: 1}), PeakTempC: pct(90), PeakPowerMW: watts(500),
		}},
		{"all peaks absent", []Counters{{Total: cnt(map[Counter]uint64{CountSkipped: 4})}, {Total: cnt(map[Counter]uint64{CountSkipped: 1})}},
			Counters{Total: cnt(map[Counter]uint64{CountSkipped: 5})}},
		{"a zero peak is present", []Counters{{PeakPowerMW: mw(0)}, {}}, Counters{PeakPowerMW: mw(0)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Sum(tt.in); got != tt.want {
				t.Errorf("Sum = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestRates(t *testing.T) {
	tests := []struct {
		name       string
		window     Counts
		elapsed    time.Duration
		wantWindow time.Duration
		want       PerMinute
	}{
		{"5 minute window", cnt(map[Counter]uint64{CountSamples: 3000, CountPowerBreaches: 15, CountFanInversions: 5, CountTDPChanges: 1}),
			5 * time.Minute, 5 * time.Minute,
			perMin(map[Counter]float64{CountSamples: 600, CountPowerBreaches: 3, CountFanInversions: 1, CountTDPChanges: 0.2})},
		{"skewed window", cnt(map[Counter]uint64{CountSpuriousThrottles: 31}), 310 * time.Second, 310 * time.Second,
			perMin(map[Counter]float64{CountSpuriousThrottles: 6})},
		{"zero window counts as 1 s", cnt(map[Counter]uint64{CountSpikes: 1}), 0, time.Second, perMin(map[Counter]float64{CountSpikes: 60})},
		{"negative window counts as 1 s", cnt(map[Counter]uint64{CountThrottleChanges: 2, CountSkipped: 1}), -time.Hour, time.Second,
			perMin(map[Counter]float64{CountThrottleChanges: 120, CountSkipped: 60})},
		{"nothing counted", Counts{}, time.Minute, time.Minute, PerMinute{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if w := RateWindow(tt.elapsed); w != tt.wantWindow {
				t.Errorf("RateWindow = %v, want %v", w, tt.wantWindow)
			}
			got := Rates(tt.window, tt.elapsed)
			for i := range got {
				if math.Abs(got[i]-tt.want[i]) > 1e-9 {
					t.Errorf("rate of %s = %v, want %v (got %+v)", CounterDefs[i].Name, got[i], tt.want[i], got)
				}
			}
		})
	}
}

// TestCounterDefsComplete: every counter is declared, with names unique in
// each output.
func TestCounterDefsComplete(t *testing.T) {
	seen := map[string]bool{}
	for i, d := range CounterDefs {
		if d.Name == "" || d.Short == "" || d.Help == "" {
			t.Errorf("counter %d is not fully declared: %+v", i, d)
		}
		for _, n := range []string{"name " + d.Name, "short " + d.Short, "snapshot " + d.Snapshot} {
			if n != "snapshot " && seen[n] {
				t.Errorf("%s used twice", n)
			}
			seen[n] = true
		}
	}
}

func TestAtomicPeak(t *testing.T) {
	tests := []struct {
		name string
		in   []uint32
		want reading.Opt[uint32]
	}{
		{"nothing observed", nil, absent32},
		{"zero is a value", []uint32{0}, pct(0)},
		{"highest wins", []uint32{70, 90, 80}, pct(90)},
		{"max uint32", []uint32{math.MaxUint32, 5}, pct(math.MaxUint32)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var p atomicPeak
			for _, v := range tt.in {
				p.observe(v)
			}
			if got := p.get(); got != tt.want {
				t.Errorf("get = %+v, want %+v", got, tt.want)
			}
		})
	}
}

// cnt returns counts with the values in m.
func cnt(m map[Counter]uint64) (c Counts) {
	for k, v := range m {
		c[k] = v
	}
	return c
}

// perMin returns rates with the values in m.
func perMin(m map[Counter]float64) (r PerMinute) {
	for k, v := range m {
		r[k] = v
	}
	return r
}
