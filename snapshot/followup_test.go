package snapshot

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/internal/testutil"
)

// newFollowUpManager is newTestManager with the default follow-ups, on the
// bubble's clock.
func newFollowUpManager(t *testing.T) *Manager {
	m, _ := newTestManager(t, func(c *Config) {
		c.FollowUps = nil
		c.Now = func() time.Time { return time.Now().UTC() }
	})
	return m
}

func TestFollowUps(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// Inside the bubble time is fake: it starts at 2000-01-01 00:00 UTC and
		// jumps when every goroutine is blocked, so 370 s take no time.
		m := newFollowUpManager(t)
		crashes := filepath.Join(m.cfg.Dir, "crashes")
		req := func() CrashRequest {
			r := testCrashRequest()
			r.Header.Time = time.Time{} // the Manager stamps it
			return r
		}
		var want []string
		// after lets d pass, then checks that crashes holds the files
		// written so far and those added.
		after := func(d time.Duration, when string, added ...string) {
			t.Helper()
			time.Sleep(d)
			synctest.Wait()
			want = append(want, added...)
			slices.Sort(want)
			if got := files(t, crashes, "*"); !slices.Equal(got, want) {
				t.Fatalf("at %s: %v, want %v", when, got, want)
			}
		}
		if d := crash(m, 3, testEvent, req); !d.Accepted {
			t.Fatal("not accepted")
		}
		after(0, "0s", "crash-20000101-000000.000-gpu3.log")
		after(10*time.Second, "10s", "crash-20000101-000000.000-gpu3+10s.log")
		data, err := os.ReadFile(filepath.Join(crashes, "crash-20000101-000000.000-gpu3+10s.log"))
		if err != nil {
			t.Fatal(err)
		}
		testutil.Golden(t, "followup.golden", data)
		after(50*time.Second, "60s", "crash-20000101-000000.000-gpu3+60s.log")

		// A newer incident on the same GPU (after the cooldown) cancels the
		// older one's +300s: its own follow-ups supersede it.
		time.Sleep(10 * time.Second)
		if d := crash(m, 3, testEvent, req); !d.Accepted {
			t.Fatal("second incident not accepted")
		}
		synctest.Wait()
		if c := counted(m); c["follow_ups_canceled"] != 1 || c["follow_ups"] != 2 {
			t.Fatalf("after second incident: %v", c)
		}
		after(300*time.Second, "370s",
			"crash-20000101-000110.000-gpu3+10s.log",
			"crash-20000101-000110.000-gpu3+300s.log",
			"crash-20000101-000110.000-gpu3+60s.log",
			"crash-20000101-000110.000-gpu3.log",
		)
		if err := m.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		if c := counted(m); c["follow_ups"] != 5 || c["follow_ups_canceled"] != 1 {
			t.Errorf("counters = %v", c)
		}
	})
}

func TestCloseCancelsPendingFollowUps(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newFollowUpManager(t)
		crash(m, 0, testEvent, testCrashRequest)
		time.Sleep(15 * time.Second)
		synctest.Wait()
		start := time.Now()
		if err := m.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		if time.Since(start) != 0 {
			t.Errorf("Close waited %v for pending follow-ups", time.Since(start))
		}
		if c := counted(m); c["follow_ups"] != 1 || c["follow_ups_canceled"] != 2 {
			t.Errorf("counters = %v, want 1 written, 2 canceled", c)
		}
	})
}
