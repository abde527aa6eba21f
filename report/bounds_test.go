package report

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
	"github.com/gpu-telemetry/gpu-telemetry/snapshot"
)

// hostileLine is the over-long line of the tests.
const hostileLine = testutil.HostileLine

// allocBound is what reading a file with a hostile line may allocate: the
// reader's buffer, a gzip reader, the rows.
const allocBound = 4 << 20

// dayWithLongLine is a day's CSV (a board line, the header, 100 rows) with
// an 8 MiB line between its 50th and 51st rows (first, with long first:
// in place of its board line).
func dayWithLongLine(start time.Time, first bool) []byte {
	var b bytes.Buffer
	if first {
		b.Write(testutil.LongLine(hostileLine))
	} else {
		b.WriteString("# gpu=0 uuid=GPU-5a3c1e2f-0000\n")
	}
	b.WriteString(header)
	for i := 0; i < 100; i++ {
		if i == 50 && !first {
			b.Write(testutil.LongLine(hostileLine))
		}
		b.WriteString(rowLine(start.Add(time.Duration(i)*100*time.Millisecond), 50, ""))
	}
	return b.Bytes()
}

// TestOverLongLinesAreSkippedUnread: a CSV with a line of 8 MiB, plain or
// in a small .gz that expands to it, is read without holding the line (a
// 1 GB line took 3-5 GB, a 2 MB .gz expanding to 2 GB 6.1 GB): the rows
// around it are reported, the line is counted in Skipped.
func TestOverLongLinesAreSkippedUnread(t *testing.T) {
	day := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	for _, gz := range []bool{false, true} {
		name := "gpu0-5a3c1e2f-deep-2026-11-30.csv"
		if gz {
			name += ".gz"
		}
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, name)
			if gz {
				testutil.WriteGzip(t, path, dayWithLongLine(day, false))
			} else if err := os.WriteFile(path, dayWithLongLine(day, false), 0o644); err != nil {
				t.Fatal(err)
			}
			f := sink.CSVDay{Path: path, GZ: gz}
			var st readStats
			var err error
			rows := 0
			alloc := testutil.Allocated(func() {
				st, err = readWindow(sink.OpenRegular, f, day, day.Add(time.Minute), nil, func(Row) { rows++ })
			})
			if err != nil || rows != 100 || st.Long != 1 || st.Malformed != 0 {
				t.Errorf("readWindow: %d rows, %+v, %v; want the 100 rows and the long line counted", rows, st, err)
			}
			if alloc > allocBound {
				t.Errorf("readWindow allocated %d MiB reading an %d MiB line, want under %d MiB", alloc>>20, hostileLine>>20, allocBound>>20)
			}
			rep, err := Build(Options{Dir: dir, GPU: -1, At: day.Add(5 * time.Second), Loc: time.UTC})
			if err != nil {
				t.Fatal(err)
			}
			if want := name + ": 1 line(s) over 64 KiB skipped unread"; !strings.Contains(strings.Join(rep.Skipped, "\n"), want) {
				t.Errorf("Skipped %q, want %q", rep.Skipped, want)
			}
		})
	}
}

// TestOverLongFirstLine: a CSV whose first line (where its board line
// belongs) is 8 MiB is placed and matched to a board without holding it:
// the first-line readers (boardOf, firstRowTime) are bounded too, and
// reading it says it is damaged.
func TestOverLongFirstLine(t *testing.T) {
	day := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	for _, gz := range []bool{false, true} {
		dir := t.TempDir()
		path := filepath.Join(dir, "gpu0-5a3c1e2f-deep-2026-11-30.csv")
		if gz {
			path += ".gz"
			testutil.WriteGzip(t, path, dayWithLongLine(day, true))
		} else if err := os.WriteFile(path, dayWithLongLine(day, true), 0o644); err != nil {
			t.Fatal(err)
		}
		f := sink.CSVDay{Path: path, GZ: gz}
		var ok1, ok2 bool
		var st readStats
		alloc := testutil.Allocated(func() {
			_, ok1, _ = boardOf(f)
			_, ok2 = firstRowTime(f)
			st, _ = readWindow(sink.OpenRegular, f, day, day.Add(time.Minute), nil, func(Row) {})
		})
		if ok1 || ok2 || st.Damage != sink.ErrLongLine.Error() {
			t.Errorf("%s: board %v, first row %v, %+v; want neither found and the file said damaged", path, ok1, ok2, st)
		}
		if alloc > allocBound {
			t.Errorf("%s: allocated %d MiB reading an %d MiB first line, want under %d MiB", path, alloc>>20, hostileLine>>20, allocBound>>20)
		}
	}
}

