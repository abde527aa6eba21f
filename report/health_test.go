package report

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/internal/testutil"
	"github.com/gpu-telemetry/gpu-telemetry/sink"
)

// Health counter changes read as what changed in the timeline.
func TestHealthEventsInTimeline(t *testing.T) {
	for _, tc := range []struct{ line, want string }{
		{"type=HEALTH counter=ecc_sbe_volatile from=3 to=5 delta=+2", "health ecc_sbe_volatile 3 -> 5 (+2)"},
		{"type=HEALTH counter=nvlink_state link=3 from=active to=inactive", "health nvlink_state link 3 active -> inactive"},
		{"type=HEALTH counter=recovery_action from=0 to=1 action=gpu_reset", "health recovery_action 0 -> 1 gpu_reset"},
		{`type=HEALTH_CRITICAL reason=ecc_dbe detail="double-bit ECC errors since the driver loaded"`, "health CRITICAL ecc_dbe: double-bit ECC errors since the driver loaded"},
		{`type=HEALTH_WARNING reason=remap_pending detail="a row remap waits for a GPU reset"`, "health warning remap_pending: a row remap waits for a GPU reset"},
	} {
		l, ok := sink.ParseEventLine("2026-11-30T19:08:17.623Z gpu=0 " + tc.line)
		if !ok {
			t.Fatalf("%q did not parse", tc.line)
		}
		e := EventLine{Time: l.Time, Type: l.Type(), KV: l.KV}
		if got := e.describe(); got != tc.want {
			t.Errorf("%q: %q, want %q", tc.line, got, tc.want)
		}
	}
	e := EventLine{Type: sink.TypeHealthCritical, KV: map[string]string{"type": sink.TypeHealthCritical}}
	if !e.critical() {
		t.Errorf("HEALTH_CRITICAL is not an incident")
	}
}

