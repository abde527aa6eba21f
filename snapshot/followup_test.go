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

func TestFollowUps(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// Inside the bubble time is fake: it starts at 2000-01-01 00:00 UTC and
		// jumps when every goroutine is blocked, so 370 s take no time.
		dir := t.TempDir()
		m := New(Config{
			Dir:         dir,
			Runner:      cannedRunner(),
			Now:         func() time.Time { return time.Now().UTC() },
			ModulesPath: filepath.Join("testdata", "modules.txt"),
		})
		defer m.Close(context.Background()) // on failure too: no goroutine may outlive the bubble
		crashes := filepath.Join(dir, "crashes")
		req := func() CrashRequest {
			r := testCrashRequest()
			r.Header.Time = time.Time{} // the Manager stamps it
			return r
		}
		if d := m.Crash(3, req); !d.Accepted {
			t.Fatal("not accepted")
		}
		synctest.Wait()
		want := []string{"crash-20000101-000000.000-gpu3.log"}
		if got := files(t, crashes, "*"); !slices.Equal(got, want) {
			t.Fatalf("at 0s: %v, want %v", got, want)
		}

		time.Sleep(10 * time.Second)
		synctest.Wait()
		want = append(want, "crash-20000101-000000.000-gpu3+10s.log")
		slices.Sort(want)
		if got := files(t, crashes, "*"); !slices.Equal(got, want) {
			t.Fatalf("at 10s: %v, want %v", got, want)
		}
		data, err := os.ReadFile(filepath.Join(crashes, "crash-20000101-000000.000-gpu3+10s.log"))
		if err != nil {
			t.Fatal(err)
		}
		testutil.Golden(t, "followup.golden", data)

		time.Sleep(50 * time.Second)
		synctest.Wait()
		want = append(want, "crash-20000101-000000.000-gpu3+60s.log")
		slices.Sort(want)
		if got := files(t, crashes, "*"); !slices.Equal(got, want) {
			t.Fatalf("at 60s: %v, want %v", got, want)
		}

		// A newer incident on the same GPU (after the cooldown) cancels the
		// older one's +300s: its own follow-ups supersede it.
		time.Sleep(10 * time.Second)
		if d := m.Crash(3, req); !d.Accepted {
			t.Fatal("second incident not accepted")
		}
		synctest.Wait()
		if st := m.Stats(); st.FollowUpsCanceled != 1 || st.FollowUpsWritten != 2 {
			t.Fatalf("after second incident: %+v", st)
		}
		time.Sleep(300 * time.Second)
		synctest.Wait()
		want = append(want,
			"crash-20000101-000110.000-gpu3+10s.log",
			"crash-20000101-000110.000-gpu3+300s.log",
			"crash-20000101-000110.000-gpu3+60s.log",
			"crash-20000101-000110.000-gpu3.log",
		)
		slices.Sort(want)
		if got := files(t, crashes, "*"); !slices.Equal(got, want) {
			t.Fatalf("at 370s: %v, want %v", got, want)
		}
		if err := m.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		if st := m.Stats(); st.FollowUpsWritten != 5 || st.FollowUpsCanceled != 1 {
			t.Errorf("stats = %+v", st)
		}
	})
}

func TestCloseCancelsPendingFollowUps(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		m := New(Config{Dir: dir, Runner: cannedRunner(), Now: func() time.Time { return time.Now().UTC() },
			ModulesPath: filepath.Join("testdata", "modules.txt")})
		defer m.Close(context.Background())
		m.Crash(0, testCrashRequest)
		time.Sleep(15 * time.Second)
		synctest.Wait()
		start := time.Now()
		if err := m.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		if time.Since(start) != 0 {
			t.Errorf("Close waited %v for pending follow-ups", time.Since(start))
		}
		if st := m.Stats(); st.FollowUpsWritten != 1 || st.FollowUpsCanceled != 2 {
			t.Errorf("stats = %+v, want 1 written, 2 canceled", st)
		}
	})
}
