package anomaly

import (
	"testing"

	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

func TestThrottleChange(t *testing.T) {
	tests := []struct {
		name     string
		last     reading.Opt[uint64]
		cur      reading.Opt[uint64]
		wantFrom uint64
		wantTo   uint64
		want     bool
	}{
		{"first mask", absent64, mask(4), 0, 0, false},
		{"unchanged", mask(4), mask(4), 0, 0, false},
		{"none to SwPowerCap", mask(0), mask(4), 0, 4, true},
		{"SwPowerCap to none", mask(4), mask(0), 4, 0, true},
		{"current absent", mask(4), absent64, 0, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := &throttleChange{last: tt.last}
			f := d.Check(Input{Cur: mk(throttleAt(tt.cur)), Seen: 1, Now: t0})
			from, to, ok := f.V[0], f.V[1], f.Notice && f.Count
			if ok != tt.want || from != tt.wantFrom || to != tt.wantTo {
				t.Errorf("check = (%#x, %#x, %v), want (%#x, %#x, %v)", from, to, ok, tt.wantFrom, tt.wantTo, tt.want)
			}
		})
	}
}
