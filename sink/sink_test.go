package sink

import (
	"compress/gzip"
	_ "github.com/gpu-telemetry/gpu-telemetry/anomaly" // registers the detectors' flag kinds
	"github.com/gpu-telemetry/gpu-telemetry/internal/counters"
	"io"

	"bytes"
	"encoding/csv"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/internal/testutil"
	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

var cet = time.FixedZone("CET", 3600)

func fullSample() reading.Sample {
	s := reading.Sample{
		GPU:        0,
		Time:       time.Date(2026, 11, 29, 15, 29, 19, 123_456_789, cet),
		KernelTime: 83510*time.Second + 234567*time.Microsecond,
		Values: reading.Values{
			reading.TempC:           reading.Some[uint64](87),
			reading.TLimitC:         reading.Some[uint64](3),
			reading.PowerMW:         reading.Some[uint64](101_005),
			reading.PowerLimitMW:    reading.Some[uint64](450_000),
			reading.EnforcedLimitMW: reading.Some[uint64](450_400),
			reading.EnergyMJ:        reading.Some[uint64](987654321),
			reading.PState:          reading.Some[uint64](2),
			reading.GraphicsMHz:     reading.Some[uint64](2407),
			reading.MemMHz:          reading.Some[uint64](14001),
			reading.SMMHz:           reading.Some[uint64](2407),
			reading.GPUUtil:         reading.Some[uint64](100),
			reading.MemUtil:         reading.Some[uint64](0),
			reading.EncUtil:         reading.Some[uint64](0),
			reading.DecUtil:         reading.Some[uint64](7),
			reading.VRAMUsedBytes:   reading.Some[uint64](45 << 30),
			reading.PCIeGen:         reading.Some[uint64](5),
			reading.PCIeWidth:       reading.Some[uint64](16),
			reading.PCIeReplay:      reading.Some[uint64](0),
			reading.MemTempC:        reading.Some[uint64](80),
			reading.Throttle:        reading.Some[uint64](0x4 | 0x80 | 0x1000),
		},
		NumFans: 2,
		Sensor0: reading.Some(reading.Sensor{Temp: 87, Target: 1, Controller: 5}),
	}
	s.Fans[0] = reading.Fan{Speed: reading.Some[uint32](30), Target: reading.Some[uint32](30)}
	s.Fans[1] = reading.Fan{Speed: reading.Some[uint32](0), Target: reading.Some[uint32](31)}
	inv, _ := reading.FlagKindNamed("temp_fan_inv") // the detectors' kinds (package anomaly)
	spur, _ := reading.FlagKindNamed("spur_throt")
	s.Flags.Add(reading.Flag{Kind: inv, A: 87, B: 30})
	s.Flags.Add(reading.Flag{Kind: spur, A: 22})
	return s
}

func TestGoldenRows(t *testing.T) {
	var b []byte
	b = append(b, Header(2)...)
	full := fullSample()
	b = AppendRow(b, &full, 2)

	// Only some readings present: every absent one is an empty cell, and
	// zeros that were really read stay zeros.
	sparse := reading.Sample{Time: full.Time.Add(100 * time.Millisecond), KernelTime: full.KernelTime + 100*time.Millisecond,
		Values: reading.Values{reading.TempC: reading.Some[uint64](0), reading.Throttle: reading.Some[uint64](0)}, NumFans: 2}
	sparse.Fans[0].Speed = reading.Some[uint32](0)
	b = AppendRow(b, &sparse, 2)

	failed := reading.Sample{Time: full.Time.Add(200 * time.Millisecond), KernelTime: full.KernelTime + 200*time.Millisecond,
		Status: reading.StatusFailed, Err: "nvmlDeviceGetTemperature: Unknown Error", NumFans: 2}
	failed.Flags.Add(reading.Flag{Kind: reading.FlagNVMLFailed, S: failed.Err})
	b = AppendRow(b, &failed, 2)

	hung := reading.Sample{Time: full.Time.Add(300 * time.Millisecond), KernelTime: full.KernelTime + 300*time.Millisecond,
		Status: reading.StatusHung, Err: "nvmlDeviceGetPowerUsage", HungFor: 2300 * time.Millisecond}
	hung.Flags.Add(reading.Flag{Kind: reading.FlagNVMLHung, S: hung.Err, A: 2300})
	b = AppendRow(b, &hung, 2)

	lost := reading.Sample{Time: full.Time.In(time.UTC).Add(400 * time.Millisecond), Status: reading.StatusLost}
	lost.Flags.Add(reading.Flag{Kind: reading.FlagGPULost})
	lost.Flags.Add(reading.Flag{Kind: reading.FlagXid, A: 79})
	b = AppendRow(b, &lost, 2)
	// Every line must parse as CSV with the header's width.
	r := csv.NewReader(bytes.NewReader(b))
	if recs, err := r.ReadAll(); err != nil || len(recs) != 6 {
		t.Fatalf("rows do not parse as CSV: %v (%d records)", err, len(recs))
	}
	testutil.Golden(t, "rows-2fans.golden", b)

	// A fanless datacenter GPU has no fan columns at all.
	fanless := fullSample()
	fanless.NumFans = 0
	fanless.Flags.Reset()
	testutil.Golden(t, "rows-fanless.golden", AppendRow(Header(0), &fanless, 0))
}

func TestRowColumnCountMatchesHeader(t *testing.T) {
	for fans := range 4 {
		s := fullSample()
		s.NumFans = fans
		row := AppendRow(nil, &s, fans)
		if got, want := bytes.Count(row, []byte(",")), len(Columns(fans))-1; got != want {
			t.Errorf("fans=%d: %d commas, want %d", fans, got, want)
		}
	}
}

func TestAppendRowDoesNotAllocate(t *testing.T) {
	s := fullSample()
	buf := make([]byte, 0, 1024)
	if n := testing.AllocsPerRun(100, func() { buf = AppendRow(buf[:0], &s, 2) }); n != 0 {
		t.Errorf("AppendRow allocates %.0f times", n)
	}
}

func newTestCSV(t *testing.T, dir string, cfg CSVConfig) *CSV {
	t.Helper()
	cfg.Dir = dir
	if cfg.Counters == nil {
		cfg.Counters = counters.New()
	}
	if cfg.FreeBytes == nil {
		cfg.FreeBytes = func(string) (uint64, error) { return 1 << 40, nil }
	}
	c, err := NewCSV(cfg, []GPUColumns{{Index: 0, Fans: 2}, {Index: 1, Fans: 0}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// readLines returns the lines of the CSV at path after its board line,
// which it checks: every file the writer makes starts with one, naming the
// GPU of its name.
func readLines(t *testing.T, path string) []string {
	t.Helper()
	b := testutil.ReadFile(t, path)
	if len(b) > 0 && b[len(b)-1] != '\n' {
		t.Fatalf("%s does not end in a newline: %q", path, b[max(0, len(b)-40):])
	}
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	f, named := ParseFileName(filepath.Base(strings.TrimSuffix(path, ".gz")), time.UTC)
	if bd, ok := ParseBoardLine(lines[0]); !ok || (named && (bd.Index != f.GPU || BoardID(bd.UUID) != f.Board)) {
		t.Fatalf("%s does not start with its board's line: %q", path, lines[0])
	}
	return lines[1:]
}

func TestRotationAtLocalMidnight(t *testing.T) {
	dir := t.TempDir()
	c := newTestCSV(t, dir, CSVConfig{})
	s := fullSample()
	times := []time.Time{
		time.Date(2026, 11, 29, 23, 59, 59, 900e6, cet),
		time.Date(2026, 11, 30, 0, 0, 0, 0, cet),
		time.Date(2026, 11, 30, 0, 0, 0, 100e6, cet),
	}
	for _, tm := range times {
		s.Time = tm
		if err := c.Write(&s); err != nil {
			t.Fatal(err)
		}
	}
	d1 := readLines(t, filepath.Join(dir, "gpu0-unknown-deep-2026-11-29.csv"))
	d2 := readLines(t, filepath.Join(dir, "gpu0-unknown-deep-2026-11-30.csv"))
	if len(d1) != 2 || len(d2) != 3 {
		t.Fatalf("day 1 has %d lines, day 2 %d; want 2 and 3", len(d1), len(d2))
	}
	if d1[0] != strings.TrimSuffix(string(Header(2)), "\n") || d2[0] != d1[0] {
		t.Errorf("each day starts with the header")
	}
	if !strings.HasPrefix(d2[1], "2026-11-30T00:00:00.000+01:00,") {
		t.Errorf("first row of day 2: %s", d2[1])
	}
}

func TestRestartContinuesAndRepairsPartialLine(t *testing.T) {
	dir := t.TempDir()
	s := fullSample()
	board := Board{Index: 0, UUID: "GPU-5a3c1e2f-0b4d", Serial: "1791025012340", Bus: "00000000:01:00.0"}
	path := filepath.Join(dir, FileName(0, board.ID(), s.Time))
	prev := string(board.Line()) + string(Header(2)) + string(AppendRow(nil, &s, 2))
	// The last run was killed in the middle of a row.
	if err := os.WriteFile(path, []byte(prev+"2026-11-29T15:29:19.2"), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := NewCSV(CSVConfig{Counters: counters.New(), Dir: dir, FreeBytes: func(string) (uint64, error) { return 1 << 40, nil }},
		[]GPUColumns{{Index: 0, Fans: 2, Board: board}})
	if err != nil {
		t.Fatal(err)
	}
	s.Time = s.Time.Add(time.Second)
	if err := c.Write(&s); err != nil {
		t.Fatal(err)
	}
	c.Close()
	lines := readLines(t, path)
	if len(lines) != 3 {
		t.Fatalf("%d lines, want header + 2 rows: %q", len(lines), lines)
	}
	for _, l := range lines[1:] {
		if strings.Count(l, ",") != len(Columns(2))-1 {
			t.Errorf("torn line survived: %q", l)
		}
	}
}

// enospcFile writes part of the buffer then fails like a full disk, after
// okWrites successful writes.
type enospcFile struct {
	*os.File
	okWrites int
}

func (f *enospcFile) Write(b []byte) (int, error) {
	if f.okWrites > 0 {
		f.okWrites--
		return f.File.Write(b)
	}
	n, _ := f.File.Write(b[:len(b)/2])
	return n, syscall.ENOSPC
}

func TestENOSPCCutsBackToWholeLines(t *testing.T) {
	dir := t.TempDir()
	var ef *enospcFile
	cfg := CSVConfig{wrap: func(f *os.File) file { ef = &enospcFile{File: f, okWrites: 2}; return ef }}
	c := newTestCSV(t, dir, cfg)
	s := fullSample()
	for i := range 4 {
		s.Time = s.Time.Add(100 * time.Millisecond)
		err := c.Write(&s)
		// Rows 0 and 1 land, row 2 hits ENOSPC, row 3 is dropped by the
		// disk guard that ENOSPC switched on.
		if (i == 2) != (err != nil) {
			t.Fatalf("write %d: err %v", i, err)
		}
	}
	st := c.Stats()
	if !st.Paused || st.Dropped != 2 || st.Written != 2 {
		t.Errorf("stats after ENOSPC: %+v", st)
	}
	// Space comes back.
	ef.okWrites = 100
	c.checkDisk()
	s.Time = s.Time.Add(100 * time.Millisecond)
	if err := c.Write(&s); err != nil {
		t.Fatal(err)
	}
	c.Close()
	lines := readLines(t, filepath.Join(dir, FileName(0, UnknownBoard, s.Time)))
	if len(lines) != 4 {
		t.Fatalf("%d lines, want header + 3 rows", len(lines))
	}
	for _, l := range lines[1:] {
		if strings.Count(l, ",") != len(Columns(2))-1 {
			t.Errorf("torn line in file: %q", l)
		}
	}
}

func TestDiskGuard(t *testing.T) {
	dir := t.TempDir()
	free := uint64(100 << 20)
	c := newTestCSV(t, dir, CSVConfig{MinFreeMB: 500, FreeBytes: func(string) (uint64, error) { return free, nil }})
	s := fullSample()
	if err := c.Write(&s); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, FileName(0, UnknownBoard, s.Time))); !os.IsNotExist(err) {
		t.Errorf("file written below the free-space floor")
	}
	free = 600 << 20
	c.checkDisk()
	if err := c.Write(&s); err != nil {
		t.Fatal(err)
	}
	if st := c.Stats(); st.Dropped != 1 || st.Written != 1 || st.Paused {
		t.Errorf("stats %+v", st)
	}
	// Rows dropped while paused are still in memory for snapshots.
	if _, rows := c.Rows(0); len(rows) != 2 {
		t.Errorf("ring has %d rows, want 2", len(rows))
	}
}

func TestReopenAfterMove(t *testing.T) {
	dir := t.TempDir()
	c := newTestCSV(t, dir, CSVConfig{})
	s := fullSample()
	c.Write(&s)
	path := filepath.Join(dir, FileName(0, UnknownBoard, s.Time))
	if err := os.Rename(path, path+".moved"); err != nil {
		t.Fatal(err)
	}
	c.Reopen()
	s.Time = s.Time.Add(time.Second)
	c.Write(&s)
	if got := readLines(t, path); len(got) != 2 {
		t.Errorf("reopened file has %d lines, want header + 1 row", len(got))
	}
	if got := readLines(t, path+".moved"); len(got) != 2 {
		t.Errorf("moved file has %d lines, want 2", len(got))
	}
}

func TestRowsRingKeepsLast50(t *testing.T) {
	c := newTestCSV(t, t.TempDir(), CSVConfig{})
	s := fullSample()
	base := s.Time
	for i := range 60 {
		s.Time = base.Add(time.Duration(i) * 100 * time.Millisecond)
		c.Write(&s)
	}
	hdr, rows := c.Rows(0)
	if hdr != strings.TrimSuffix(string(Header(2)), "\n") || len(rows) != 50 {
		t.Fatalf("header %q, %d rows", hdr, len(rows))
	}
	if !strings.HasPrefix(rows[0], base.Add(10*100*time.Millisecond).Format(TimestampLayout)) {
		t.Errorf("oldest kept row %q", rows[0])
	}
	if !strings.HasPrefix(rows[49], base.Add(59*100*time.Millisecond).Format(TimestampLayout)) {
		t.Errorf("newest row %q", rows[49])
	}
}

func TestRetentionAndCompression(t *testing.T) {
	dir := t.TempDir()
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.Local)
	var names []string
	for ago := 0; ago <= 20; ago++ {
		day := now.AddDate(0, 0, -ago)
		name := FileName(0, UnknownBoard, day)
		names = append(names, name)
		if err := os.WriteFile(filepath.Join(dir, name), []byte("timestamp\nrow "+name+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(dir, "unrelated.csv"), []byte("x"), 0o644)
	c := newTestCSV(t, dir, CSVConfig{Compress: true, Now: func() time.Time { return now }})
	if !c.gz.wait(10 * time.Second) {
		t.Fatal("compression did not finish")
	}
	for ago, name := range names {
		_, errPlain := os.Stat(filepath.Join(dir, name))
		gz := filepath.Join(dir, name+".gz")
		_, errGz := os.Stat(gz)
		switch {
		case ago > 14:
			if errPlain == nil || errGz == nil {
				t.Errorf("%s (%d days old) not deleted", name, ago)
			}
		case ago == 0:
			if errPlain != nil || errGz == nil {
				t.Errorf("today's file %s must stay uncompressed", name)
			}
		default:
			if errPlain == nil || errGz != nil {
				t.Errorf("%s not compressed", name)
				continue
			}
			if b := testutil.ReadFile(t, gz); string(b) != "timestamp\nrow "+name+"\n" {
				t.Errorf("%s decompresses to %q", gz, b)
			}
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "unrelated.csv")); err != nil {
		t.Errorf("unrelated file touched")
	}
	leftovers, _ := filepath.Glob(filepath.Join(dir, ".*tmp*"))
	if len(leftovers) > 0 {
		t.Errorf("temp files left: %v", leftovers)
	}
}

func TestSystemInfo(t *testing.T) {
	si := SystemInfo{
		Version:   "1.0.0",
		Generated: time.Date(2026, 11, 29, 14, 0, 0, 0, time.UTC),
		Identity:  reading.Identity{Host: "gpu-host-7", MachineID: "4f0c8d6a2b7e4e1c9a3d5b7f1e2c4a6b", BootID: "9b1d3f5e-7a2c-4e6b-8d0f-1a3c5e7b9d2f"},
		Host:      Host{Hostname: "gpu-host-7", OS: "Debian GNU/Linux 12 (bookworm)", Kernel: "6.1.0-28-amd64", CPU: "AMD EPYC 9554", Board: "Supermicro H13SSL-N", Modules: []string{"nvidia 12345 0 - Live 0x0"}},
		System:    reading.System{DriverVersion: "580.95.05", NVMLVersion: "13.580.95.05", CUDAVersion: "13.0"},
		GPUs: []reading.GPU{
			{Index: 0, Name: "NVIDIA RTX PRO 6000 Blackwell Workstation Edition", UUID: "GPU-aaaa", BusID: "00000000:01:00.0", Serial: "1650", VBIOS: "98.02.2E.00.01", NumFans: 2,
				Thresholds: reading.Thresholds{Shutdown: reading.Some[uint32](98), Slowdown: reading.Some[uint32](95), GPUMax: reading.Some[uint32](90)},
				GSPVersion: "580.95.05", GSPMode: "enabled (default)", PowerLimitDefaultMW: reading.Some[uint32](600_000)},
			{Index: 1},
		},
		Notes:       map[int]string{1: "static facts not read: nvmlDeviceGetName hung"},
		Health:      map[int]string{0: "supported: ecc, row_remap, pcie, clock_events, nvlink (18 links), recovery_action; not supported: retired_pages, c2c"},
		KernelClock: "printk clock = CLOCK_MONOTONIC - 37.000412 s, drift +200.0 ppm; last confirmed 10.0 s ago (1234 records, 2 of them our markers, 0 steps)",
	}
	testutil.Golden(t, "system-info.golden", RenderSystemInfo(si))

	dir := t.TempDir()
	if w, err := WriteSystemInfo(dir, si); err != nil || !w {
		t.Fatalf("first write: %v %v", w, err)
	}
	si.Generated = si.Generated.Add(time.Hour)
	if w, _ := WriteSystemInfo(dir, si); w {
		t.Errorf("rewritten although only the time changed")
	}
	si.System.DriverVersion = "580.105.08"
	if w, _ := WriteSystemInfo(dir, si); !w {
		t.Errorf("not rewritten after a driver change")
	}
	b, _ := os.ReadFile(filepath.Join(dir, "system-info.txt"))
	if !bytes.Contains(b, []byte("Driver: 580.105.08")) {
		t.Errorf("new driver version missing")
	}
}

// TestSystemInfoNamesTheHostAsEveryOutput: with --host other than the
// kernel's hostname, system-info.txt names the host as --host does (as
// events.log, the metrics, snapshots and status do); the kernel's name is
// only a note.
func TestSystemInfoNamesTheHostAsEveryOutput(t *testing.T) {
	si := SystemInfo{Identity: reading.Identity{Host: "rack3-node07", MachineID: "4f0c"}, Host: Host{Hostname: "localhost.localdomain"}}
	got := string(RenderSystemInfo(si))
	testutil.Contains(t, "system-info.txt", got, "\n Host: rack3-node07 (machine id 4f0c, boot n/a)\n",
		"\n Kernel hostname: localhost.localdomain (not the host's name here: --host)\n")
	if strings.Contains(got, "Hostname: localhost") {
		t.Errorf("system-info.txt names the kernel's hostname as the host:\n%s", got)
	}
}

func TestCollectHostFromFiles(t *testing.T) {
	root := t.TempDir()
	files := map[string]string{
		"proc/sys/kernel/hostname":                "node7\n",
		"etc/os-release":                          "NAME=x\nPRETTY_NAME=\"Ubuntu 24.04 LTS\"\n",
		"proc/sys/kernel/osrelease":               "6.8.0-45-generic\n",
		"proc/cpuinfo":                            "processor\t: 0\nmodel name\t: AMD Ryzen 9 9950X\n",
		"sys/devices/virtual/dmi/id/board_vendor": "ASUSTeK\n",
		"sys/devices/virtual/dmi/id/board_name":   "ProArt X870E\n",
		"proc/modules":                            "nvidia_uvm 1 0 - Live 0\next4 1 0 - Live 0\nnvidia 2 0 - Live 0\n",
	}
	for p, c := range files {
		os.MkdirAll(filepath.Join(root, filepath.Dir(p)), 0o755)
		os.WriteFile(filepath.Join(root, p), []byte(c), 0o644)
	}
	h := CollectHost(root)
	want := Host{Hostname: "node7", OS: "Ubuntu 24.04 LTS", Kernel: "6.8.0-45-generic", CPU: "AMD Ryzen 9 9950X",
		Board: "ASUSTeK ProArt X870E", Modules: []string{"nvidia_uvm 1 0 - Live 0", "nvidia 2 0 - Live 0"}}
	if h.Hostname != want.Hostname || h.OS != want.OS || h.Kernel != want.Kernel || h.CPU != want.CPU || h.Board != want.Board || len(h.Modules) != 2 {
		t.Errorf("got %+v", h)
	}
}

func TestLineLogReopen(t *testing.T) {
	dir := t.TempDir()
	l := NewLineLog(dir, "events.log", 50, 3, 0, nil, counters.New())
	l.Line("one")
	os.Rename(filepath.Join(dir, "events.log"), filepath.Join(dir, "events.log.old"))
	l.Reopen()
	l.Line("two")
	l.Close()
	b, _ := os.ReadFile(filepath.Join(dir, "events.log"))
	if string(b) != "two\n" {
		t.Errorf("after reopen: %q", b)
	}
}

func TestFlagsWithCommaAreQuoted(t *testing.T) {
	s := reading.Sample{Time: time.Date(2026, 11, 29, 1, 2, 3, 0, time.UTC), Status: reading.StatusHung}
	s.Flags.Add(reading.Flag{Kind: reading.FlagNVMLHung, S: "nvmlDeviceGetPowerUsage", A: 1200})
	s.Flags.Add(reading.Flag{Kind: reading.FlagXid, A: 79})
	row := AppendRow(nil, &s, 1)
	r := csv.NewReader(bytes.NewReader(row))
	cells, err := r.Read()
	if err != nil {
		t.Fatalf("row %q does not parse: %v", row, err)
	}
	if len(cells) != len(Columns(1)) || cells[len(cells)-1] != "NVML_HUNG(nvmlDeviceGetPowerUsage,1200ms)|XID(79)" {
		t.Errorf("cells %q", cells)
	}
	s.Flags.Reset()
	s.Flags.Add(reading.Flag{Kind: reading.FlagNVMLFailed, S: `say "hi", twice`})
	cells, err = csv.NewReader(bytes.NewReader(AppendRow(nil, &s, 1))).Read()
	if err != nil || cells[len(cells)-1] != `NVML_FAILED:say "hi", twice` {
		t.Errorf("quote escaping: %q %v", cells, err)
	}
}

func TestPeriodicSyncRunsOffTheScheduler(t *testing.T) {
	c := newTestCSV(t, t.TempDir(), CSVConfig{FsyncEvery: 10 * time.Millisecond})
	s := writeUntilSynced(t, c, "the sync thread never completed a batch", nil)
	if st := c.Stats(); st.SyncErrors != 0 {
		t.Errorf("sync errors: %+v", st)
	}
	// Rotation closes a file the sync thread may still hold a duplicate of:
	// nothing breaks.
	s.Time = s.Time.Add(24 * time.Hour)
	if err := c.Write(&s); err != nil {
		t.Fatal(err)
	}
}

func TestAppendTimestampMatchesLayout(t *testing.T) {
	zones := []*time.Location{time.UTC, cet, time.FixedZone("NST", -(3*3600 + 30*60)), time.FixedZone("IST", 5*3600+30*60)}
	times := []time.Time{
		time.Date(2026, 11, 29, 15, 29, 19, 123_456_789, time.UTC),
		time.Date(1999, 1, 2, 3, 4, 5, 6_000_000, time.UTC),
		time.Date(2026, 3, 29, 0, 59, 59, 999_999_999, time.UTC),
		time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC),
	}
	for _, z := range zones {
		for _, tm := range times {
			tm = tm.In(z)
			if got, want := string(AppendTimestamp(nil, tm)), tm.Format(TimestampLayout); got != want {
				t.Errorf("AppendTimestamp(%v) = %q, want %q", tm, got, want)
			}
		}
	}
}

func TestLateRowNeverReopensAFinishedDay(t *testing.T) {
	dir := t.TempDir()
	c := newTestCSV(t, dir, CSVConfig{})
	s := fullSample()
	s.Time = time.Date(2026, 11, 30, 0, 0, 1, 0, cet)
	c.Write(&s)
	c.Reopen()                                           // the file is closed (SIGHUP) when the late row comes
	s.Time = time.Date(2026, 11, 29, 23, 59, 59, 0, cet) // a sample stuck over midnight
	c.Write(&s)
	c.Close()
	if _, err := os.Stat(filepath.Join(dir, "gpu0-unknown-deep-2026-11-29.csv")); !os.IsNotExist(err) {
		t.Errorf("the finished day was reopened: %v", err)
	}
	if n := len(readLines(t, filepath.Join(dir, "gpu0-unknown-deep-2026-11-30.csv"))); n != 3 {
		t.Errorf("current day has %d lines, want header + 2 rows", n)
	}
}

func TestCompressionNeverReplacesAnExistingGz(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "gpu0-unknown-deep-2026-11-20.csv")
	os.WriteFile(p, []byte("timestamp\nlate row\n"), 0o644)
	os.WriteFile(p+".gz", []byte("the real day"), 0o644)
	if err := gzipFile(p, make(chan struct{}), FileOps{}); err == nil {
		t.Fatal("compressing over an existing .gz succeeded")
	}
	if b, _ := os.ReadFile(p + ".gz"); string(b) != "the real day" {
		t.Errorf("existing .gz replaced")
	}
	if _, err := os.Stat(p); err != nil {
		t.Errorf("the uncompressed file must stay when its .gz exists: %v", err)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".*tmp*")); len(left) != 0 {
		t.Errorf("temp files left: %v", left)
	}
}

func TestLineLogRefusesAfterClose(t *testing.T) {
	dir := t.TempDir()
	l := NewLineLog(dir, "events.log", 50, 3, 0, nil, counters.New())
	l.Line("one")
	l.Close()
	os.Rename(filepath.Join(dir, "events.log"), filepath.Join(dir, "moved"))
	if err := l.Line("late"); err == nil {
		t.Errorf("line accepted after Close")
	}
	if _, err := os.Stat(filepath.Join(dir, "events.log")); !os.IsNotExist(err) {
		t.Errorf("events.log reopened after Close")
	}
}

func TestRotationAcrossDSTChange(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Skipf("no time zone database: %v", err)
	}
	dir := t.TempDir()
	// Retention runs at rotation: "now" must be those days, not today.
	now := func() time.Time { return time.Date(2026, 10, 26, 1, 0, 0, 0, berlin) }
	c := newTestCSV(t, dir, CSVConfig{Now: now})
	s := fullSample()
	// 2026-10-25 has 25 hours in Berlin (clocks go back at 03:00).
	for _, tm := range []time.Time{
		time.Date(2026, 10, 25, 0, 30, 0, 0, time.UTC).In(berlin), // 02:30 CEST
		time.Date(2026, 10, 25, 1, 30, 0, 0, time.UTC).In(berlin), // 02:30 again, CET
		time.Date(2026, 10, 25, 23, 59, 59, 900e6, berlin),
		time.Date(2026, 10, 26, 0, 0, 0, 100e6, berlin),
	} {
		s.Time = tm
		if err := c.Write(&s); err != nil {
			t.Fatal(err)
		}
	}
	c.Close()
	day1 := readLines(t, filepath.Join(dir, "gpu0-unknown-deep-2026-10-25.csv"))
	day2 := readLines(t, filepath.Join(dir, "gpu0-unknown-deep-2026-10-26.csv"))
	if len(day1) != 4 || len(day2) != 2 {
		t.Fatalf("day 1 has %d lines, day 2 %d; want 4 and 2", len(day1), len(day2))
	}
	// The offsets tell the repeated hour apart.
	if !strings.HasPrefix(day1[1], "2026-10-25T02:30:00.000+02:00") || !strings.HasPrefix(day1[2], "2026-10-25T02:30:00.000+01:00") {
		t.Errorf("timestamps around the change: %q, %q", day1[1][:29], day1[2][:29])
	}
}

