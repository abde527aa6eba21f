package report

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/sink"
)

// Health counter changes read as what changed in the timeline.
func TestHealthEventsInTimeline(t *testing.T) {
	for _, tc := range []struct{ line, want string }{
		{"type=HEALTH counter=ecc_sbe_volatile from=3 to=5 delta=+2", "health ecc_sbe_volatile 3 -> 5 (+2)"},
		{"type=HEALTH counter=nvlink_state link=3 from=active to=inactive", "health nvlink_state link 3 active -> inactive"},
		{"type=HEALTH counter=recovery_action from=0 to=1 action=gpu_reset", "health recovery_action 0 -> 1 gpu_reset"},
		{`type=HEALTH_CRITICAL reason=ecc_dbe detail="double-bit ECC errors since the driver loaded"`, "health CRITICAL ecc_dbe: double-bit ECC errors since the driver loaded"},
		{`type=HEALTH_WARNING reason=remap_pending detail="a row remap waits for a GPU reset"`, "health warning remap_pending: a row remap waits for a GPU reset"},
	} {
		l, ok := sink.ParseEventLine("2026-11-30T19:08:17.623Z gpu=0 " + tc.line)
		if !ok {
			t.Fatalf("%q did not parse", tc.line)
		}
		e := Event{Time: l.Time, Type: l.Type(), KV: l.KV}
		if got := e.describe(); got != tc.want {
			t.Errorf("%q: %q, want %q", tc.line, got, tc.want)
		}
	}
	e := Event{Type: sink.TypeHealthCritical, KV: map[string]string{"type": sink.TypeHealthCritical}}
	if !e.critical() {
		t.Errorf("HEALTH_CRITICAL is not an incident")
	}
}

// healthDay writes GPU 0's rows, one every 100 ms from start, with the
// health counters each row gives (sbe, dbe, remap pending) and its flags,
// as the logger writes them: the HEALTH_* flag on the row a reason began.
func healthDay(t *testing.T, dir string, start time.Time, rows []healthRow) {
	t.Helper()
	var b strings.Builder
	b.WriteString("timestamp,gpu_temp,power_instant,power_limit,ecc_mode,ecc_sbe_volatile,ecc_dbe_volatile,remap_pending,flags\n")
	for i, r := range rows {
		fmt.Fprintf(&b, "%s,60,300.00,600,1,%d,%d,%d,%s\n",
			start.Add(time.Duration(i)*100*time.Millisecond).Format(sink.TimestampLayout), r.sbe, r.dbe, r.pending, r.flags)
	}
	if err := os.WriteFile(filepath.Join(dir, "gpu0-deep-"+start.Format("2006-01-02")+".csv"), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

type healthRow struct {
	sbe, dbe, pending int
	flags             string
}

// rowsOf is n rows from a function of the row's number.
func rowsOf(n int, f func(i int) healthRow) []healthRow {
	out := make([]healthRow, n)
	for i := range out {
		out[i] = f(i)
	}
	return out
}

// TestHealthConditionLastsWhileItsReadingHolds: the logger flags a health
// reason on the row where it began only; the report's condition lasts while
// the reading that raised it holds (remap_pending reads 1, volatile DBEs
// above 0, SBEs grew within the logger's hold), not one row.
func TestHealthConditionLastsWhileItsReadingHolds(t *testing.T) {
	start := time.Date(2026, 12, 6, 6, 45, 0, 0, time.UTC)
	for _, tc := range []struct {
		name    string
		rows    []healthRow
		want    []string // in the timeline's text
		notWant []string
	}{
		{
			name: "remap_pending stays 1 to the end",
			rows: rowsOf(200, func(i int) healthRow {
				r := healthRow{}
				if i >= 50 {
					r.pending = 1
				}
				if i == 50 {
					r.flags = "HEALTH_WARN(remap_pending)"
				}
				return r
			}),
			want:    []string{"HEALTH_WARN(remap_pending) on: a row remap waits for a GPU reset", "still on: HEALTH_WARN(remap_pending) (for 14.9s)"},
			notWant: []string{"off after"},
		},
		{
			name: "remap_pending cleared by a reset",
			rows: rowsOf(200, func(i int) healthRow {
				r := healthRow{}
				if i >= 50 && i < 120 {
					r.pending = 1
				}
				if i == 50 {
					r.flags = "HEALTH_WARN(remap_pending)"
				}
				return r
			}),
			want:    []string{"HEALTH_WARN(remap_pending) off after 7.0s"},
			notWant: []string{"still on"},
		},
		{
			name: "a DBE holds while the volatile count is above 0",
			rows: rowsOf(200, func(i int) healthRow {
				r := healthRow{}
				if i >= 100 {
					r.dbe = 1
				}
				if i == 100 {
					r.flags = "HEALTH_CRIT(ecc_dbe)"
				}
				return r
			}),
			want:    []string{"HEALTH_CRIT(ecc_dbe) on: double-bit ECC errors", "still on: HEALTH_CRIT(ecc_dbe) (for 9.9s)"},
			notWant: []string{"off after"},
		},
		{
			name: "an SBE rate is held after the last growth, as the logger holds it",
			rows: rowsOf(200, func(i int) healthRow {
				r := healthRow{sbe: 3 * min(i/10, 6)} // +3 a second for 6 s, then no more
				if i == 40 {
					r.flags = "HEALTH_WARN(ecc_sbe_rate)"
				}
				return r
			}),
			want:    []string{"HEALTH_WARN(ecc_sbe_rate) on", "still on: HEALTH_WARN(ecc_sbe_rate) (for 15.9s)"},
			notWant: []string{"off after"},
		},
		{
			name: "a growth that began before the first row: the flag begins it",
			rows: rowsOf(200, func(i int) healthRow {
				r := healthRow{sbe: 100}
				if i == 0 {
					r.flags = "HEALTH_WARN(ecc_sbe_rate)"
				}
				return r
			}),
			want:    []string{"still on: HEALTH_WARN(ecc_sbe_rate) (for 19.9s)"},
			notWant: []string{"off after"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			healthDay(t, dir, start, tc.rows)
			writeEvents(t, dir)
			rep, err := Build(Options{Dir: dir, GPU: -1, At: start.Add(10 * time.Second), Before: time.Minute, After: time.Minute, Loc: time.UTC})
			if err != nil {
				t.Fatal(err)
			}
			var b strings.Builder
			for _, e := range rep.Timeline {
				b.WriteString(e.What + "\n")
			}
			text := b.String()
			for _, w := range tc.want {
				if !strings.Contains(text, w) {
					t.Errorf("timeline lacks %q:\n%s", w, text)
				}
			}
			for _, w := range tc.notWant {
				if strings.Contains(text, w) {
					t.Errorf("timeline says %q:\n%s", w, text)
				}
			}
		})
	}
}