// healthDay writes GPU 0's rows, one every 100 ms from start, with the
// health counters each row gives (sbe, dbe, remap pending) and its flags,
// as the logger writes them: the HEALTH_* flag on the row a reason began.
func healthDay(t *testing.T, dir string, start time.Time, rows []healthRow) {
	t.Helper()
	var b strings.Builder
	b.WriteString("timestamp,gpu_temp,power_instant,power_limit,ecc_mode,ecc_sbe_volatile,ecc_dbe_volatile,remap_pending,flags\n")
	for i, r := range rows {
		fmt.Fprintf(&b, "%s,60,300.00,600,1,%d,%d,%d,%s\n",
			start.Add(time.Duration(i)*100*time.Millisecond).Format(sink.TimestampLayout), r.sbe, r.dbe, r.pending, r.flags)
	}
	if err := os.WriteFile(filepath.Join(dir, "gpu0-deep-"+start.Format("2006-01-02")+".csv"), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

type healthRow struct {
	sbe, dbe, pending int
	flags             string
}

// rowsOf is n rows from a function of the row's number.
func rowsOf(n int, f func(i int) healthRow) []healthRow {
	out := make([]healthRow, n)
	for i := range out {
		out[i] = f(i)
	}
	return out
}

// holds is n rows where set holds from row from to row to (excluded), the
// first of them flagged flag, as the logger flags a reason that began.
func holds(n, from, to int, flag string, set func(*healthRow)) []healthRow {
	return rowsOf(n, func(i int) healthRow {
		var r healthRow
		if i >= from && i < to {
			set(&r)
		}
		if i == from {
			r.flags = flag
		}
		return r
	})
}

// TestHealthConditionLastsWhileItsReadingHolds: the logger flags a health
// reason on the row where it began only; the report's condition lasts while
// the reading that raised it holds (remap_pending reads 1, volatile DBEs
// above 0, SBEs grew within the logger's hold), not one row.
func TestHealthConditionLastsWhileItsReadingHolds(t *testing.T) {
	start := time.Date(2026, 12, 6, 6, 45, 0, 0, time.UTC)
	for _, tc := range []struct {
		name    string
		rows    []healthRow
		want    []string // in the timeline's text
		notWant []string
	}{
		{
			name:    "remap_pending stays 1 to the end",
			rows:    holds(200, 50, 200, "HEALTH_WARN(remap_pending)", func(r *healthRow) { r.pending = 1 }),
			want:    []string{"HEALTH_WARN(remap_pending) on: a row remap waits for a GPU reset", "still on: HEALTH_WARN(remap_pending) (for 14.9s)"},
			notWant: []string{"off after"},
		},
		{
			name:    "remap_pending cleared by a reset",
			rows:    holds(200, 50, 120, "HEALTH_WARN(remap_pending)", func(r *healthRow) { r.pending = 1 }),
			want:    []string{"HEALTH_WARN(remap_pending) off after 7.0s"},
			notWant: []string{"still on"},
		},
		{
			name:    "a DBE holds while the volatile count is above 0",
			rows:    holds(200, 100, 200, "HEALTH_CRIT(ecc_dbe)", func(r *healthRow) { r.dbe = 1 }),
			want:    []string{"HEALTH_CRIT(ecc_dbe) on: double-bit ECC errors", "still on: HEALTH_CRIT(ecc_dbe) (for 9.9s)"},
			notWant: []string{"off after"},
		},
		{
			name: "an SBE rate is held after the last growth, as the logger holds it",
			rows: rowsOf(200, func(i int) healthRow {
				r := healthRow{sbe: 3 * min(i/10, 6)} // +3 a second for 6 s, then no more
				if i == 40 {
					r.flags = "HEALTH_WARN(ecc_sbe_rate)"
				}
				return r
			}),
			want:    []string{"HEALTH_WARN(ecc_sbe_rate) on", "still on: HEALTH_WARN(ecc_sbe_rate) (for 15.9s)"},
			notWant: []string{"off after"},
		},
		{
			name: "a downtrained busy link: its detector's flags hold pcie_degraded, as the logger held it",
			rows: rowsOf(200, func(i int) healthRow {
				r := healthRow{}
				switch {
				case i == 20:
					r.flags = `"PCIE_DEGRADED(x8,gen4)|HEALTH_WARN(pcie_degraded)"` // quoted, as the logger writes a cell with a comma
				case i > 20:
					r.flags = `"PCIE_DEGRADED(x8,gen4)"`
				}
				return r
			}),
			want:    []string{"HEALTH_WARN(pcie_degraded) on: the PCIe link runs below its maximum", "still on: HEALTH_WARN(pcie_degraded)"},
			notWant: []string{"off after"},
		},
		{
			name: "a growth that began before the first row: the flag begins it",
			rows: rowsOf(200, func(i int) healthRow {
				r := healthRow{sbe: 100}
				if i == 0 {
					r.flags = "HEALTH_WARN(ecc_sbe_rate)"
				}
				return r
			}),
			want:    []string{"still on: HEALTH_WARN(ecc_sbe_rate) (for 19.9s)"},
			notWant: []string{"off after"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			healthDay(t, dir, start, tc.rows)
			writeEvents(t, dir)
			rep, err := Build(Options{Dir: dir, GPU: -1, At: start.Add(10 * time.Second), Before: time.Minute, After: time.Minute, Loc: time.UTC})
			if err != nil {
				t.Fatal(err)
			}
			var b strings.Builder
			for _, e := range rep.Timeline {
				b.WriteString(e.What + "\n")
			}
			text := b.String()
			testutil.Contains(t, "timeline", text, tc.want...)
			lacks(t, "timeline", text, tc.notWant...)
		})
	}
}

// healthLine is an events.log line of GPU 0 at at.
func healthLine(at time.Time, rest string) string {
	return "time=" + at.Format(sink.TimestampLayout) + " gpu=0 bus=00000000:01:00.0 " + rest
}

// steps is the HEALTH lines of counters growing by delta every interval,
// n times from start.
func steps(start time.Time, every time.Duration, n, delta int, counters ...string) []string {
	var out []string
	for i := range n {
		for _, c := range counters {
			out = append(out, healthLine(start.Add(time.Duration(i)*every),
				fmt.Sprintf("type=HEALTH counter=%s from=%d to=%d delta=+%d", c, i*delta, (i+1)*delta, delta)))
		}
	}
	return out
}

// TestCounterStepsAndHealthPrecursors: a counter that grows step by step is
// one timeline line per climb ("+60 over 19.0s"), split at the incident
// and at a pause; counters that climbed step for step are that one line;
// a lone step keeps its own line. Health warnings and error counters that
// grew before the incident are precursors; counters of time and what came
// after the incident are not.
func TestCounterStepsAndHealthPrecursors(t *testing.T) {
	start := time.Date(2026, 12, 6, 6, 45, 0, 0, time.UTC)
	inc := start.Add(30 * time.Second)
	xid := healthLine(inc, `source=nvml type=Xid xid=48 name="Double Bit ECC Error"`)
	for _, tc := range []struct {
		name          string
		events        []string
		timeline      []string // lines the timeline has, whole
		notTimeline   []string // text no timeline line has
		precursors    []string // text the precursors have
		notPrecursors []string
	}{
		{
			name:        "SBEs every second, volatile and aggregate alike",
			events:      append(steps(start.Add(5*time.Second), time.Second, 20, 3, "ecc_sbe_volatile", "ecc_sbe_aggregate"), xid),
			timeline:    []string{"health ecc_sbe_volatile +60 over 19.0s (0 -> 60 in 20 steps; ecc_sbe_aggregate alike)"},
			notTimeline: []string{"(+3)"},
			precursors:  []string{"GPU 0: ecc_sbe_volatile +60 over 19.0s (0 -> 60 in 20 steps; ecc_sbe_aggregate alike), the last 6.0s before Xid 48"},
		},
		{
			name: "a health warning before the DBE",
			events: []string{
				healthLine(start.Add(10*time.Second), `type=HEALTH_WARNING reason=ecc_sbe_rate detail="single-bit ECC errors at a high rate"`),
				xid,
			},
			precursors: []string{"GPU 0: health warning ecc_sbe_rate: single-bit ECC errors at a high rate, 20.0s before Xid 48"},
		},
		{
			name:          "a lone step keeps its line",
			events:        append(steps(start.Add(24*time.Second), time.Second, 1, 1, "remap_correctable"), xid),
			timeline:      []string{"health remap_correctable 0 -> 1 (+1)"},
			precursors:    []string{"GPU 0: remap_correctable +1 (0 -> 1), 6.0s before Xid 48"},
			notPrecursors: []string{"the last"},
		},
		{
			name:          "split at the incident",
			events:        append(steps(start.Add(20*time.Second), time.Second, 20, 1, "ecc_sbe_volatile"), xid),
			timeline:      []string{"health ecc_sbe_volatile +10 over 9.0s (0 -> 10 in 10 steps)", "health ecc_sbe_volatile +10 over 9.0s (10 -> 20 in 10 steps)"},
			precursors:    []string{"GPU 0: ecc_sbe_volatile +10 over 9.0s (0 -> 10 in 10 steps), the last 1.0s before Xid 48"},
			notPrecursors: []string{"10 -> 20"},
		},
		{
			name: "split at a pause of more than two minutes",
			events: append(append(steps(start.Add(-3*time.Minute), time.Second, 3, 2, "pcie_correctable"),
				strings.ReplaceAll(strings.Join(steps(start.Add(10*time.Second), time.Second, 3, 2, "pcie_correctable"), "\n"), "from=0 ", "from=6 ")), xid),
			timeline: []string{"health pcie_correctable +6 over 2.0s (0 -> 6 in 3 steps)"},
		},
		{
			name:          "a clock-event time is no precursor",
			events:        append(steps(start.Add(5*time.Second), 10*time.Second, 2, 2, "clk_sw_power_cap_s"), xid),
			notPrecursors: []string{"clk_sw_power_cap_s"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeDay(t, filepath.Join(dir, "gpu0-deep-2026-12-06.csv"), start.Add(-4*time.Minute), 3000, 100*time.Millisecond)
			writeEvents(t, dir, tc.events...)
			rep, err := Build(Options{Dir: dir, GPU: -1, Before: 4 * time.Minute, After: 30 * time.Second, Loc: time.UTC})
			if err != nil {
				t.Fatal(err)
			}
			if rep.Incident.Time != inc {
				t.Fatalf("incident at %v, want the Xid at %v", rep.Incident.Time, inc)
			}
			var lines []string
			for _, e := range rep.Timeline {
				lines = append(lines, e.What)
			}
			text := strings.Join(lines, "\n")
			for _, w := range tc.timeline {
				if !slices.Contains(lines, w) {
					t.Errorf("timeline lacks the line %q:\n%s", w, text)
				}
			}
			lacks(t, "timeline", text, tc.notTimeline...)
			pre := strings.Join(rep.Precursors, "\n")
			testutil.Contains(t, "precursors", pre, tc.precursors...)
			lacks(t, "precursors", pre, tc.notPrecursors...)
		})
	}
}

// lacks reports each of bad that got (named what) has.
func lacks(t *testing.T, what, got string, bad ...string) {
	t.Helper()
	for _, w := range bad {
		if strings.Contains(got, w) {
			t.Errorf("%s has %q:\n%s", what, w, got)
		}
	}
}

// TestHealthReplayOnDmesgTime: the replay measures the verdict's windows on
// the rows' dmesg_time, as the logger did, not on their timestamps, which
// step with the wall clock: SBEs at 6 a minute (below the 10 of
// ecc_sbe_rate) over a wall clock stepped an hour back are no burst.
func TestHealthReplayOnDmesgTime(t *testing.T) {
	start := time.Date(2026, 12, 6, 6, 45, 0, 0, time.UTC)
	for _, by := range []time.Duration{0, -time.Hour} {
		l, err := parseLayout("timestamp,dmesg_time,ecc_mode,ecc_sbe_volatile,flags")
		if err != nil {
			t.Fatal(err)
		}
		var h healthReplay
		var cells []string
		for i := range 60 { // one row every 10 s for 10 minutes; the wall clock steps at 35 s
			at := time.Duration(i) * 10 * time.Second
			wall := start.Add(at)
			if at >= 35*time.Second {
				wall = wall.Add(by)
			}
			line := fmt.Sprintf("%s,%.6f,1,%d,", wall.Format(sink.TimestampLayout), (1000*time.Second).Seconds()+at.Seconds(), i)
			var r Row
			var ok bool
			if r, cells, ok = l.parseRow(line, cells); !ok {
				t.Fatalf("row %q did not parse", line)
			}
			h.observe(&r, &l.s)
			if names := r.Health.Names(); len(names) != 0 {
				t.Fatalf("wall clock stepped %v: row %d (%s) replayed as %v, want ok", by, i, at, names)
			}
		}
	}
}

// sbeReplay replays rows of a file with dmesg_time and ecc_sbe_volatile
// through one healthReplay, as report reads one file; the func it returns
// takes a row's timestamp, dmesg_time and SBE count and returns its verdict.
func sbeReplay(t *testing.T) func(wall time.Time, uptime time.Duration, sbe int) []string {
	t.Helper()
	l, err := parseLayout("timestamp,dmesg_time,ecc_mode,ecc_sbe_volatile,flags")
	if err != nil {
		t.Fatal(err)
	}
	var h healthReplay
	var cells []string
	return func(wall time.Time, uptime time.Duration, sbe int) []string {
		t.Helper()
		line := fmt.Sprintf("%s,%.6f,1,%d,", wall.Format(sink.TimestampLayout), uptime.Seconds(), sbe)
		r, c, ok := l.parseRow(line, cells)
		if cells = c; !ok {
			t.Fatalf("row %q did not parse", line)
		}
		h.observe(&r, &l.s)
		return r.Health.Names()
	}
}

// TestHealthReplayAcrossAReboot: a file replayed across a reboot (one
// healthReplay for the whole file) measures what boot A held on the wall
// clock once boot B's rows begin, not on dmesg_time: an SBE burst that ended
// at boot A's uptime 2h is not held again when boot B (started 20 minutes
// after the crash) passes uptime 2h, 2h20m on. Rows carry no boot id: boot
// B's dmesg_time either starts again below boot A's (the logger started
// early in boot B) or jumps past it by more than a continuous run's samples
// do (the logger started late, at an uptime after boot A's last).
func TestHealthReplayAcrossAReboot(t *testing.T) {
	start := time.Date(2026, 12, 6, 6, 45, 0, 0, time.UTC)
	const every, burst, uptimeA = 10 * time.Second, 3 * time.Minute, 2 * time.Hour
	for _, tc := range []struct {
		name    string
		firstUp time.Duration // boot B's first row's dmesg_time
	}{
		{"boot B's logger starts at uptime 10 s", every},
		{"boot B's logger starts at uptime 2h0m30s, 30 s past boot A's last", uptimeA + 30*time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			row := sbeReplay(t)
			held := false
			for at := time.Duration(0); at <= burst; at += every { // boot A: 18 SBEs a minute, to the crash at uptime 2h
				if slices.Contains(row(start.Add(at), uptimeA-burst+at, 3*int(at/every)), "ecc_sbe_rate") {
					held = true
				}
			}
			if !held {
				t.Fatal("boot A's burst of 18 SBEs a minute is not ecc_sbe_rate")
			}
			bootB := start.Add(burst + 20*time.Minute)
			for up := tc.firstUp; up <= uptimeA+15*time.Minute; up += every { // boot B: no SBE
				if names := row(bootB.Add(up), up, 0); len(names) != 0 {
					t.Fatalf("boot B at uptime %s (%s after the burst): %v, want ok", up, bootB.Add(up).Sub(start.Add(burst)), names)
				}
			}
		})
	}
}

// TestHealthReplayWallStepWithinARun: within one continuous run the replay
// stays on dmesg_time also where the wall clock steps at a row that came
// late (a slow sample, its dmesg_time 12 s after the last row's, within
// the bound of a run's samples): an SBE burst's 10-minute hold is neither
// cut short by a step forward nor stretched by a step back. Each run is
// compared row by row with the same rows on a wall clock that does not step.
func TestHealthReplayWallStepWithinARun(t *testing.T) {
	start := time.Date(2026, 12, 6, 6, 45, 0, 0, time.UTC)
	const (
		every  = 10 * time.Second
		burst  = 3 * time.Minute  // 18 SBEs a minute this long, then none
		late   = 5 * time.Minute  // the row after this one comes 2 s late, and the wall clock steps there
		length = 16 * time.Minute // past the hold after the last growth
		boot   = 1000 * time.Second
	)
	run := func(by time.Duration) []bool { // held per row, row i at i x every
		row := sbeReplay(t)
		var held []bool
		for at := time.Duration(0); at <= length; at += every {
			up, wall := boot+at, start.Add(at)
			if at > late {
				up += 2 * time.Second
				wall = wall.Add(2*time.Second + by)
			}
			held = append(held, slices.Contains(row(wall, up, 100+3*int(min(at, burst)/every)), "ecc_sbe_rate"))
		}
		return held
	}
	want := run(0)
	if !slices.Contains(want, true) || want[len(want)-1] {
		t.Fatalf("without a step: ecc_sbe_rate held %v, want from the burst to its hold's end", want)
	}
	for _, by := range []time.Duration{time.Hour, -time.Hour} {
		got := run(by)
		for i := range got {
			if got[i] != want[i] {
				t.Errorf("wall clock stepped %s at the late row: at row %d (%s) ecc_sbe_rate held %v, want %v", by, i, time.Duration(i)*every, got[i], want[i])
				break
			}
		}
	}
}
