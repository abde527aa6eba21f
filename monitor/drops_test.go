package monitor

import (
	"testing"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/live"
)

// TestDropWindowIsTime: RowsDroppedRecent covers live.RecentWindow of
// time whatever the pace of the history (watchLosses adds once a second,
// or once an interval at --interval 5s): a drop 10 min old no longer counts.
func TestDropWindowIsTime(t *testing.T) {
	for _, step := range []time.Duration{time.Second, 5 * time.Second, time.Minute} {
		var h dropHistory
		t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
		now, dropped := t0, uint64(0)
		h.add(now, dropped)
		for ; now.Sub(t0) < 30*time.Minute; now = now.Add(step) {
			if now.Equal(t0.Add(5 * time.Minute)) {
				dropped += 7 // rows dropped 5 min in
			}
			h.add(now, dropped)
			want := uint64(0)
			if since := now.Sub(t0.Add(5 * time.Minute)); since >= 0 && since < live.RecentWindow {
				want = 7
			}
			if got := h.recent(now, dropped); got != want {
				t.Fatalf("step %v, %v in: %d dropped recently, want %d", step, now.Sub(t0), got, want)
			}
		}
	}
	// Before the daemon ran a whole window, every drop is recent.
	var h dropHistory
	t0 := time.Now()
	h.add(t0, 3)
	if got := h.recent(t0.Add(time.Minute), 5); got != 5 {
		t.Errorf("young daemon: %d, want 5", got)
	}
}