// TestBigSnapshotReadForItsHeaderOnly: a crash snapshot of 8 MiB is read
// for its header only (a 3 GB file in crashes/ took 6.3 GB).
func TestBigSnapshotReadForItsHeaderOnly(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "crash-20261130-190817.623-gpu0.log")
	head := "=== GPU CRASH DETECTED ===\nTime: 2026-11-30T19:08:17.623Z\nGPU: 0 NVIDIA H100\nReason: Xid 79\n\n"
	if err := os.WriteFile(p, append([]byte(head), testutil.LongLine(hostileLine)...), 0o644); err != nil {
		t.Fatal(err)
	}
	var ok bool
	var err error
	var reason string
	alloc := testutil.Allocated(func() {
		var h snapshot.Header
		h, ok, err = readHeader(sink.OpenRegular, p)
		reason = h.Reason
	})
	if !ok || err != nil || reason != "Xid 79" {
		t.Errorf("readHeader: %v %v reason %q", ok, err, reason)
	}
	if alloc > 1<<20 {
		t.Errorf("readHeader allocated %d KiB of an %d MiB snapshot, want under 1 MiB", alloc>>10, hostileLine>>20)
	}
}

// TestIncidentNotARegularFile: --incident naming a device, a FIFO or a
// directory is refused in one line (read, /dev/zero took 11 GB until
// killed and a FIFO waited forever).
func TestIncidentNotARegularFile(t *testing.T) {
	dir := t.TempDir()
	writeDay(t, filepath.Join(dir, "gpu0-deep-2026-11-30.csv"), time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC), 100, 100*time.Millisecond)
	fifo := filepath.Join(dir, "crash-20261130-120001.000-gpu0.log")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	sub := filepath.Join(dir, "crash-20261130-120002.000-gpu0.log")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{sub, fifo, "/dev/zero"} {
		_, err := Build(Options{Dir: dir, GPU: -1, Incident: p, Loc: time.UTC})
		if want := "--incident " + p + ": not a regular file"; err == nil || err.Error() != want {
			t.Errorf("err = %v, want %q", err, want)
		}
	}
}

// TestOverLongEventLineSkipped: an events.log line of 8 MiB is skipped
// unread and said; the events after it are still read (it ended the
// file's reading, counted as one line that did not parse).
func TestOverLongEventLineSkipped(t *testing.T) {
	dir := t.TempDir()
	day := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	writeDay(t, filepath.Join(dir, "gpu0-deep-2026-11-30.csv"), day, 100, 100*time.Millisecond)
	var b bytes.Buffer
	b.WriteString("time=2026-11-30T12:00:01.000Z gpu=0 type=TDP_CHANGE from=600W to=450W delta=-150W\n")
	b.Write(testutil.LongLine(hostileLine))
	b.WriteString("time=2026-11-30T12:00:05.000Z gpu=0 type=Xid xid=79 name=\"GPU has fallen off the bus\"\n")
	if err := os.WriteFile(filepath.Join(dir, "events.log"), b.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	var evs []EventLine
	var bad, long int
	alloc := testutil.Allocated(func() {
		evs, bad, long, _ = readEvents(sink.OpenRegular, []string{filepath.Join(dir, "events.log")}, time.Time{}, time.Time{})
	})
	if len(evs) != 2 || bad != 0 || long != 1 {
		t.Errorf("%d events, %d bad, %d long; want both events and the long line counted", len(evs), bad, long)
	}
	if alloc > allocBound {
		t.Errorf("readEvents allocated %d MiB, want under %d MiB", alloc>>20, allocBound>>20)
	}
	rep, err := Build(Options{Dir: dir, GPU: -1, Loc: time.UTC})
	if err != nil {
		t.Fatal(err)
	}
	if want := "1 events.log line(s) over 64 KiB skipped unread"; !strings.Contains(strings.Join(rep.Skipped, "\n"), want) || !strings.Contains(rep.Incident.What, "Xid 79") {
		t.Errorf("incident %q, skipped %q; want the Xid after the long line and %q", rep.Incident.What, rep.Skipped, want)
	}
}
