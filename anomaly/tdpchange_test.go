package anomaly

import (
	"testing"

	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

func TestTDPChange(t *testing.T) {
	tests := []struct {
		name      string
		last      reading.Opt[uint32]
		cur       *reading.Sample
		wantFlag  string // "" for no change
		wantDelta int64
	}{
		{"no last limit", absent32, mk(limitAt(watts(500))), "", 0},
		{"unchanged", watts(600), mk(limitAt(watts(600))), "", 0},
		{"4.999 W down", watts(600), mk(limitAt(mw(595_001))), "", 0},
		{"5 W down", watts(600), mk(limitAt(watts(595))), "TDP_REDUCED(595W)", -5},
		{"5 W up", watts(600), mk(limitAt(watts(605))), "TDP_RESTORED(605W)", 5},
		{"4.999 W up", watts(600), mk(limitAt(mw(604_999))), "", 0},
		{"big cut, rounded", watts(600), mk(limitAt(mw(399_500))), "TDP_REDUCED(400W)", -201},
		{"current limit absent", watts(600), mk(limitAt(absent32)), "", 0},
		{"current limit zero (a lost GPU, as the Python logger read it)", watts(600), mk(limitAt(mw(0))), "", 0},
		{"last limit zero", mw(0), mk(limitAt(watts(600))), "", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := &tdpChange{epsilonMW: 5000, last: tt.last}
			f := d.Check(Input{Cur: tt.cur, Seen: 1, Now: t0})
			if got := flagText(&tdpChangeDef, f); got != tt.wantFlag {
				t.Fatalf("flag = %q, want %q", got, tt.wantFlag)
			}
			c, ok := f.TDP.Get()
			if !ok {
				return
			}
			if c.FromMW != tt.last.V || c.ToMW != tt.cur.U32(reading.PowerLimitMW).V {
				t.Errorf("change = %+v, want from %d to %d", c, tt.last.V, tt.cur.U32(reading.PowerLimitMW).V)
			}
			if c.DeltaW() != tt.wantDelta {
				t.Errorf("DeltaW = %d, want %d", c.DeltaW(), tt.wantDelta)
			}
		})
	}
}

func TestTDPChangeWatts(t *testing.T) {
	tests := []struct {
		name               string
		c                  TDPChange
		from, to, deltaOut int64
	}{
		{"whole watts", TDPChange{FromMW: 600_000, ToMW: 450_000}, 600, 450, -150},
		{"half watts round away from zero", TDPChange{FromMW: 600_000, ToMW: 594_500}, 600, 595, -6},
		{"up", TDPChange{FromMW: 594_500, ToMW: 600_000}, 595, 600, 6},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.c.FromW() != tt.from || tt.c.ToW() != tt.to || tt.c.DeltaW() != tt.deltaOut {
				t.Errorf("got %d -> %d (%+d), want %d -> %d (%+d)",
					tt.c.FromW(), tt.c.ToW(), tt.c.DeltaW(), tt.from, tt.to, tt.deltaOut)
			}
		})
	}
}
