package e2e

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// cperLines are events.log's CPER lines.
func cperLines(dir string) []string {
	var out []string
	for _, l := range strings.Split(events(dir), "\n") {
		if strings.Contains(l, "type=CPER ") {
			out = append(out, l)
		}
	}
	return out
}

var cperFile = regexp.MustCompile(`file=(crashes/cper-\d{8}-\d{6}\.\d{3}-GPU-[0-9a-f-]+(?:-\d+)?\.bin)`)

// checkSaved checks that the line's file= is the raw record, whole.
func checkSaved(t *testing.T, dir, line string) {
	t.Helper()
	m := cperFile.FindStringSubmatch(line)
	if m == nil {
		t.Fatalf("no file= of a saved record in %q", line)
	}
	b, err := os.ReadFile(filepath.Join(dir, m[1]))
	if err != nil || len(b) != 216 || string(b[:4]) != "CPER" {
		t.Fatalf("saved record %s: %d bytes %q, err %v", m[1], len(b), b[:min(4, len(b))], err)
	}
}

// A record the driver holds at start (the previous boot's) is saved and
// decoded; a restart repeats none and reads the one added since.
func TestCPERAtStartAndAcrossRestart(t *testing.T) {
	t.Parallel()
	o := opts{scenario: "gpus 1\ngpu 0 cper fatal section pcie\n"}
	p := start(t, o)
	p.waitFor("the CPER line", 20*time.Second, func() bool { return len(cperLines(p.dir)) == 1 })
	p.stop()
	l := cperLines(p.dir)[0]
	for _, want := range []string{"record_id=1000", "severity=fatal", "sections=pcie", "gpu=0", "length=216"} {
		if !strings.Contains(l, want) {
			t.Errorf("CPER line lacks %q: %s", want, l)
		}
	}
	checkSaved(t, p.dir, l)

	// The driver now holds a second record; the cursor resumes after the first.
	o.dir, o.scenario = p.dir, o.scenario+"gpu 0 cper corrected section memory\n"
	p = start(t, o)
	p.waitFor("the second CPER line", 20*time.Second, func() bool { return len(cperLines(p.dir)) >= 2 })
	p.waitForRows(0, 3, 15*time.Second)
	p.stop()
	lines := cperLines(p.dir)
	if len(lines) != 2 || !strings.Contains(lines[1], "record_id=1001") || !strings.Contains(lines[1], "sections=platform_memory") {
		t.Fatalf("after the restart, CPER lines:\n%s", strings.Join(lines, "\n"))
	}
	checkSaved(t, p.dir, lines[1])
}

// A record that comes with a critical event is read after it and listed in
// the incident's follow-up.
func TestCPERAfterCriticalEventJoinsTheIncident(t *testing.T) {
	t.Parallel()
	p := start(t, opts{scenario: "gpus 1\nat 3 gpu 0 cper fatal section nvidia\nat 3 gpu 0 xid 48\n"})
	p.waitFor("the follow-up capture", 30*time.Second, func() bool { return len(snapshots(p.dir, "crash-*-gpu0+2s.log")) == 1 })
	p.stop()
	lines := cperLines(p.dir)
	if len(lines) != 1 || !strings.Contains(lines[0], "record_id=1000") || !strings.Contains(lines[0], "incident=crash-") {
		t.Fatalf("CPER lines (want one, of the incident):\n%s", strings.Join(lines, "\n"))
	}
	checkSaved(t, p.dir, lines[0])
	fu := readFile(t, snapshots(p.dir, "crash-*-gpu0+2s.log")[0])
	if !strings.Contains(fu, "CPER record record_id 1000 severity fatal nvidia") {
		t.Errorf("the follow-up does not list the CPER record:\n%s", fu)
	}
}

// A record the driver writes just after the critical event (not there when
// the event's read ran) is read before the incident's follow-up and joins
// the incident.
func TestCPERWrittenJustAfterTheXidJoinsTheIncident(t *testing.T) {
	t.Parallel()
	p := start(t, opts{scenario: "gpus 1\nat 3 gpu 0 xid 48\nat 3.5 gpu 0 cper fatal section nvidia\n"})
	p.waitFor("the follow-up capture", 30*time.Second, func() bool { return len(snapshots(p.dir, "crash-*-gpu0+2s.log")) == 1 })
	p.stop()
	lines := cperLines(p.dir)
	if len(lines) != 1 || !strings.Contains(lines[0], "record_id=1000") || !strings.Contains(lines[0], "incident=crash-") {
		t.Fatalf("CPER lines (want one, of the incident):\n%s", strings.Join(lines, "\n"))
	}
	fu := readFile(t, snapshots(p.dir, "crash-*-gpu0+2s.log")[0])
	if !strings.Contains(fu, "CPER record record_id 1000 severity fatal nvidia") {
		t.Errorf("the follow-up does not list the CPER record:\n%s", fu)
	}
}

