package anomaly

import (
	"testing"

	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

func TestPowerBreach(t *testing.T) {
	d := powerBreach{flagMW: 50_000}
	tests := []struct {
		name         string
		cur          *reading.Sample
		wantBreached bool
		wantFlag     string // flag text; "" for none
	}{
		{"under the limit", mk(powerAt(watts(500)), limitAt(watts(600))), false, ""},
		{"at the limit", mk(powerAt(watts(600)), limitAt(watts(600))), false, ""},
		{"1 mW over", mk(powerAt(mw(600_001)), limitAt(watts(600))), true, ""},
		{"50 W over", mk(powerAt(watts(650)), limitAt(watts(600))), true, ""},
		{"50.001 W over", mk(powerAt(mw(650_001)), limitAt(watts(600))), true, "PWR+50W"},
		{"60.5 W over rounds up", mk(powerAt(mw(660_500)), limitAt(watts(600))), true, "PWR+61W"},
		{"power absent", mk(powerAt(absent32), limitAt(watts(600))), false, ""},
		{"limit absent", mk(powerAt(watts(700)), limitAt(absent32)), false, ""},
		{"limit zero", mk(powerAt(watts(700)), limitAt(mw(0))), false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := d.Check(Input{Cur: tt.cur, Seen: 1, Now: t0})
			if got, breached := flagText(&powerBreachDef, f), f.Count; breached != tt.wantBreached || got != tt.wantFlag {
				t.Errorf("check = (%q, %v), want (%q, %v)", got, breached, tt.wantFlag, tt.wantBreached)
			}
		})
	}
}

// TestPowerBreachNoFlagThreshold: with a zero threshold every breach is flagged.
func TestPowerBreachNoFlagThreshold(t *testing.T) {
	f := powerBreach{}.Check(Input{Cur: mk(powerAt(mw(600_001)), limitAt(watts(600))), Seen: 1, Now: t0})
	if breached, flagged := f.Count, f.Flag > 0; !breached || !flagged {
		t.Errorf("check = (%v, %v), want (true, true)", breached, flagged)
	}
}
