package snapshot

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestLastRowsBeforeStopAtAnotherHeader: the day's second part has other
// columns than its first (a restart with another fan count): the boot log
// shows the newest part's rows under its header and does not join the
// first part's rows to them.
func TestLastRowsBeforeStopAtAnotherHeader(t *testing.T) {
	dir := t.TempDir()
	h1 := "timestamp,gpu_temp,fan0_speed_pct\n"
	h2 := "timestamp,gpu_temp\n"
	os.WriteFile(filepath.Join(dir, "gpu0-deep-2026-12-01.csv"), []byte(h1+"2026-12-01T10:00:00.000Z,50,30\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "gpu0-deep-2026-12-01_2.csv"), []byte(h2+"2026-12-01T10:05:00.000Z,51\n"), 0o644)
	rows := lastRowsBefore(dir, time.Date(2026, 12, 1, 11, 0, 0, 0, time.UTC), 50)
	if len(rows) != 1 {
		t.Fatalf("%d GPUs", len(rows))
	}
	g := rows[0]
	if g.header+"\n" != h2 || len(g.rows) != 1 || !strings.HasSuffix(g.rows[0], ",51") {
		t.Errorf("header %q rows %q; want the second part's one row under its header", g.header, g.rows)
	}
	if len(g.notes) != 1 || !strings.Contains(g.notes[0], "other columns") {
		t.Errorf("notes %q: want one saying the older rows have other columns", g.notes)
	}
}

// TestLastRowsBeforeOneBoardEach: two boards were GPU 0 (the previous run's
// board fell off the bus and the indices moved, or the other way round):
// each board's last rows are shown apart, never joined, the board line
// skipped.
func TestLastRowsBeforeOneBoardEach(t *testing.T) {
	dir := t.TempDir()
	h := "timestamp,gpu_temp\n"
	os.WriteFile(filepath.Join(dir, "gpu0-aaaa0001-deep-2026-12-01.csv"),
		[]byte("# gpu=0 uuid=GPU-aaaa0001-x\n"+h+"2026-12-01T10:00:00.000Z,64\n2026-12-01T10:00:00.100Z,65\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "gpu0-bbbb0002-deep-2026-12-01.csv"),
		[]byte("# gpu=0 uuid=GPU-bbbb0002-x\n"+h+"2026-12-01T10:05:00.000Z,33\n"), 0o644)
	now := time.Date(2026, 12, 1, 11, 0, 0, 0, time.UTC)
	rows := lastRowsBefore(dir, now, 50)
	if len(rows) != 2 {
		t.Fatalf("%d entries, want one per board", len(rows))
	}
	for i, want := range []struct {
		name  string
		temps []string
	}{{"GPU 0 (board aaaa0001)", []string{",64", ",65"}}, {"GPU 0 (board bbbb0002)", []string{",33"}}} {
		g := rows[i]
		if g.name() != want.name || g.header+"\n" != h || len(g.rows) != len(want.temps) {
			t.Fatalf("entry %d: %s header %q rows %q, want %s's %d rows", i, g.name(), g.header, g.rows, want.name, len(want.temps))
		}
		for j, r := range g.rows {
			if !strings.HasSuffix(r, want.temps[j]) {
				t.Errorf("%s row %d: %q, want its own board's", g.name(), j, r)
			}
		}
	}
}
