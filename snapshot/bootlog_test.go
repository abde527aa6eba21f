package snapshot

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/internal/testutil"
	"github.com/gpu-telemetry/gpu-telemetry/reading"
	"github.com/gpu-telemetry/gpu-telemetry/runstate"
	"github.com/gpu-telemetry/gpu-telemetry/sink"
)

const bootHeader = "timestamp,gpu_temp,power_instant,flags"

func bootRow(t time.Time, temp int) string {
	return fmt.Sprintf("%s,%d,300.00,", t.Format("2006-01-02T15:04:05.000Z07:00"), temp)
}

// bootFixture: GPU 0 ran across midnight (yesterday compressed, 30 rows
// after 23:59:57; today 20 rows, then nothing: the host hung at 00:00:02);
// the new run has already appended rows after `now`. GPU 1's day was cut
// mid-line by the crash.
func bootFixture(t *testing.T) (dir string, now time.Time) {
	t.Helper()
	dir = t.TempDir()
	mid := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	var y bytes.Buffer
	y.WriteString(bootHeader + "\n")
	for i := 0; i < 100; i++ {
		y.WriteString(bootRow(mid.Add(-10*time.Second+time.Duration(i)*100*time.Millisecond), 60+i%5) + "\n")
	}
	var z bytes.Buffer
	zw := gzip.NewWriter(&z)
	zw.Write(y.Bytes())
	zw.Close()
	os.WriteFile(filepath.Join(dir, "gpu0-deep-2026-11-29.csv.gz"), z.Bytes(), 0o644)
	now = mid.Add(7*time.Minute + 30*time.Second)
	var d bytes.Buffer
	d.WriteString(bootHeader + "\n")
	for i := 1; i <= 20; i++ {
		d.WriteString(bootRow(mid.Add(time.Duration(i)*100*time.Millisecond), 80+i) + "\n")
	}
	for i := 0; i < 5; i++ { // the new run's rows
		d.WriteString(bootRow(now.Add(time.Duration(i)*100*time.Millisecond), 40) + "\n")
	}
	os.WriteFile(filepath.Join(dir, "gpu0-deep-2026-11-30.csv"), d.Bytes(), 0o644)
	var g1 bytes.Buffer
	g1.WriteString(bootHeader + "\n")
	for i := 1; i <= 3; i++ {
		g1.WriteString(bootRow(mid.Add(time.Duration(i)*time.Second), 55) + "\n")
	}
	g1.WriteString(bootRow(mid.Add(4*time.Second), 55)[:12])
	os.WriteFile(filepath.Join(dir, "gpu1-deep-2026-11-30.csv"), g1.Bytes(), 0o644)
	events := strings.Join([]string{
		"2026-11-29T23:59:58.000Z gpu=0 bus=00000000:41:00.0 type=TDP_CHANGE from=600W to=450W delta=-150W",
		"2026-11-29T23:59:59.000Z gpu=0 bus=00000000:41:00.0 source=kmsg type=AER severity=corrected device=0000:40:01.1 ktime=5000.1 text=\"pcieport 0000:40:01.1: AER: Corrected error received: 0000:41:00.0\"",
		"2026-11-30T00:00:01.500Z gpu=0 bus=00000000:41:00.0 source=kmsg type=Xid xid=119 name=\"GSP RPC Timeout\"",
		"2026-11-30T00:00:01.600Z gpu=0 bus=00000000:41:00.0 source=nvml type=PState data=1",
		"2026-11-30T00:07:31.000Z gpu=0 bus=00000000:41:00.0 source=poll type=GPU_LOST",
	}, "\n") + "\n"
	os.WriteFile(filepath.Join(dir, "events.log"), []byte(events), 0o644)
	return dir, now
}

func pstoreFixture(t *testing.T, prevStart time.Time) string {
	t.Helper()
	p := t.TempDir()
	os.MkdirAll(filepath.Join(p, "202611300000"), 0o755)
	recent := filepath.Join(p, "202611300000", "dmesg-efi-176494320201001")
	os.WriteFile(recent, []byte("Panic#1 Part1\n<0>[ 5002.000000] Kernel panic - not syncing: hung_task: blocked tasks\n"), 0o644)
	os.Chtimes(recent, prevStart.Add(time.Hour), prevStart.Add(time.Hour))
	old := filepath.Join(p, "dmesg-efi-170000000001001")
	os.WriteFile(old, []byte("an old panic\n"), 0o644)
	os.Chtimes(old, prevStart.Add(-48*time.Hour), prevStart.Add(-48*time.Hour))
	return p
}