// TestPeriodicSyncPacedByTick: with Tick set, the sync round runs when a
// value arrives on it (the logger's poll loop), not on a timer of its own:
// FsyncEvery is an hour here, so only the ticks can make the rounds.
func TestPeriodicSyncPacedByTick(t *testing.T) {
	tick := make(chan time.Time)
	c := newTestCSV(t, t.TempDir(), CSVConfig{FsyncEvery: time.Hour, Tick: tick})
	writeUntilSynced(t, c, "no sync round completed for the ticks sent", func(s *reading.Sample, deadline time.Time) {
		select {
		case tick <- s.Time:
		case <-time.After(time.Until(deadline)):
		}
	})
}

// writeUntilSynced writes rows 100 ms apart until the sync thread has
// completed two more batches, calling after (when set) after each row, and
// fails with why when that takes over 10 s. It returns the last row written.
func writeUntilSynced(t *testing.T, c *CSV, why string, after func(s *reading.Sample, deadline time.Time)) reading.Sample {
	t.Helper()
	before := c.Stats().SyncBatches
	s := fullSample()
	deadline := time.Now().Add(10 * time.Second)
	for c.Stats().SyncBatches < before+2 {
		s.Time = s.Time.Add(100 * time.Millisecond)
		if err := c.Write(&s); err != nil {
			t.Fatal(err)
		}
		if after != nil {
			after(&s, deadline)
		}
		if time.Now().After(deadline) {
			t.Fatal(why)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return s
}

// TestCompressionAdoptsAnExistingGz: a day whose .gz was linked but whose
// .csv was kept (the directory fsync after the link failed, or Close
// abandoned the compression there) is finished at the next start: when the
// .gz decompresses to exactly the .csv's bytes, the .gz and the directory
// are fsynced and the .csv removed; any other .gz (other rows, cut short,
// a link planted there, which is not followed) is kept with the .csv, said
// once. Before, the compression failed at every start (an existing .gz is
// never replaced) and the .csv stayed until retention deleted both.
func TestCompressionAdoptsAnExistingGz(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.Local)
	name := FileName(0, UnknownBoard, now.AddDate(0, 0, -1))
	day := []byte("timestamp,gpu\n2026-11-28T10:00:00.000+01:00,0\n2026-11-28T10:00:01.000+01:00,0\n")
	gzOf := func(t *testing.T, b []byte) []byte {
		t.Helper()
		p := filepath.Join(t.TempDir(), name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := CompressFile(p); err != nil {
			t.Fatal(err)
		}
		gz, err := os.ReadFile(p + ".gz")
		if err != nil {
			t.Fatal(err)
		}
		return gz
	}
	own := gzOf(t, day)
	// big spans several of the comparison's buffers (256 KiB): a difference
	// in its last byte is in a later buffer than the first.
	big := bytes.Repeat(day[len("timestamp,gpu\n"):], 700<<10/(len(day)-len("timestamp,gpu\n")))
	big = append([]byte("timestamp,gpu\n"), big...)
	bigOther := bytes.Clone(big)
	bigOther[len(bigOther)-2] = '1'
	for _, tc := range []struct {
		name  string
		csv   []byte                        // the day's .csv; nil: day
		plant func(t *testing.T, gz string) // puts something at the day's .gz
		adopt bool                          // the .gz is the day's: the .csv goes
	}{
		{"a big day's own gz", big, func(t *testing.T, gz string) { os.WriteFile(gz, gzOf(t, big), 0o644) }, true},
		{"a big day's gz differing in its last row", big, func(t *testing.T, gz string) { os.WriteFile(gz, gzOf(t, bigOther), 0o644) }, false},
		{"the day's own gz", nil, func(t *testing.T, gz string) { os.WriteFile(gz, own, 0o644) }, true},
		{"a gz of other rows", nil, func(t *testing.T, gz string) {
			os.WriteFile(gz, gzOf(t, bytes.Replace(day, []byte("10:00:01"), []byte("10:00:02"), 1)), 0o644)
		}, false},
		{"a gz of more rows", nil, func(t *testing.T, gz string) {
			os.WriteFile(gz, gzOf(t, append(append([]byte{}, day...), "2026-11-28T10:00:02.000+01:00,0\n"...)), 0o644)
		}, false},
		{"a gz of fewer rows", nil, func(t *testing.T, gz string) { os.WriteFile(gz, gzOf(t, day[:len(day)-10]), 0o644) }, false},
		{"a gz cut short", nil, func(t *testing.T, gz string) { os.WriteFile(gz, own[:len(own)-4], 0o644) }, false},
		{"not gzip", nil, func(t *testing.T, gz string) { os.WriteFile(gz, day, 0o644) }, false},
		{"a link to the day's own gz", nil, func(t *testing.T, gz string) {
			target := filepath.Join(t.TempDir(), "elsewhere.gz")
			os.WriteFile(target, own, 0o644)
			if err := os.Symlink(target, gz); err != nil {
				t.Fatal(err)
			}
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			csvPath := filepath.Join(dir, name)
			rows := tc.csv
			if rows == nil {
				rows = day
			}
			if err := os.WriteFile(csvPath, rows, 0o644); err != nil {
				t.Fatal(err)
			}
			tc.plant(t, csvPath+".gz")
			before, _ := os.ReadFile(csvPath + ".gz")
			var logs testutil.LogBuf
			var dirSyncs atomic.Int32
			c := newTestCSV(t, dir, CSVConfig{Compress: true, Now: func() time.Time { return now }, Logger: logs.Logger(),
				gzOps: FileOps{SyncDir: func(d string) error { dirSyncs.Add(1); return SyncDir(d) }}})
			if !c.gz.wait(10 * time.Second) {
				t.Fatal("the compressor did not finish")
			}
			_, err := os.Stat(csvPath)
			if gone := errors.Is(err, fs.ErrNotExist); gone != tc.adopt {
				t.Errorf(".csv removed: %v, want %v (%v)\n%s", gone, tc.adopt, err, logs.String())
			}
			if after, _ := os.ReadFile(csvPath + ".gz"); !bytes.Equal(after, before) {
				t.Errorf("the existing .gz was changed")
			}
			if tc.adopt {
				if dirSyncs.Load() == 0 {
					t.Error("the directory was not fsynced before the .csv was removed")
				}
				return
			}
			c.housekeeping(now) // midnight's pass: not tried, nor said, again
			if !c.gz.wait(10 * time.Second) {
				t.Fatal("the compressor did not finish")
			}
			if n := strings.Count(logs.String(), "not it compressed"); n != 1 {
				t.Errorf("the kept day is said %d times, want once:\n%s", n, logs.String())
			}
			if b, err := os.ReadFile(csvPath); err != nil || !bytes.Equal(b, rows) {
				t.Errorf("the .csv is not kept as it was: %d bytes, want %d (%v)", len(b), len(rows), err)
			}
		})
	}
}

// TestCompressionKeepsAGzItCannotAdopt: an adoption that fails for any
// reason but a halt (here the directory fsync) keeps both files, says so
// once, and is not tried again until the next start.
func TestCompressionKeepsAGzItCannotAdopt(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.Local)
	dir := t.TempDir()
	csvPath := filepath.Join(dir, FileName(0, UnknownBoard, now.AddDate(0, 0, -1)))
	if err := os.WriteFile(csvPath, []byte("timestamp,gpu\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := CompressFile(csvPath); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(csvPath, []byte("timestamp,gpu\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var logs testutil.LogBuf
	var dirSyncs atomic.Int32
	c := newTestCSV(t, dir, CSVConfig{Compress: true, Now: func() time.Time { return now }, Logger: logs.Logger(),
		gzOps: FileOps{SyncDir: func(string) error { dirSyncs.Add(1); return errors.New("EIO") }}})
	for range 2 { // the start's pass, then midnight's
		if !c.gz.wait(10 * time.Second) {
			t.Fatal("the compressor did not finish")
		}
		c.housekeeping(now)
	}
	if n := dirSyncs.Load(); n != 1 {
		t.Errorf("adoption tried %d times, want once", n)
	}
	if n := strings.Count(logs.String(), "not it compressed"); n != 1 {
		t.Errorf("the kept day is said %d times, want once:\n%s", n, logs.String())
	}
	if _, err := os.Stat(csvPath); err != nil {
		t.Errorf("the .csv was not kept: %v", err)
	}
}

// TestAdoptionHaltedIsRetried: a halt in the middle of an adoption is no
// verdict on the .gz: the day is not kept, so the next start tries again.
func TestAdoptionHaltedIsRetried(t *testing.T) {
	p := filepath.Join(t.TempDir(), FileName(0, UnknownBoard, time.Date(2026, 11, 28, 0, 0, 0, 0, time.Local)))
	os.WriteFile(p, []byte("timestamp,gpu\n"), 0o644)
	if err := CompressFile(p); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(p, []byte("timestamp,gpu\n"), 0o644)
	stop := make(chan struct{})
	close(stop)
	if err := gzipFile(p, stop, FileOps{}); !errors.Is(err, errStopped) || errors.Is(err, errGzKept) {
		t.Errorf("halted adoption: %v, want errStopped alone", err)
	}
	if _, err := os.Stat(p); err != nil {
		t.Errorf("the .csv was not kept: %v", err)
	}
}

// TestCompressionReplacesAnEmptyPlaceholder: an empty .csv.gz is the
// placeholder the no-hard-link fallback (reserveAndRename) links before
// its rename, left by a crash between the two: it holds nothing to adopt,
// and the day is compressed. Before, it was kept beside the .csv, with a
// warning at every start, until retention deleted both.
func TestCompressionReplacesAnEmptyPlaceholder(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.Local)
	dir := t.TempDir()
	day := []byte("timestamp,gpu\n2026-11-28T10:00:00.000+01:00,0\n")
	csvPath := filepath.Join(dir, FileName(0, UnknownBoard, now.AddDate(0, 0, -1)))
	if err := os.WriteFile(csvPath, day, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(csvPath+".gz", nil, 0o644); err != nil {
		t.Fatal(err)
	}
	var logs testutil.LogBuf
	c := newTestCSV(t, dir, CSVConfig{Compress: true, Now: func() time.Time { return now }, Logger: logs.Logger()})
	if !c.gz.wait(10 * time.Second) {
		t.Fatal("the compressor did not finish")
	}
	if _, err := os.Stat(csvPath); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the .csv stayed beside an empty placeholder: %v\n%s", err, logs.String())
	}
	f, err := os.Open(csvPath + ".gz")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatalf("the .gz is not gzip: %v", err)
	}
	if b, err := io.ReadAll(zr); err != nil || !bytes.Equal(b, day) {
		t.Errorf("the .gz holds %q (%v), want the day's rows", b, err)
	}
}
