package cooldown

import (
	"testing"
	"time"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func TestAllow(t *testing.T) {
	type step struct {
		at       time.Duration // since t0
		wantOK   bool
		wantHeld uint64
		wantLeft time.Duration
	}
	tests := []struct {
		name   string
		period time.Duration
		steps  []step
	}{
		{"first passes", time.Minute, []step{{0, true, 0, 0}}},
		{"held back within the period, count carried", time.Minute, []step{
			{0, true, 0, 0}, {time.Second, false, 1, 59 * time.Second}, {59 * time.Second, false, 2, time.Second},
			{60 * time.Second, true, 2, 0}, {61 * time.Second, false, 1, 59 * time.Second}, {200 * time.Second, true, 1, 0},
		}},
		{"1 ns before the period ends", time.Minute, []step{
			{0, true, 0, 0}, {time.Minute - 1, false, 1, 1}, {time.Minute, true, 1, 0},
		}},
		{"zero period lets all through", 0, []step{{0, true, 0, 0}, {0, true, 0, 0}, {1, true, 0, 0}}},
		{"clock went backwards", time.Minute, []step{
			{time.Hour, true, 0, 0}, {time.Hour + time.Second, false, 1, 59 * time.Second}, {0, true, 1, 0}, {time.Second, false, 1, 59 * time.Second},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var c Cooldown
			for i, s := range tt.steps {
				ok, held, left := c.Allow(t0.Add(s.at), tt.period)
				if ok != s.wantOK || held != s.wantHeld || left != s.wantLeft {
					t.Errorf("step %d at %v: Allow = (%v, %d, %v), want (%v, %d, %v)", i, s.at, ok, held, left, s.wantOK, s.wantHeld, s.wantLeft)
				}
			}
		})
	}
}

// One passed after all (an escalation) is not counted as held back; the
// period still runs from the last one Allow let through.
func TestPass(t *testing.T) {
	var c Cooldown
	c.Allow(t0, time.Minute)
	if ok, held, _ := c.Allow(t0.Add(time.Second), time.Minute); ok || held != 1 {
		t.Fatalf("Allow = %v, %d; want held back, 1", ok, held)
	}
	c.Pass()
	if ok, held, left := c.Allow(t0.Add(2*time.Second), time.Minute); ok || held != 1 || left != 58*time.Second {
		t.Errorf("after Pass: Allow = %v, %d, %v; want held back, 1, 58s", ok, held, left)
	}
}
