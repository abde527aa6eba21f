package report

import (
	"bytes"
	"compress/gzip"
	"encoding/xml"
	"fmt"
	"html"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/internal/testutil"
	"github.com/gpu-telemetry/gpu-telemetry/reading"
	"github.com/gpu-telemetry/gpu-telemetry/sink"
)

// testdata/incident is what `make demo` recorded: the gsp-crash scenario on
// two simulated GPUs (Xid 62, 45, 119, 154, then GPU 0 lost and Xid 79).
func incidentReport(t *testing.T) *Report {
	t.Helper()
	rep, err := Build(Options{Dir: "testdata/incident", GPU: -1, Before: 60 * time.Second, After: 10 * time.Second, Loc: time.UTC})
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// incidentGolden renders the incident report with write, compares it with
// the golden file testdata/name and returns it.
func incidentGolden(t *testing.T, name string, write func(*Report, io.Writer) error) string {
	t.Helper()
	var b bytes.Buffer
	if err := write(incidentReport(t), &b); err != nil {
		t.Fatal(err)
	}
	testutil.Golden(t, name, b.Bytes())
	return b.String()
}

func TestGoldenTimeline(t *testing.T) {
	text := incidentGolden(t, "incident.txt.golden", (*Report).WriteText)
	// What the story must contain, whatever the layout.
	testutil.Contains(t, "report", text,
		"Incident: 2026-11-30 19:08:17.623 UTC on GPU 0: Xid 62: Internal micro-controller halt (nvml)",
		"SPUR_THROT off after 2.0s",
		"throttle None -> SwPowerCap",
		"TDP 600W -> 450W (-150W)",
		"Xid 119: GSP RPC Timeout (kmsg)",
		"Xid 79: GPU has fallen off the bus (kmsg)",
		"GPU lost (poll)",
		"hot die (85-90 C) with fans at 30 %",
		"spurious SwPowerCap (throttled at low power) 20 times",
	)
}

func TestHTMLParsesAndHasEveryChart(t *testing.T) {
	page := incidentGolden(t, "incident.html.golden", (*Report).WriteHTML)
	for _, bad := range []string{"<script", "http://", "https://", "@import", "url("} {
		if bad == "http://" {
			// Only the XML namespaces may name a URL.
			page2 := strings.NewReplacer(`xmlns="http://www.w3.org/1999/xhtml"`, "", `xmlns="http://www.w3.org/2000/svg"`, "").Replace(page)
			if strings.Contains(page2, bad) {
				t.Errorf("page refers to the network: %q", bad)
			}
			continue
		}
		if strings.Contains(page, bad) {
			t.Errorf("page is not self-contained: has %q", bad)
		}
	}
	d := xml.NewDecoder(strings.NewReader(page))
	d.Strict = true
	svgs, paths, titles := 0, 0, map[string]int{}
	var inText bool
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("page does not parse as XML: %v", err)
		}
		switch tk := tok.(type) {
		case xml.StartElement:
			switch tk.Name.Local {
			case "svg":
				for _, a := range tk.Attr {
					if a.Name.Local == "viewBox" {
						svgs++
					}
				}
			case "path":
				paths++
			case "text":
				inText = true
			}
		case xml.EndElement:
			inText = false
		case xml.CharData:
			if inText {
				titles[string(tk)]++
			}
		}
	}
	if svgs != 2 {
		t.Errorf("%d charts, want one per GPU (2)", svgs)
	}
	for _, want := range []string{"Temperature", "Fans: speed (solid) against target (dashed)", "Power against limit and enforced limit",
		"Clocks: graphics and SM", "Memory clock", "Throttle reasons", "SwPowerCap", "Markers", "Data from "} {
		found := false
		for k := range titles {
			found = found || strings.HasPrefix(k, want)
		}
		if !found {
			t.Errorf("no chart text %q", want)
		}
	}
	// 2 GPUs x (2 temperature + 4 fan + 3 power + 2 clock + 1 memory clock) lines.
	if paths != 24 {
		t.Errorf("%d lines drawn, want 24", paths)
	}
}