const cannedJournal = `[    0.000000] kernel: Linux version 6.8.0-52-generic
[    5.001300] kernel: NVRM: loading NVIDIA UNIX x86_64 Kernel Module  570.86.15
[ 4999.100000] kernel: e1000e 0000:00:1f.6 eno1: NIC Link is Up
[ 5000.100000] kernel: pcieport 0000:40:01.1: AER: Corrected error received: 0000:41:00.0
[ 5001.500000] kernel: NVRM: Xid (PCI:0000:41:00): 119, pid=77, name=python3, Timeout after 6s of waiting for RPC response from GPU0 GSP!
[ 5001.600000] kernel: NVRM: GPU0 _kgspLogRpcTimeout: ********************************* GSP Timeout **********************************
`

func TestBootLogGolden(t *testing.T) {
	dir, now := bootFixture(t)
	prevStart := time.Date(2026, 11, 29, 22, 0, 0, 0, time.UTC)
	pstore := pstoreFixture(t, prevStart)
	runner := &fakeRunner{results: map[string]fakeResult{"journalctl": {out: cannedJournal}}}
	prev := runstate.Previous{Found: true, State: runstate.State{BootID: "0f4c1a7e-aaaa", Started: prevStart, PID: 4242}}
	m, _ := newTestManager(t, func(c *Config) { c.Dir, c.Runner = dir, runner })
	bl, err := m.WriteBootLog(context.Background(), BootConfig{Now: now, Prev: prev,
		Host: reading.Identity{Host: "gpu-node-07", MachineID: "4f0c8d6a2b7e4e1c9a3d5b7f1e2c4a6b", BootID: "9d2b77c1-bbbb"}, PstoreDirs: []string{pstore, filepath.Join(dir, "no-such-pstore")}})
	if err != nil {
		t.Fatal(err)
	}
	if got := runner.Calls(); len(got) != 1 || got[0] != "journalctl -k -b -1 --no-pager -o short-monotonic" {
		t.Errorf("commands run: %q", got)
	}
	if bl.SameBoot || len(bl.GapPerGPU) != 2 || bl.GapPerGPU[0] != 7*time.Minute+28*time.Second {
		t.Errorf("boot log result %+v", bl)
	}
	if !strings.HasPrefix(filepath.Base(bl.Path), "boot-20261130-000730.000") {
		t.Errorf("file %s", bl.Path)
	}
	// Written as the snapshots are (it holds kernel log lines): it was once
	// written through a second path with mode 0000.
	if fi, err := os.Stat(bl.Path); err != nil || fi.Mode().Perm() != fileMode {
		t.Errorf("boot log mode %v (%v), want %v", fi.Mode().Perm(), err, os.FileMode(fileMode))
	}
	b, err := os.ReadFile(bl.Path)
	if err != nil {
		t.Fatal(err)
	}
	got := strings.NewReplacer(dir, "$DIR", pstore, "$PSTORE").Replace(string(b))
	// pstore mtimes are printed in the local zone.
	got = strings.ReplaceAll(got, prevStart.Add(time.Hour).Local().Format(time.RFC3339), "$MTIME")
	testutil.Golden(t, "boot.golden", []byte(got))
	testutil.Contains(t, "boot log", got,
		"Cause: a different boot",
		"GPU 0: last row 2026-11-30T00:00:02.000Z, gap 7m28s",
		"GPU 1: last row 2026-11-30T00:00:03.000Z",
		" 2026-11-29T23:59:57.100Z,61,300.00,", // the 50th row back, in yesterday's .gz
		"NVRM: GPU0 _kgspLogRpcTimeout",
		"Kernel panic - not syncing",
		"1 older record(s) from before the previous run, not shown",
		"no-such-pstore: missing",
		"type=Xid xid=119",
	)
	for _, bad := range []string{"00:07:30.000Z,40", "type=PState", "type=GPU_LOST", "e1000e 0000:00:1f.6 eno1: NIC Link is Up\n[ 5000"} {
		if strings.Contains(strings.SplitN(got, "last 200 lines", 2)[0], bad) {
			t.Errorf("boot log has %q before its last-200-lines section", bad)
		}
	}
	if n := strings.Count(got, "\n 2026-11-"); n != 50+3 {
		t.Errorf("%d rows shown, want 50 for GPU 0 and 3 for GPU 1", n)
	}
	ev := bl.Event()
	if !ev.Time.Equal(now) {
		t.Errorf("event at %v, want this run's start %v", ev.Time, now)
	}
	kv := ev.Line()
	if want := "source=start type=UNCLEAN_STOP prev_boot=0f4c1a7e-aaaa boot=9d2b77c1-bbbb same_boot=false last_row=2026-11-30T00:00:03.000Z gap_gpu0=7m28s gap_gpu1=7m27s file=crashes/"; !strings.Contains(kv, want) {
		t.Errorf("events fields %q, want %q in it", kv, want)
	}
}

