package report

import (
	"encoding/csv"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/reading"
	"github.com/gpu-telemetry/gpu-telemetry/sink"
)

// writeRun runs the CSV sink once with GPU 0 reporting fans fans, writing n
// rows a second apart from start, and closes it (one run of the logger).
func writeRun(t *testing.T, dir string, fans int, start time.Time, n int) {
	t.Helper()
	c, err := sink.NewCSV(sink.CSVConfig{Dir: dir, Now: func() time.Time { return start },
		FreeBytes: func(string) (uint64, error) { return 1 << 40, nil }}, []sink.GPUColumns{{Index: 0, Fans: fans}})
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		s := reading.Sample{GPU: 0, Time: start.Add(time.Duration(i) * time.Second), TempC: reading.Some[uint32](60), NumFans: fans}
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

	files, _ := filepath.Glob(filepath.Join(dir, "gpu0-deep-*"))
	rowsInFiles := 0
	for _, p := range files {
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		recs, err := csv.NewReader(f).ReadAll()
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
