package e2e

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/internal/testutil"
)

// TestFullDiskKeepsEventsAndResumesRows fills the log directory's disk, sends
// kernel Xids while it is full, then frees the space: every Xid must reach
// events.log with the time it happened, the summary lines of the outage must
// reach summary.log, and rows must resume within about a second.
func TestFullDiskKeepsEventsAndResumesRows(t *testing.T) {
	t.Parallel()
	dir := testutil.SmallDisk(t, "2m")
	// No health counters: their baseline line would leave room in
	// events.log's last page, which the full disk must not have.
	p := start(t, opts{scenario: "gpus 2\ngpu all health none\n", dir: dir, kmsg: true,
		args: []string{"--min-free-mb", "0", "--no-compress", "--summary-interval", "1s", "--crash-cooldown", "1h"}})
	p.waitForRows(1, 5, 15*time.Second)
	filler := filepath.Join(dir, "filler")
	testutil.FillDisk(t, filler)
	p.waitFor("the disk guard to see the full disk", 30*time.Second, func() bool {
		return strings.Contains(p.stderr.String(), "disk full (ENOSPC)")
	})
	// Every file's last page is full now; wait until summary.log's is too.
	p.waitFor("summary.log to fail", 30*time.Second, func() bool {
		return strings.Contains(p.stderr.String(), "summary.log")
	})
	sent := time.Now()
	xids := []string{"13", "31", "43", "45"}
	for _, x := range xids {
		p.writeKmsg("4," + x + "00,100" + x + "000,-;NVRM: Xid (PCI:0000:21:00): " + x + ", pid=" + x + ", name=job" + x + ", test Xid")
	}
	// The logger has read them (its counter), yet cannot write them.
	time.Sleep(2 * time.Second)
	if ev := events(dir); strings.Contains(ev, "xid=13") {
		t.Fatalf("events.log was writable while the disk was full; the test proves nothing:\n%s", ev)
	}
	rowsBefore := rowCount(p.csvFile(1))
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	freed := time.Now()
	// Rows resume within about a second (a tick of the probe); 3 s is the
	// failure guard on a loaded machine, well under the old 10 s re-check.
	deadline := freed.Add(3 * time.Second)
	for rowCount(p.csvFile(1)) <= rowsBefore {
		if time.Now().After(deadline) {
			t.Fatalf("no new row 3 s after space returned")
		}
		time.Sleep(20 * time.Millisecond)
	}
	var want []string
	for _, x := range xids {
		want = append(want, "type=Xid xid="+x+" ")
	}
	p.waitForEvent("every Xid in events.log", 10*time.Second, want...)
	time.Sleep(1500 * time.Millisecond)
	p.stop()
	for _, line := range strings.Split(readFile(t, filepath.Join(dir, "events.log")), "\n") {
		if !strings.Contains(line, "source=kmsg type=Xid") {
			continue
		}
		// The time the Xid arrived, not the time it reached the file.
		if ts := parseTime(t, strings.TrimPrefix(strings.Fields(line)[0], "time=")); ts.Before(sent.Add(-time.Second)) || ts.After(freed) {
			t.Errorf("Xid line stamped %v; it arrived between %v and %v: %s", ts, sent, freed, line)
		}
	}
	// summary.log: one line a second, none lost across the outage.
	var prev time.Time
	for _, line := range strings.Split(strings.TrimSpace(readFile(t, filepath.Join(dir, "summary.log"))), "\n") {
		ts := parseTime(t, strings.Fields(line)[0])
		if !prev.IsZero() && ts.Sub(prev) > 2500*time.Millisecond {
			t.Errorf("summary.log skips from %v to %v", prev, ts)
		}
		prev = ts
	}
	if prev.Before(freed) {
		t.Errorf("no summary line after space returned (last %v)", prev)
	}
	for gpu := range 2 {
		readCSV(t, p.csvFile(gpu)) // strict: a torn line fails here
	}
	for _, name := range []string{"events.log", "summary.log"} {
		eachLineWholeOnce(t, filepath.Join(dir, name))
	}
}

// TestFullDiskTearsNoLogLine fills the disk while events.log and
// summary.log have room left in their last page: the line that crosses
// into the next page is cut short by the full disk (a short write, then
// ENOSPC), as in the chaos run where `... snapshot=/var/.../lo` stayed in
// events.log and the whole line followed. After space returns, each file
// holds every line whole, once.
func TestFullDiskTearsNoLogLine(t *testing.T) {
	t.Parallel()
	dir := testutil.SmallDisk(t, "2m")
	p := start(t, opts{scenario: "gpus 2\n", dir: dir, kmsg: true,
		args: []string{"--min-free-mb", "0", "--no-compress", "--summary-interval", "1s", "--crash-cooldown", "1h"}})
	// Both files have lines, so each has a page with room in it.
	p.waitForEvent("the health baselines in events.log", 15*time.Second, "type=HEALTH_BASELINE")
	p.waitFor("a summary line", 15*time.Second, func() bool {
		b, _ := os.ReadFile(filepath.Join(dir, "summary.log"))
		return len(b) > 0
	})
	filler := filepath.Join(dir, "filler")
	testutil.FillDisk(t, filler)
	// A page holds about ten Xid lines: twenty fill events.log's. Each of
	// another code, none in NVIDIA's catalog: an application's Xid (13)
	// past ten a minute would be held back (the Xid storm limit), not
	// written.
	var want []string
	for i := range 20 {
		x := strconv.Itoa(13 + i)
		code := strconv.Itoa(900 + i)
		p.writeKmsg("4," + x + "00,100" + x + "000,-;NVRM: Xid (PCI:0000:21:00): " + code + ", pid=" + x + ", name=job" + x + ", test Xid")
		want = append(want, "pid="+x+", name=job"+x+",")
	}
	for _, name := range []string{"events.log", "summary.log"} {
		p.waitFor(name+" to fail", 30*time.Second, func() bool {
			return strings.Contains(p.stderr.String(), "cannot write a log file") &&
				strings.Contains(p.stderr.String(), filepath.Join(dir, name))
		})
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	p.waitForEvent("every Xid in events.log", 10*time.Second, want...)
	time.Sleep(1500 * time.Millisecond) // a summary line after the outage
	p.stop()
	for _, name := range []string{"events.log", "summary.log"} {
		eachLineWholeOnce(t, filepath.Join(dir, name))
	}
}

// eachLineWholeOnce fails when a line of the file at path is there twice, or
// is the start of another line: the part of a line that a full disk cut
// short, left before the whole line written after the disk had room.
func eachLineWholeOnce(t *testing.T, path string) {
	t.Helper()
	text := readFile(t, path)
	if text != "" && !strings.HasSuffix(text, "\n") {
		t.Errorf("%s ends in a partial line: %q", path, text[strings.LastIndexByte(text, '\n')+1:])
	}
	lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	sorted := slices.Sorted(slices.Values(lines))
	for i := 1; i < len(sorted); i++ {
		if strings.HasPrefix(sorted[i], sorted[i-1]) {
			t.Errorf("%s holds a line twice or cut short:\n%s\n%s", path, sorted[i-1], sorted[i])
		}
	}
}
