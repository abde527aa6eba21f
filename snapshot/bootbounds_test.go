package snapshot

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/internal/testutil"
	"github.com/gpu-telemetry/gpu-telemetry/sink"
)

// hostileLine is the over-long line of the tests.
const hostileLine = testutil.HostileLine

// bootRows writes n rows every 100 ms from start to b.
func bootRowsTo(b *bytes.Buffer, start time.Time, n int) {
	for i := 0; i < n; i++ {
		b.WriteString(bootRow(start.Add(time.Duration(i)*100*time.Millisecond), 60) + "\n")
	}
}

// TestBootLogBoundedWhateverTheDirHolds: the boot log reads a log
// directory holding a CSV whose first line is 8 MiB, a small .csv.gz
// expanding to an 8 MiB line among its rows and an events.log that is a
// FIFO, without holding the long lines (the same
// 2 MB .gz made the daemon reach 4.2 GB at start and keep it) and without
// waiting on the FIFO: the rows around the long lines are shown, what was
// skipped or refused is said. (A FIFO named as a CSV is not listed:
// sink.ListDays lists regular files only.)
func TestBootLogBoundedWhateverTheDirHolds(t *testing.T) {
	dir := t.TempDir()
	now := time.Date(2026, 12, 1, 11, 0, 0, 0, time.UTC)
	var p bytes.Buffer // GPU 0: its first line, where the board line goes, is 8 MiB
	p.Write(testutil.LongLine(hostileLine))
	p.WriteString(bootHeader + "\n")
	bootRowsTo(&p, now.Add(-time.Hour), 10)
	os.WriteFile(filepath.Join(dir, "gpu0-aaaa0001-deep-2026-12-01.csv"), p.Bytes(), 0o644)
	var g bytes.Buffer // GPU 1: yesterday's .gz, 8 MiB in 8 KiB, between its rows
	g.WriteString("# gpu=1 uuid=GPU-bbbb0002-x\n" + bootHeader + "\n")
	bootRowsTo(&g, now.Add(-24*time.Hour), 20)
	g.Write(testutil.LongLine(hostileLine))
	bootRowsTo(&g, now.Add(-23*time.Hour), 30)
	testutil.WriteGzip(t, filepath.Join(dir, "gpu1-bbbb0002-deep-2026-11-30.csv.gz"), g.Bytes())
	if err := syscall.Mkfifo(filepath.Join(dir, "events.log"), 0o600); err != nil {
		t.Fatal(err)
	}

	var rows []gpuRows
	alloc := testutil.Allocated(func() { rows = lastRowsBefore(dir, now, 50) })
	if alloc > 4<<20 {
		t.Errorf("lastRowsBefore allocated %d MiB reading %d MiB lines, want under 4 MiB", alloc>>20, hostileLine>>20)
	}
	if len(rows) != 2 {
		t.Fatalf("%d entries, want one per GPU", len(rows))
	}
	for i, want := range []struct {
		rows int
		note string
	}{
		{10, ""}, // the long line is its preamble: its rows are read from the tail
		{50, "gpu1-bbbb0002-deep-2026-11-30.csv.gz: 1 line(s) over 64 KiB skipped unread"},
	} {
		g := rows[i]
		notes := strings.Join(g.notes, "\n")
		if len(g.rows) != want.rows || !strings.Contains(notes, want.note) {
			t.Errorf("%s: %d rows, notes %q; want %d rows and a note %q", g.name(), len(g.rows), notes, want.rows, want.note)
		}
	}
	if got, want := lastIncidents(filepath.Join(dir, "events.log"), now), "not a regular file"; !strings.Contains(got, want) {
		t.Errorf("events.log as a FIFO: %q, want it refused (%q)", got, want)
	}
}

// TestBootLogEventsLongLine: an events.log line over sink.MaxLine is
// skipped and said; the incident lines around it are kept.
func TestBootLogEventsLongLine(t *testing.T) {
	dir := t.TempDir()
	now := time.Date(2026, 12, 1, 11, 0, 0, 0, time.UTC)
	xid := "time=2026-12-01T10:00:00.000Z gpu=0 type=Xid xid=79 name=\"GPU has fallen off the bus\""
	var b bytes.Buffer
	b.WriteString(xid + "\n")
	b.Write(testutil.LongLine(sink.MaxLine + 10))
	b.WriteString(xid + "\n")
	os.WriteFile(filepath.Join(dir, "events.log"), b.Bytes(), 0o600)
	got := lastIncidents(filepath.Join(dir, "events.log"), now)
	if want := xid + "\n" + xid + "\n(1 line(s) of events.log over 64 KiB skipped unread)\n"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

// TestBootRowsOfAMembersGzReadNearItsEnd: yesterday's .gz in members (as
// the logger compresses a day) is entered at the member before the last,
// not decompressed from its start, and gives the same last rows as the
// plain file; a .gz in one member over the per-file bound is read to the
// bound and said.
func TestBootRowsOfAMembersGzReadNearItsEnd(t *testing.T) {
	dir := t.TempDir()
	now := time.Date(2026, 12, 1, 11, 0, 0, 0, time.UTC)
	var d bytes.Buffer
	d.WriteString("# gpu=0 uuid=GPU-aaaa0001-x\n" + bootHeader + "\n")
	bootRowsTo(&d, now.Add(-24*time.Hour), 120000) // about 4.3 MiB: 5 members
	plain := filepath.Join(dir, "gpu0-aaaa0001-deep-2026-11-30.csv")
	os.WriteFile(plain, d.Bytes(), 0o644)
	budget := bootReadMax
	want, err := readRowsBefore(plain, false, now, 50, &budget)
	if err != nil || len(want.rows) != 50 {
		t.Fatalf("plain: %d rows, %v", len(want.rows), err)
	}
	if err := sink.CompressFile(plain); err != nil {
		t.Fatal(err)
	}
	budget = bootReadMax
	got, err := readRowsBefore(plain+".gz", true, now, 50, &budget)
	if err != nil || strings.Join(got.rows, "\n") != strings.Join(want.rows, "\n") || got.header != bootHeader {
		t.Errorf("members .gz: header %q, %d rows, %v; want the plain file's last 50 rows", got.header, len(got.rows), err)
	}
	if got.read > int64(d.Len())/2 || bootReadMax-budget != got.read {
		t.Errorf("members .gz: read %d bytes of %d (budget spent %d); want a member or two", got.read, d.Len(), bootReadMax-budget)
	}

	old := bootFileMax
	bootFileMax = 1 << 20
	t.Cleanup(func() { bootFileMax = old })
	one := filepath.Join(dir, "gpu1-bbbb0002-deep-2026-11-30.csv.gz")
	testutil.WriteGzip(t, one, d.Bytes())
	rows := lastRowsBefore(dir, now, 50)
	if len(rows) != 2 || !strings.Contains(strings.Join(rows[1].notes, "\n"), "1 MiB read, the boot log's bound") {
		t.Errorf("one-member .gz over the bound: %+v; want it read to the bound and said", rows)
	}
}