// TestEveryMarkerLabelled: every marker on a chart has its number in the
// strip and a line in the key below the chart, with its whole label, so a
// picture or a printout of the chart is complete; none is left to a
// tooltip, and the incident's own event is marked once.
func TestEveryMarkerLabelled(t *testing.T) {
	rep := incidentReport(t)
	var b strings.Builder
	if err := rep.WriteHTML(&b); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	for _, g := range rep.GPUs {
		ms, _ := rep.chartMarkers(g.Index, rep.axis())
		want := 0
		for _, e := range rep.Timeline {
			if e.Marker != "" && (e.GPU == g.Index || e.GPU < 0) {
				want++
			}
		}
		if len(ms) != want || (g.Index == 0 && want < 10) {
			t.Errorf("GPU %d: %d markers, want %d (every marked timeline entry)", g.Index, len(ms), want)
		}
		for _, m := range ms {
			num := ">" + strconv.Itoa(m.n) + "</text>"
			if strings.Count(page, num) < 2 {
				t.Errorf("GPU %d marker %d (%s) is not numbered in the strip and in the key", g.Index, m.n, m.e.What)
			}
			if !strings.Contains(page, html.EscapeString(offset(m.e.Time.Sub(rep.Incident.Time))+"  "+string(m.e.Kind)+"  "+m.e.What)) {
				t.Errorf("GPU %d marker %d has no key line: %s", g.Index, m.n, m.e.What)
			}
		}
	}
	if n := strings.Count(page, "INCIDENT  Xid 62"); n != 1 {
		t.Errorf("the incident is in the key %d times, want 1", n)
	}
}

// TestMinimumYRange: a healthy GPU's noise is not scaled up into what looks
// like oscillation: each panel spans at least its quantity's minimum.
func TestMinimumYRange(t *testing.T) {
	rows := []Row{{Temp: reading.Some(54.0)}, {Temp: reading.Some(56.0)}}
	for _, p := range panels(1) {
		if p.minSpan < 20 && p.unit != "W" {
			t.Errorf("%s: minimum span %v", p.title, p.minSpan)
		}
	}
	r := yRange(panels(0)[0].series, rows, false, panels(0)[0].minSpan)
	if span := r.hi - r.lo; span < 20 || (56-54)/span > 0.1 {
		t.Errorf("55 +- 1 C spans %v..%v: the noise fills %.0f%% of the panel", r.lo, r.hi, 100*2/span)
	}
}

// header is the CSV header of a GPU with one fan.
const header = "timestamp,gpu_temp,gpu_tlimit,power_instant,power_limit,pstate,gpu_clock,mem_clock,gpu_util,mem_util,vram_used_mb,pcie_gen,pcie_width,throttle_bitmask,throttle_reasons,fan0_speed_pct,fan0_target_pct,sensor0_temp,sensor0_target,sensor0_controller,dmesg_time,sm_clock,power_enforced_limit,energy_mj,pcie_replay,mem_temp,enc_util,dec_util,flags\n"

func rowLine(t time.Time, temp int, flags string) string {
	return fmt.Sprintf("%s,%d,10,300.00,600,1,2400,13801,90,38,52000,5,16,0x0000,None,40,40,%d,1,1,%.6f,2400,600,1000,0,70,0,0,%s\n",
		t.Format("2006-01-02T15:04:05.000Z07:00"), temp, temp, float64(t.Unix()%100000), flags)
}

