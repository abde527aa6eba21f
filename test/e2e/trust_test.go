package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/internal/testutil"
)

// TestLinksInTheLogDirRefused: a link planted in the log dir under a name
// the logger writes through code that follows links (the lock file,
// lumberjack's events.log and summary.log, the snapshot directories) is
// refused at start with one line and exit 2, and its target is left as it
// was. (Before, root wrote its PID, events and snapshots through them.)
func TestLinksInTheLogDirRefused(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		dir  bool
	}{
		{"gpu-telemetry.lock", false}, {"events.log", false}, {"summary.log", false},
		{"crashes", true}, {"spikes", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			link := filepath.Join(dir, c.name)
			planted := testutil.PlantLink(t, link, "root's own file\n", c.dir)
			code, stderr := runToEnd(t, opts{dir: dir}, 20*time.Second)
			if code != 2 {
				t.Errorf("exit code %d, want 2", code)
			}
			want := "gpu-telemetry: --log-dir " + dir + ": " + link + " is a symbolic link"
			if strings.TrimSpace(stderr) != want+": the daemon never writes through one" {
				t.Errorf("stderr %q, want the one line %q...", stderr, want)
			}
			if names := testutil.Entries(t, dir); len(names) != 1 {
				t.Errorf("the log dir holds %q after a refused start, want only the link", names)
			}
			planted.Check(t)
		})
	}
}

// TestCSVLinksNeverWrittenThrough: a link at today's CSV name is never
// written through (before, the logger wrote its header and rows into the
// target; now the rows are dropped and counted, with one error line),
// and a link at an earlier day's CSV name is not archived (its target would
// be copied into the log dir as a .csv.gz every user can read).
func TestCSVLinksNeverWrittenThrough(t *testing.T) {
	t.Parallel()
	p, _ := recordRows(t, opts{}, 0, 3, 20*time.Second)
	today := p.csvFile(0)
	if today == "" {
		t.Fatal("no CSV for GPU 0")
	}
	if err := os.Remove(today); err != nil {
		t.Fatal(err)
	}
	// An empty file, as a CSV the logger takes up at start (a file that is
	// not is another board's, and the logger starts a new part).
	planted := testutil.PlantLink(t, today, "", false)
	// The same board's file of a day long gone, as retention archives it
	// (housekeeping passes over what is not a regular file; this holds it).
	base := filepath.Base(today)
	old := filepath.Join(p.dir, base[:strings.Index(base, "-deep-")]+"-deep-2026-01-01.csv")
	oldPlanted := testutil.PlantLink(t, old, "root's own file\n", false)
	q := start(t, opts{dir: p.dir})
	q.waitFor("the CSV link refused", 20*time.Second, func() bool {
		return strings.Contains(q.stderr.String(), `msg="cannot open CSV; rows are dropped until it works" gpu=0`) &&
			strings.Contains(q.stderr.String(), "too many levels of symbolic links")
	})
	q.stop()
	if strings.Contains(q.stderr.String(), " rows_dropped=0 ") {
		t.Errorf("the rows not written through the link were not counted:\n%s", q.stderr.String())
	}
	planted.Check(t)
	oldPlanted.Check(t)
	if _, err := os.Stat(old + ".gz"); err == nil {
		t.Errorf("the old CSV link's target was archived as %s.gz", old)
	}
	if fi, err := os.Lstat(today); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("today's CSV link was replaced: %v", err)
	}
}