// A corrupt record is saved raw, written as such, counted: nothing breaks.
func TestCPERCorruptRecord(t *testing.T) {
	t.Parallel()
	p := start(t, opts{scenario: "gpus 1\ngpu 0 cper fatal corrupt\n"})
	p.waitFor("the CPER line", 20*time.Second, func() bool { return len(cperLines(p.dir)) == 1 })
	p.waitForRows(0, 3, 15*time.Second)
	p.stop()
	l := cperLines(p.dir)[0]
	if !strings.Contains(l, "decoded=corrupt") || !cperFile.MatchString(l) {
		t.Fatalf("corrupt record's line: %s", l)
	}
	if n := strings.Count(p.stderr.String(), "could not be decoded; saved raw"); n != 1 {
		t.Errorf("%d log lines about the corrupt record, want 1", n)
	}
}

// An old driver without nvmlSystemGetCPER_v1: one line says so, nothing
// else changes.
func TestCPEROldDriver(t *testing.T) {
	t.Parallel()
	p, _ := recordRows(t, opts{scenario: "gpus 1\ngpu 0 cper fatal\n", oldLib: true}, 0, 5, 15*time.Second)
	errs := p.stderr.String()
	if n := strings.Count(errs, "lacks nvmlSystemGetCPER_v1"); n != 1 {
		t.Errorf("%d lines say the driver lacks it, want 1", n)
	}
	if l := cperLines(p.dir); len(l) != 0 {
		t.Errorf("CPER lines from an old driver: %v", l)
	}
}

// A GPU's CPER records are in status --json (counted by severity, the last
// one's header) and in the metrics; a record the driver returns again after
// its handle was lost (a read that restarted from the first record) is
// skipped by its saved id and counted, not silent.
func TestCPERInStatusAndRepeatsCounted(t *testing.T) {
	t.Parallel()
	o := opts{scenario: "gpus 1\ngpu 0 cper fatal section pcie\n", args: []string{"--metrics-listen", "127.0.0.1:0"}}
	p := start(t, o)
	addr := p.metricsAddr()
	p.waitFor("the CPER line", 20*time.Second, func() bool { return len(cperLines(p.dir)) == 1 })
	_, d, out := statusAs[opStatus](t, p.socketPath())
	if len(d.GPUs) != 1 {
		t.Fatalf("status --json:\n%s", out)
	}
	c := d.GPUs[0].CPER
	if c.Records != 1 || c.BySeverity["fatal"] != 1 || c.Last == nil || c.Last.ID != 1000 || c.Last.Severity != "fatal" || c.Last.Recorded == nil {
		t.Errorf("status --json cper %+v (last %+v):\n%s", c, c.Last, out)
	}
	body := scrapeMetrics(t, addr)
	p.stop()
	wantSeries(t, body, "gpu_telemetry_cper_records_total", "0", `severity="fatal"`, "1")
	if !strings.Contains(body, "\ngpu_telemetry_cper_records_repeated_total 0\n") {
		t.Errorf("no cper_records_repeated counter in the scrape:\n%s", grepLines(body, "cper"))
	}

	// The cursor's handle lost, its ids kept: the driver returns the record
	// again, which is counted and not written twice.
	path := filepath.Join(p.dir, "cper-cursor")
	b := readFile(t, path)
	f := strings.Fields(b)
	if len(f) != 3 || f[1] == "0" {
		t.Fatalf("cper-cursor %q: want source handle ids", b)
	}
	if err := os.WriteFile(path, []byte(f[0]+" 0 "+f[2]+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	o.dir = p.dir
	p = start(t, o)
	p.waitFor("the control socket", 15*time.Second, func() bool { return strings.Contains(p.stderr.String(), "first sample of every GPU written") })
	p.waitFor("the repeat counted", 20*time.Second, func() bool {
		_, d, _ := statusAs[statusDoc](t, p.socketPath())
		n, _ := d.counter("cper_records_repeated")
		return n == 1
	})
	p.stop()
	if l := cperLines(p.dir); len(l) != 1 {
		t.Errorf("the repeated record written again:\n%s", strings.Join(l, "\n"))
	}
}
