package anomaly

import (
	"testing"
	"time"
)

func TestCooldown(t *testing.T) {
	type step struct {
		at             time.Duration // since t0
		wantOK         bool
		wantSuppressed uint64
	}
	tests := []struct {
		name   string
		period time.Duration
		steps  []step
	}{
		{"first notice passes", time.Minute, []step{{0, true, 0}}},
		{"held back within the period, count carried", time.Minute, []step{
			{0, true, 0}, {time.Second, false, 0}, {59 * time.Second, false, 0},
			{60 * time.Second, true, 2}, {61 * time.Second, false, 0}, {200 * time.Second, true, 1},
		}},
		{"1 ns before the period ends", time.Minute, []step{
			{0, true, 0}, {time.Minute - 1, false, 0}, {time.Minute, true, 1},
		}},
		{"zero period lets all through", 0, []step{{0, true, 0}, {0, true, 0}, {1, true, 0}}},
		{"clock went backwards", time.Minute, []step{
			{time.Hour, true, 0}, {time.Hour + time.Second, false, 0}, {0, true, 1}, {time.Second, false, 0},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var c cooldown
			for i, s := range tt.steps {
				sup, ok := c.allow(t0.Add(s.at), tt.period)
				if ok != s.wantOK || sup != s.wantSuppressed {
					t.Errorf("step %d at %v: allow = (%d, %v), want (%d, %v)", i, s.at, sup, ok, s.wantSuppressed, s.wantOK)
				}
			}
		})
	}
}
