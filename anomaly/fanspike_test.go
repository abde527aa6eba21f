package anomaly

import (
	"testing"

	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

func TestFanSpike(t *testing.T) {
	d := fanSpike{thresholdPct: 15, warmup: 2}
	tests := []struct {
		name string
		seen int
		prev *reading.Sample // nil: no previous good sample
		cur  *reading.Sample
		want bool
	}{
		{"no previous sample", 5, nil, mk(fansAt(pct(90))), false},
		{"warm-up: 2 samples seen", 2, mk(fansAt(pct(40))), mk(fansAt(pct(80))), false},
		{"after warm-up: 3 samples seen", 3, mk(fansAt(pct(40))), mk(fansAt(pct(80))), true},
		{"14 points up", 3, mk(fansAt(pct(40))), mk(fansAt(pct(54))), false},
		{"15 points up", 3, mk(fansAt(pct(40))), mk(fansAt(pct(55))), true},
		{"15 points down", 3, mk(fansAt(pct(55))), mk(fansAt(pct(40))), true},
		{"14 points down", 3, mk(fansAt(pct(54))), mk(fansAt(pct(40))), false},
		{"stopped fan starts", 3, mk(fansAt(pct(0))), mk(fansAt(pct(30))), true},
		{"second fan spikes", 3, mk(fansAt(pct(40), pct(40))), mk(fansAt(pct(40), pct(70))), true},
		{"previous speed absent", 3, mk(fansAt(absent32)), mk(fansAt(pct(80))), false},
		{"current speed absent", 3, mk(fansAt(pct(80))), mk(fansAt(absent32)), false},
		{"absent on one fan, other steady", 3, mk(fansAt(absent32, pct(40))), mk(fansAt(pct(90), pct(45))), false},
		{"fanless GPU", 3, mk(fansAt()), mk(fansAt()), false},
		{"fan only in current sample", 3, mk(fansAt(pct(40))), mk(fansAt(pct(40), pct(90))), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := d.Check(Input{Prev: tt.prev, Cur: tt.cur, Seen: tt.seen, Now: t0}).Flag == 1; got != tt.want {
				t.Errorf("check = %v, want %v", got, tt.want)
			}
		})
	}
}