// writeDay writes n rows every step from start to path (gzip when the name
// ends in .gz).
func writeDay(t *testing.T, path string, start time.Time, n int, step time.Duration) {
	t.Helper()
	var b bytes.Buffer
	b.WriteString(header)
	for i := 0; i < n; i++ {
		b.WriteString(rowLine(start.Add(time.Duration(i)*step), 50+i%10, ""))
	}
	data := b.Bytes()
	if strings.HasSuffix(path, ".gz") {
		var z bytes.Buffer
		w := gzip.NewWriter(&z)
		w.Write(data)
		w.Close()
		data = z.Bytes()
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func writeEvents(t *testing.T, dir string, lines ...string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, "events.log"), []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestAcrossMidnightGzipAndRestart(t *testing.T) {
	dir := t.TempDir()
	loc := time.UTC
	midnight := time.Date(2026, 11, 30, 0, 0, 0, 0, loc)
	// Yesterday compressed, up to 23:59:59.9; today plain, from 00:00:05
	// (the logger restarted: 5 s without rows).
	writeDay(t, filepath.Join(dir, "gpu0-deep-2026-11-29.csv.gz"), midnight.Add(-30*time.Second), 300, 100*time.Millisecond)
	writeDay(t, filepath.Join(dir, "gpu0-deep-2026-11-30.csv"), midnight.Add(5*time.Second), 300, 100*time.Millisecond)
	inc := midnight.Add(10 * time.Second)
	writeEvents(t, dir, inc.Format("2006-01-02T15:04:05.000Z07:00")+` gpu=0 bus=00000000:41:00.0 source=kmsg type=Xid xid=79 name="GPU has fallen off the bus" text="NVRM: Xid (PCI:0000:41:00): 79, GPU has fallen off the bus."`)
	rep, err := Build(Options{Dir: dir, GPU: -1, Before: 20 * time.Second, After: 5 * time.Second, Loc: loc})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.GPUs) != 1 {
		t.Fatalf("%d GPUs", len(rep.GPUs))
	}
	rows := rep.GPUs[0].Rows
	// From 23:59:50 to 23:59:59.9 (100 rows), then 00:00:05 .. 00:00:15 (101).
	if len(rows) != 201 {
		t.Errorf("%d rows in the window, want 201", len(rows))
	}
	var gap *Entry
	for i, e := range rep.Timeline {
		if e.Kind == KindGap {
			gap = &rep.Timeline[i]
		}
	}
	if gap == nil || !strings.Contains(gap.What, "no rows for 5.1s") {
		t.Errorf("no 5.1 s gap across midnight: %+v", gap)
	}
}

// TestFilesNamedInAnotherZone: the logger names its CSVs by its own day
// (Tokyo here); a report asked in another zone (Los Angeles, 17 hours
// behind) still finds the rows, and does not read the day before.
func TestFilesNamedInAnotherZone(t *testing.T) {
	dir := t.TempDir()
	tokyo := time.FixedZone("JST", 9*3600)
	la := time.FixedZone("PST", -8*3600)
	// 2026-11-30 08:00 in Tokyo is 2026-11-29 15:00 in Los Angeles.
	midnight := time.Date(2026, 11, 30, 0, 0, 0, 0, tokyo)
	writeDay(t, filepath.Join(dir, "gpu0-deep-2026-11-29.csv.gz"), midnight.Add(-time.Hour), 600, 100*time.Millisecond)
	writeDay(t, filepath.Join(dir, "gpu0-deep-2026-11-30.csv"), midnight.Add(8*time.Hour), 600, 100*time.Millisecond)
	inc := midnight.Add(8*time.Hour + 30*time.Second)
	writeEvents(t, dir, inc.Format("2006-01-02T15:04:05.000Z07:00")+` gpu=0 bus=00000000:41:00.0 source=kmsg type=Xid xid=79 name="GPU has fallen off the bus" text="NVRM: Xid (PCI:0000:41:00): 79, GPU has fallen off the bus."`)
	rep, err := Build(Options{Dir: dir, GPU: -1, Before: 10 * time.Second, After: 5 * time.Second, Loc: la})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.GPUs) != 1 || len(rep.GPUs[0].Rows) != 151 {
		t.Fatalf("want GPU 0's 151 rows from 08:00:20 to 08:00:35 Tokyo time, got %d GPU(s)", len(rep.GPUs))
	}
	for _, tc := range []struct {
		name string
		want bool
	}{
		{"gpu0-deep-2026-11-29.csv.gz", false}, // ends at 00:01 Tokyo time (+1 h DST slack)
		{"gpu0-deep-2026-11-30.csv", true},
	} {
		f, ok := sink.ParseFileName(tc.name, la)
		if !ok {
			t.Fatalf("%s: not a CSV name", tc.name)
		}
		f.Path = filepath.Join(dir, tc.name)
		if got := overlaps(f, rep.From, rep.To); got != tc.want {
			t.Errorf("overlaps(%s, the window) = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestDamagedInputIsSkippedAndSaid(t *testing.T) {
	dir := t.TempDir()
	loc := time.UTC
	day := time.Date(2026, 11, 30, 12, 0, 0, 0, loc)
	// GPU 0: a .gz cut in half. GPU 1: a plain CSV whose last line was cut.
	gz := filepath.Join(dir, "gpu0-deep-2026-11-30.csv.gz")
	writeDay(t, gz, day, 2000, 100*time.Millisecond)
	b, _ := os.ReadFile(gz)
	os.WriteFile(gz, b[:len(b)/2], 0o644)
	plain := filepath.Join(dir, "gpu1-deep-2026-11-30.csv")
	writeDay(t, plain, day, 100, 100*time.Millisecond)
	f, _ := os.OpenFile(plain, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(rowLine(day.Add(10*time.Second), 60, "")[:40])
	f.Close()
	rep, err := Build(Options{Dir: dir, GPU: -1, At: day.Add(5 * time.Second), Before: 10 * time.Second, After: 200 * time.Second, Loc: loc})
	if err != nil {
		t.Fatal(err)
	}
	skipped := strings.Join(rep.Skipped, "\n")
	if !strings.Contains(skipped, "gpu0-deep-2026-11-30.csv.gz: damaged (unexpected EOF)") {
		t.Errorf("damaged .gz not reported; skipped:\n%s", skipped)
	}
	if !strings.Contains(skipped, "gpu1-deep-2026-11-30.csv: 1 malformed or cut line(s) skipped") {
		t.Errorf("cut line not reported; skipped:\n%s", skipped)
	}
	if len(rep.GPUs) != 2 || len(rep.GPUs[0].Rows) == 0 || len(rep.GPUs[1].Rows) != 100 {
		t.Errorf("readable rows not used: %d GPUs", len(rep.GPUs))
	}
}

func TestBadInputMessages(t *testing.T) {
	dir := t.TempDir()
	day := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	writeDay(t, filepath.Join(dir, "gpu0-deep-2026-11-30.csv"), day, 100, 100*time.Millisecond)
	for _, tc := range []struct {
		name string
		o    Options
		want string
	}{
		{"missing dir", Options{Dir: filepath.Join(dir, "nope")}, "does not exist"},
		{"no incident", Options{Dir: dir}, "no incident in"},
		{"time outside the data", Options{Dir: dir, At: day.Add(48 * time.Hour)}, "no rows between"},
		{"not a snapshot", Options{Dir: dir, Incident: filepath.Join(dir, "gpu0-deep-2026-11-30.csv")}, "not a readable crash snapshot"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.o.GPU, tc.o.Loc = -1, time.UTC
			_, err := Build(tc.o)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want one saying %q", err, tc.want)
			}
		})
	}
}

// TestSeekReadsLittle: a minute out of a long plain file is found by binary
// search, not by reading the file from its start.
func TestSeekReadsLittle(t *testing.T) {
	dir := t.TempDir()
	start := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	path := filepath.Join(dir, "gpu0-deep-2026-11-30.csv")
	writeDay(t, path, start, 60000, 100*time.Millisecond) // 100 minutes, ~9 MB
	from := start.Add(80 * time.Minute)
	to := from.Add(time.Minute)
	var rows []Row
	minDone, reports := int64(-1), 0
	st, err := readWindow(os.Open, sink.CSVDay{Path: path}, from, to, func(d, tot int64) {
		reports++
		if minDone < 0 || d < minDone {
			minDone = d
		}
	}, func(r Row) { rows = append(rows, r) })
	if err != nil {
		t.Fatal(err)
	}
	if st.Rows != 601 || len(rows) != 601 || !rows[0].Time.Equal(from) || !rows[600].Time.Equal(to) {
		t.Fatalf("%d rows (%v .. %v), want 601 from %v", len(rows), rows[0].Time, rows[len(rows)-1].Time, from)
	}
	fi, _ := os.Stat(path)
	rowLen := int64(len(rowLine(start, 50, "")))
	windowAt := int64(len(header)) + int64(80*60*10)*rowLen
	// Reading began near the window, not at the file's start.
	if reports == 0 || minDone < windowAt-(70<<10) {
		t.Errorf("reading began at byte %d (%d progress reports), the window is at %d: not sought", minDone, reports, windowAt)
	}
	// The seek itself: the offset found is within a few rows' worth of the window.
	f, _ := os.Open(path)
	defer f.Close()
	off, err := seekTime(f, int64(len(header)), fi.Size(), from)
	if err != nil {
		t.Fatal(err)
	}
	if want := windowAt; off > want || want-off > 70<<10 {
		t.Errorf("seek landed at %d, want at most 64 KiB before %d", off, want)
	}
}

func TestQuotedFlagsCell(t *testing.T) {
	l, err := parseLayout(header)
	if err != nil {
		t.Fatal(err)
	}
	line := strings.TrimSuffix(rowLine(time.Date(2026, 11, 30, 1, 2, 3, 0, time.UTC), 50, `"NVML_HUNG(nvmlDeviceGetPowerUsage,1200ms)|XID(79)"`), "\n")
	r, _, ok := l.parseRow(line, nil)
	if !ok {
		t.Fatal("quoted flags cell did not parse")
	}
	if r.Flags != "NVML_HUNG(nvmlDeviceGetPowerUsage,1200ms)|XID(79)" {
		t.Errorf("flags = %q", r.Flags)
	}
	if _, _, ok := l.parseRow(line[:len(line)-5], nil); ok {
		t.Error("a line cut inside the quoted cell parsed")
	}
}

func TestKernelTimePlacesByPrintkClock(t *testing.T) {
	base := time.Date(2026, 11, 30, 1, 0, 0, 0, time.UTC)
	var rows []Row
	for i := 0; i < 100; i++ {
		r := Row{Time: base.Add(time.Duration(i) * 100 * time.Millisecond)}
		r.DmesgTime.V, r.DmesgTime.OK = 5000+float64(i)*0.1, true
		rows = append(rows, r)
	}
	// Read 3 s late, printed at kernel time 5004.25: 4.25 s after the first row.
	got, ok := kernelTime(rows, "5004.25")
	if !ok || !got.Equal(base.Add(4250*time.Millisecond)) {
		t.Errorf("kernelTime = %v, %v; want %v", got, ok, base.Add(4250*time.Millisecond))
	}
	if _, ok := kernelTime(rows, ""); ok {
		t.Error("placed an event without kernel time")
	}
}

// BenchmarkReadDayGz measures streaming a compressed day of one GPU at
// 100 ms (864 000 rows; 8 GPUs make the 7 million rows of a day). Reported
// per row.
func BenchmarkReadWindowGz(b *testing.B) {
	dir := b.TempDir()
	start := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	path := filepath.Join(dir, "gpu0-deep-2026-11-30.csv.gz")
	t := &testing.T{}
	writeDay(t, path, start, 100000, 100*time.Millisecond)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		n := 0
		if _, err := readWindow(os.Open, sink.CSVDay{Path: path, GZ: true}, start, start.Add(24*time.Hour), nil, func(Row) { n++ }); err != nil || n != 100000 {
			b.Fatal(err, n)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/100000, "ns/row")
}

func TestUncleanStopIsPlacedAtItsLastRow(t *testing.T) {
	e, ok := parseEventLine(`2026-11-30T08:00:00.000Z gpu=? source=start type=UNCLEAN_STOP prev_boot=a boot=b same_boot=false last_row=2026-11-30T07:12:03.400Z gap_gpu0=47m56.6s file=crashes/boot-20261130-080000.000.log`)
	if !ok || !e.critical() || e.GPU != -1 {
		t.Fatalf("parse: %+v %v", e, ok)
	}
	if want := time.Date(2026, 11, 30, 7, 12, 3, 400e6, time.UTC); !e.Time.Equal(want) {
		t.Errorf("placed at %v, want the last row %v", e.Time, want)
	}
	if d := e.describe(); !strings.Contains(d, "host went down; boot a -> b; crashes/boot-20261130-080000.000.log") {
		t.Errorf("describe: %q", d)
	}
}

// BenchmarkWindowOfAGzDay: a 70 s window at the end of a compressed day of
// one GPU at 100 ms (864 000 rows); 8 GPUs are 8 such files, read in
// parallel. Everything before the window is skipped on its timestamp.
func BenchmarkWindowOfAGzDay(b *testing.B) {
	dir := b.TempDir()
	start := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	path := filepath.Join(dir, "gpu0-deep-2026-11-30.csv.gz")
	writeDay(&testing.T{}, path, start, 864000, 100*time.Millisecond)
	from := start.Add(24*time.Hour - 80*time.Second)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		n := 0
		if _, err := readWindow(os.Open, sink.CSVDay{Path: path, GZ: true}, from, from.Add(70*time.Second), nil, func(Row) { n++ }); err != nil || n != 701 {
			b.Fatal(err, n)
		}
	}
}

func TestBeforeCheckAcrossOffsets(t *testing.T) {
	from := time.Date(2026, 10, 25, 1, 30, 0, 0, time.UTC) // 02:30 at +01:00, 03:30 at +02:00
	c := beforeCheck{from: from}
	for _, tc := range []struct {
		line string
		want bool
	}{
		{"2026-10-25T03:29:59.900+02:00,1,2", true},
		{"2026-10-25T03:30:00.000+02:00,1,2", false},
		{"2026-10-25T02:29:59.900+01:00,1,2", true}, // after the clocks went back: a new offset
		{"2026-10-25T02:30:00.100+01:00,1,2", false},
		{"2026-10-25T01:29:59.000Z,1,2", true},
		{"timestamp,gpu_temp", false},
		{"2026-10-25T0", false},
	} {
		if got := c.before([]byte(tc.line)); got != tc.want {
			t.Errorf("before(%q) = %v, want %v", tc.line, got, tc.want)
		}
	}
}

func TestTickLabel(t *testing.T) {
	for _, tc := range []struct {
		s, step float64
		want    string
	}{
		{-30, 10, "-30s"}, {5, 5, "+5s"}, {0, 3600, "0s"}, {-1800, 600, "-30m"}, {-7200, 3600, "-2h"}, {-9000, 1800, "-2h30m"}, {0.5, 0.5, "+0.5s"},
	} {
		if got := tickLabel(tc.s, tc.step); got != tc.want {
			t.Errorf("tickLabel(%v, %v) = %q, want %q", tc.s, tc.step, got, tc.want)
		}
	}
}

// TestEveryIncidentTypeIsFound: the report is about the latest incident of
// any type the events.log vocabulary calls one (sink.EventTypes), and never
// about a notable line alone.
func TestEveryIncidentTypeIsFound(t *testing.T) {
	at := time.Date(2026, 11, 30, 19, 8, 17, 623e6, time.UTC)
	for _, typ := range sink.EventTypes() {
		t.Run(typ, func(t *testing.T) {
			line := at.Format(sink.TimestampLayout) + " gpu=1 type=" + typ + " severity=uncorrectable-fatal"
			l, _ := sink.ParseEventLine(line)
			e, ok := parseEventLine(line)
			if !ok {
				t.Fatalf("%q did not parse", line)
			}
			routine, _ := parseEventLine(at.Add(time.Second).Format(sink.TimestampLayout) + " gpu=1 source=nvml type=PState data=1")
			inc, err := findIncident(Options{GPU: -1}, []EventLine{e, routine})
			if l.Class() != sink.EventIncident {
				if err == nil {
					t.Errorf("a %s line alone made an incident: %+v", typ, inc)
				}
				return
			}
			if err != nil || !inc.Time.Equal(at) || inc.GPU != 1 {
				t.Errorf("findIncident = %+v, %v; want the %s line at %v on GPU 1", inc, err, typ, at)
			}
		})
	}
}

// TestWindowOfAMembersGz: a day gzipped by the logger (in members) is
// entered at the member before the window: the rows read are those of the
// plain file, wherever the window is (start, middle, end, after a header
// written again), and a minute of the day costs a member or two of it.
func TestWindowOfAMembersGz(t *testing.T) {
	dir := t.TempDir()
	start := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	plain := filepath.Join(dir, "plain", "gpu0-deep-2026-11-30.csv")
	os.MkdirAll(filepath.Dir(plain), 0o755)
	var b bytes.Buffer
	b.WriteString(header)
	n := 200000
	for i := 0; i < n; i++ {
		b.WriteString(rowLine(start.Add(time.Duration(i)*100*time.Millisecond), 50+i%10, ""))
		if i == 120000 {
			b.WriteString(header) // a restart writes the header again
		}
	}
	if err := os.WriteFile(plain, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	gz := filepath.Join(dir, "gpu0-deep-2026-11-30.csv")
	if err := os.WriteFile(gz, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := sink.CompressFile(gz); err != nil {
		t.Fatal(err)
	}
	fi, _ := os.Stat(gz + ".gz")
	for _, at := range []time.Duration{0, 10 * time.Second, 3 * time.Hour, 12000 * time.Second, 12001 * time.Second, time.Duration(n-300) * 100 * time.Millisecond} {
		from, to := start.Add(at), start.Add(at+70*time.Second)
		var want, got []Row
		if _, err := readWindow(os.Open, sink.CSVDay{Path: plain}, from, to, nil, func(r Row) { want = append(want, r) }); err != nil {
			t.Fatal(err)
		}
		st, err := readWindow(os.Open, sink.CSVDay{Path: gz + ".gz", GZ: true}, from, to, nil, func(r Row) { got = append(got, r) })
		if err != nil || st.Malformed > 0 {
			t.Fatalf("at %v: %v, %+v", at, err, st)
		}
		if len(got) != len(want) || len(got) == 0 || !got[0].Time.Equal(want[0].Time) || !got[len(got)-1].Time.Equal(want[len(want)-1].Time) ||
			got[0].Temp != want[0].Temp {
			t.Errorf("at %v: %d rows from the .gz, %d from the plain file", at, len(got), len(want))
		}
		// Entered at the last member that begins before the window.
		f, _ := os.Open(gz + ".gz")
		ms, ok := sink.GzMembers(f, fi.Size())
		f.Close()
		off, _ := sink.GzStart(ms, from.Add(-seekSlack), 0)
		if !ok || (at >= time.Hour && off == 0) {
			t.Fatalf("at %v: members %v, start %d", at, ok, off)
		}
		for i, m := range ms {
			if m.Offset == off && i+1 < len(ms) && !ms[i+1].Header {
				if next, _ := parseTime(ms[i+1].First); next.Before(from.Add(-seekSlack)) {
					t.Errorf("at %v: entered at member %d, but member %d also begins before the window", at, i, i+1)
				}
			}
		}
	}
}

// TestOldAndNewEventLinesReportAlike: testdata/incident was recorded before
// events.log lines began with time= (a bare local timestamp first); the
// same log directory with its events.log in today's format (every line
// rewritten with sink.EventLine's writer) gives the same report, byte for byte:
// report reads log directories of either age.
func TestOldAndNewEventLinesReportAlike(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "incident")
	if err := os.CopyFS(dir, os.DirFS("testdata/incident")); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "events.log"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
		old, ok := sink.ParseEventLine(l)
		if !ok || strings.HasPrefix(l, "time=") {
			t.Fatalf("not an old-format line: %s", l)
		}
		out = append(out, rewrite(t, old))
	}
	if err := os.WriteFile(filepath.Join(dir, "events.log"), []byte(strings.Join(out, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var old, now bytes.Buffer
	for _, c := range []struct {
		dir string
		out *bytes.Buffer
	}{{"testdata/incident", &old}, {dir, &now}} {
		rep, err := Build(Options{Dir: c.dir, GPU: -1, Before: 60 * time.Second, After: 10 * time.Second, Loc: time.UTC})
		if err != nil {
			t.Fatal(err)
		}
		if err := rep.WriteText(c.out); err != nil {
			t.Fatal(err)
		}
	}
	// The log dir's line names the directory read.
	if got := strings.Replace(now.String(), dir, "testdata/incident", 1); old.String() != got {
		t.Errorf("the report differs with today's events.log lines:\nold:\n%s\nnew:\n%s", old.String(), got)
	}
}

// rewrite writes an old events.log line's fields as today's writer does.
func rewrite(t *testing.T, l sink.ParsedLine) string {
	t.Helper()
	e := sink.EventLine{Time: l.Time, GPU: -1, Source: l.KV["source"], Type: l.Type(), Bus: l.KV["bus"], Host: l.KV["host"]}
	if l.KV["gpu"] != "?" && l.KV["gpu"] != "" {
		g, err := strconv.Atoi(l.KV["gpu"])
		if err != nil {
			t.Fatal(err)
		}
		e.GPU = g
	}
	keys := slices.Sorted(maps.Keys(l.KV))
	for _, k := range keys {
		switch k {
		case "source", "type", "bus", "host", "gpu", "level", "uuid":
			continue
		}
		e.Fields = append(e.Fields, sink.Field{Key: k, Value: l.KV[k]})
	}
	line := e.Line()
	back, ok := sink.ParseEventLine(line)
	if !ok || !back.Time.Equal(l.Time) {
		t.Fatalf("rewritten line does not parse back: %s", line)
	}
	return line
}
