package report

import (
	"encoding/csv"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/internal/counters"
	"github.com/gpu-telemetry/gpu-telemetry/reading"
	"github.com/gpu-telemetry/gpu-telemetry/sink"
)

// writeRun runs the CSV sink once with GPU 0 reporting fans fans, writing n
// rows a second apart from start, and closes it (one run of the logger).
func writeRun(t *testing.T, dir string, fans int, start time.Time, n int) {
	t.Helper()
	var times []time.Time
	for i := range n {
		times = append(times, start.Add(time.Duration(i)*time.Second))
	}
	writeRows(t, dir, fans, times)
}

// writeRows runs the CSV sink once with GPU 0 reporting fans fans, writing
// a row at each of times (the wall clock as the logger saw it), and closes it.
func writeRows(t *testing.T, dir string, fans int, times []time.Time) {
	t.Helper()
	c, err := sink.NewCSV(sink.CSVConfig{Counters: counters.New(), Dir: dir, Now: func() time.Time { return times[0] },
		FreeBytes: func(string) (uint64, error) { return 1 << 40, nil }}, []sink.GPUColumns{{Index: 0, Fans: fans}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tm := range times {
		s := reading.Sample{GPU: 0, Time: tm, Values: reading.Values{reading.TempC: reading.Some[uint64](60)}, NumFans: fans}
		for f := range fans {
			s.Fans[f] = reading.Fan{Speed: reading.Some[uint32](40), Target: reading.Some[uint32](41)}
		}
		if err := c.Write(&s); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestRestartWithOtherColumnsSameDay: a run with a GPU of 2 fans, then a
// run the same day where that GPU reported none (stuck at start). Every
// file stays a plain CSV that a strict reader (encoding/csv, as pandas)
// reads with one field count, and the report finds every row of both runs
// with its own columns.
func TestRestartWithOtherColumnsSameDay(t *testing.T) {
	dir := t.TempDir()
	loc := time.UTC
	run1 := time.Date(2026, 12, 1, 10, 0, 0, 0, loc)
	run2 := run1.Add(5 * time.Minute)
	writeRun(t, dir, 2, run1, 10)
	writeRun(t, dir, 0, run2, 10)
	writeRun(t, dir, 2, run2.Add(5*time.Minute), 10) // and back: a third column set change

	files, _ := filepath.Glob(filepath.Join(dir, "gpu0-*deep-*"))
	rowsInFiles := 0
	for _, p := range files {
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		cr := csv.NewReader(f)
		cr.Comment = '#' // the board line
		recs, err := cr.ReadAll()
		f.Close()
		if err != nil {
			t.Errorf("%s is not one table: %v", filepath.Base(p), err)
			continue
		}
		if recs[0][0] != "timestamp" {
			t.Errorf("%s does not start with its header: %q", filepath.Base(p), recs[0])
		}
		rowsInFiles += len(recs) - 1
	}
	if rowsInFiles != 30 {
		t.Errorf("%d rows read by encoding/csv from %v, want 30", rowsInFiles, files)
	}

	rep, err := Build(Options{Dir: dir, At: run2.Add(5 * time.Second), GPU: -1, Before: 10 * time.Minute, After: 10 * time.Minute, Loc: loc})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.GPUs) != 1 {
		t.Fatalf("%d GPUs in the report, want 1; read %q skipped %q", len(rep.GPUs), rep.Read, rep.Skipped)
	}
	rows := rep.GPUs[0].Rows
	if len(rows) != 30 {
		t.Fatalf("%d rows in the report, want 30; read %q skipped %q", len(rows), rep.Read, rep.Skipped)
	}
	for i, r := range rows {
		wantFans := 2
		if i >= 10 && i < 20 {
			wantFans = 0
		}
		if len(r.Fans) != wantFans {
			t.Errorf("row %d (%v): %d fans, want %d", i, r.Time, len(r.Fans), wantFans)
			continue
		}
		if !r.Temp.OK || r.Temp.V != 60 {
			t.Errorf("row %d: temp %+v, want 60", i, r.Temp)
		}
		for _, f := range r.Fans {
			if !f.Speed.OK || f.Speed.V != 40 || !f.Target.OK || f.Target.V != 41 {
				t.Errorf("row %d: fan %+v, want 40/41", i, f)
			}
		}
	}
}

// TestReportFindsRowsOfAClockStepBack: the wall clock steps back from just
// after midnight to 18:00 the evening before and runs on to 22:00. A report
// at 20:00 that evening finds the rows written then.
func TestReportFindsRowsOfAClockStepBack(t *testing.T) {
	dir := t.TempDir()
	loc := time.UTC
	times := []time.Time{time.Date(2026, 12, 1, 23, 59, 50, 0, loc), time.Date(2026, 12, 2, 0, 0, 10, 0, loc)}
	for m := 0; m <= 240; m += 10 { // 18:00 .. 22:00, every 10 minutes
		times = append(times, time.Date(2026, 12, 1, 18, m, 0, 0, loc))
	}
	times = append(times, time.Date(2026, 12, 2, 0, 0, 20, 0, loc)) // the clock is set right again
	writeRows(t, dir, 2, times)
	at := time.Date(2026, 12, 1, 20, 0, 0, 0, loc)
	rep, err := Build(Options{Dir: dir, At: at, GPU: -1, Before: time.Hour, After: time.Hour, Loc: loc})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.GPUs) != 1 || len(rep.GPUs[0].Rows) != 13 {
		n := 0
		if len(rep.GPUs) > 0 {
			n = len(rep.GPUs[0].Rows)
		}
		t.Fatalf("%d rows between 19:00 and 21:00, want 13; read %q skipped %q", n, rep.Read, rep.Skipped)
	}
}
