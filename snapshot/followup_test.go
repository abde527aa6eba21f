package snapshot

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
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

// TestFollowUpsGoOnWhenTheIncidentHasASnapshot: when the snapshot that
// began an incident cannot be written, its follow-ups are still taken once
// a later (escalation) snapshot of the incident is on disk; one whose time
// comes before any is written is cancelled and counted.
func TestFollowUpsGoOnWhenTheIncidentHasASnapshot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newFollowUpManager(t)
		var writes atomic.Int32
		m.files.Ops.Write = func(f *os.File, p []byte) (int, error) {
			if writes.Add(1) == 1 { // the first snapshot's stage 1
				return 0, errors.New("input/output error")
			}
			return f.Write(p)
		}
		crashes := filepath.Join(m.cfg.Dir, "crashes")
		fault := Event{Reason: "Xid 62: Internal micro-controller halt", Stage: StageFault}
		if d := crash(m, 3, fault, testCrashRequest); !d.Accepted || d.Escalation {
			t.Fatalf("the first event: %+v, want an incident begun", d)
		}
		time.Sleep(30 * time.Second) // the +10s follow-up: no snapshot of the incident yet
		if d := crash(m, 3, testEvent, testCrashRequest); !d.Escalation {
			t.Fatalf("the later event: %+v, want an escalation", d)
		}
		time.Sleep(300 * time.Second)
		synctest.Wait()
		want := []string{"crash-20000101-000000.000-gpu3+300s.log", "crash-20000101-000000.000-gpu3+60s.log", "crash-20000101-000030.000-gpu3.log"}
		if got := files(t, crashes, "*"); !slices.Equal(got, want) {
			t.Fatalf("crashes holds %v, want %v", got, want)
		}
		data, err := os.ReadFile(filepath.Join(crashes, want[1]))
		if err != nil {
			t.Fatal(err)
		}
		testutil.Contains(t, "follow-up", string(data), " Xid 79: GPU has fallen off the bus (kmsg) [snapshot crash-20000101-000030.000-gpu3.log]\n")
		if err := m.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		if c := counted(m); c["snapshot_failures"] != 1 || c["follow_ups"] != 2 || c["follow_ups_canceled"] != 1 {
			t.Errorf("counters = %v, want 1 failure, 2 follow-ups written and 1 cancelled", c)
		}
	})
}
