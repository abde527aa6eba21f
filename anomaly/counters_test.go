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
			{Total: Counts{Samples: 10, Spikes: 1}, Window: Counts{Samples: 2}, PeakTempC: pct(80), PeakPowerMW: watts(500)},
			{Total: Counts{Samples: 5, PowerBreaches: 3}, Window: Counts{Samples: 1, PowerBreaches: 1}},
			{Total: Counts{Samples: 1}, PeakTempC: pct(90), PeakPowerMW: watts(400)},
		}, Counters{
			Total:  Counts{Samples: 16, Spikes: 1, PowerBreaches: 3},
			Window: Counts{Samples: 3, PowerBreaches: 1}, PeakTempC: pct(90), PeakPowerMW: watts(500),
		}},
		{"all peaks absent", []Counters{{Total: Counts{Skipped: 4}}, {Total: Counts{Skipped: 1}}},
			Counters{Total: Counts{Skipped: 5}}},
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
		{"5 minute window", Counts{Samples: 3000, PowerBreaches: 15, FanInversions: 5, TDPChanges: 1},
			5 * time.Minute, 5 * time.Minute,
			PerMinute{Samples: 600, PowerBreaches: 3, FanInversions: 1, TDPChanges: 0.2}},
		{"skewed window", Counts{SpuriousThrottles: 31}, 310 * time.Second, 310 * time.Second,
			PerMinute{SpuriousThrottles: 6}},
		{"zero window counts as 1 s", Counts{Spikes: 1}, 0, time.Second, PerMinute{Spikes: 60}},
		{"negative window counts as 1 s", Counts{ThrottleChanges: 2, Skipped: 1}, -time.Hour, time.Second,
			PerMinute{ThrottleChanges: 120, Skipped: 60}},
		{"nothing counted", Counts{}, time.Minute, time.Minute, PerMinute{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Rates(tt.window, tt.elapsed)
			if got.Window != tt.wantWindow {
				t.Errorf("Window = %v, want %v", got.Window, tt.wantWindow)
			}
			pairs := [][2]float64{
				{got.Samples, tt.want.Samples}, {got.Skipped, tt.want.Skipped}, {got.Spikes, tt.want.Spikes},
				{got.PowerBreaches, tt.want.PowerBreaches}, {got.FanInversions, tt.want.FanInversions},
				{got.SpuriousThrottles, tt.want.SpuriousThrottles}, {got.TDPChanges, tt.want.TDPChanges},
				{got.ThrottleChanges, tt.want.ThrottleChanges},
			}
			for i, p := range pairs {
				if math.Abs(p[0]-p[1]) > 1e-9 {
					t.Errorf("rate %d = %v, want %v (got %+v)", i, p[0], p[1], got)
				}
			}
		})
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