func TestBootLogSameBootAndMissingTools(t *testing.T) {
	dir, now := bootFixture(t)
	runner := &fakeRunner{} // nothing installed
	prev := runstate.Previous{Found: true, State: runstate.State{BootID: "same", Started: now.Add(-time.Hour)}}
	m, _ := newTestManager(t, func(c *Config) { c.Dir, c.Runner = dir, runner })
	bl, err := m.WriteBootLog(context.Background(), BootConfig{Now: now, Prev: prev, Host: reading.Identity{BootID: "same"},
		PstoreDirs: []string{filepath.Join(dir, "none")}})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(bl.Path)
	if !bl.SameBoot || !strings.Contains(string(b), "Cause: same boot: the logger was killed") {
		t.Errorf("same boot not said:\n%s", b)
	}
	if len(runner.Calls()) != 0 {
		t.Errorf("journalctl run for the same boot: %q", runner.Calls())
	}
	// A different boot without journalctl: said, not an error.
	prev.State.BootID = "other"
	bl, err = m.WriteBootLog(context.Background(), BootConfig{Now: now.Add(time.Second), Prev: prev, Host: reading.Identity{BootID: "same"},
		PstoreDirs: []string{filepath.Join(dir, "none")}})
	if err != nil {
		t.Fatal(err)
	}
	b, _ = os.ReadFile(bl.Path)
	if !strings.Contains(string(b), "(journalctl: not installed (Debian package systemd))") {
		t.Errorf("missing journalctl not said:\n%s", b)
	}
}

// TestBootLogRealJournalctl runs the real journalctl (where installed) on an
// empty journal directory: whatever it says lands in the file, with a
// timeout, and it is never reported as missing.
func TestBootLogRealJournalctl(t *testing.T) {
	if _, err := exec.LookPath("journalctl"); err != nil {
		t.Skip("journalctl not installed")
	}
	dir, now := bootFixture(t)
	prev := runstate.Previous{Found: true, State: runstate.State{BootID: "a", Started: now.Add(-time.Hour)}}
	m, _ := newTestManager(t, func(c *Config) { c.Dir, c.Runner, c.CommandTimeout = dir, nil, 10*time.Second })
	bl, err := m.WriteBootLog(context.Background(), BootConfig{Now: now, Prev: prev, Host: reading.Identity{BootID: "b"},
		PstoreDirs: []string{}, JournalDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(bl.Path)
	s := string(b)
	sec := s[strings.Index(s, "journalctl -k -b -1"):strings.Index(s, "=== pstore")]
	if strings.Contains(sec, "not installed") || strings.Contains(sec, "timed out") {
		t.Errorf("real journalctl:\n%s", sec)
	}
	t.Logf("real journalctl on an empty journal:\n%s", sec)
}

// TestLastIncidentsShowsEveryType: the boot log lists a line of every type
// the events.log vocabulary calls trouble (sink.EventTypes), and no routine
// line or line from this run.
func TestLastIncidentsShowsEveryType(t *testing.T) {
	start := time.Date(2026, 11, 30, 0, 7, 30, 0, time.UTC)
	before := start.Add(-time.Minute).Format(sink.TimestampLayout)
	for _, typ := range sink.EventTypes() {
		t.Run(typ, func(t *testing.T) {
			line := before + " gpu=0 type=" + typ
			events := strings.Join([]string{
				line,
				before + " gpu=0 source=nvml type=PState data=1",
				start.Format(sink.TimestampLayout) + " gpu=0 type=" + typ + " this_run=true",
			}, "\n") + "\n"
			path := filepath.Join(t.TempDir(), "events.log")
			if err := os.WriteFile(path, []byte(events), 0o644); err != nil {
				t.Fatal(err)
			}
			if got := lastIncidents(path, start); got != line+"\n" {
				t.Errorf("lastIncidents = %q, want %q", got, line+"\n")
			}
		})
	}
}
