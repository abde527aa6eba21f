package e2e

import (
	"bytes"
	"encoding/csv"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/internal/testutil"
)

// zoneWithMidnightSoon writes a TZif file for a fixed UTC offset chosen so
// that local midnight comes at least lead from now, and returns its path (for
// TZ), the zone and that midnight. Offsets are whole minutes, as in every
// real zone (the CSV's timestamps print none finer), so midnight falls on a
// UTC minute boundary: the next one at least lead away, within 12 hours of
// UTC.
func zoneWithMidnightSoon(t *testing.T, lead time.Duration) (string, *time.Location, time.Time) {
	t.Helper()
	target := time.Now().Add(lead).UTC().Truncate(time.Minute).Add(time.Minute)
	sinceMidnight := target.Sub(target.Truncate(24 * time.Hour))
	// Local time at target must be 00:00: offset = -(UTC time of day).
	off := int32(-sinceMidnight.Seconds())
	if off < -12*3600 {
		off += 24 * 3600
	}
	path, loc := fixedZone(t, off)
	if l := target.In(loc); l.Hour() != 0 || l.Minute() != 0 || l.Second() != 0 {
		t.Fatalf("zone built wrong: %v is %v there", target, l)
	}
	return path, loc, target.In(loc)
}

// readRows returns the rows (header dropped) of a CSV or .csv.gz, strictly:
// every line must have the header's width.
func readRows(t *testing.T, path string) [][]string {
	t.Helper()
	cr := csv.NewReader(bytes.NewReader(testutil.ReadFile(t, path)))
	cr.Comment = '#' // the board line
	recs, err := cr.ReadAll()
	if err != nil {
		t.Fatalf("%s is not a complete CSV: %v", path, err)
	}
	if len(recs) < 2 || recs[0][0] != "timestamp" {
		t.Fatalf("%s: no header or no rows", path)
	}
	return recs[1:]
}

// TestMidnightWithEightGPUs runs 8 GPUs across local midnight (TZ set so
// that it comes 4 to 64 s after start), with the fsync thread and the
// compression of the finished day at work: the finished day is compressed
// and complete, the new day's files are complete, and no tick is lost at the
// rotation.
func TestMidnightWithEightGPUs(t *testing.T) {
	t.Parallel()
	tz, _, midnight := zoneWithMidnightSoon(t, 4*time.Second)
	day1, day2 := midnight.Add(-time.Hour).Format("2006-01-02"), midnight.Format("2006-01-02")
	p := start(t, opts{scenario: "@healthy-8gpu", env: []string{"TZ=" + tz}})
	name := func(gpu int, day, ext string) string {
		m, _ := filepath.Glob(filepath.Join(p.dir, fmt.Sprintf("gpu%d-*-deep-%s%s", gpu, day, ext)))
		if len(m) != 1 {
			return filepath.Join(p.dir, fmt.Sprintf("gpu%d-(one board)-deep-%s%s", gpu, day, ext))
		}
		return m[0]
	}
	// Ticks the logger itself counted as run late or skipped, in windows.
	late := logCounters(p, "tick_overruns", "busy_skips")
	p.waitFor("rows before midnight", 20*time.Second, func() bool { return rowCount(name(7, day1, ".csv")) >= 5 })
	if time.Now().After(midnight) {
		t.Fatalf("the logger started after midnight (%v); the machine is too slow for this test", midnight)
	}
	p.waitFor("3 s of the new day and every finished day compressed", time.Until(midnight)+30*time.Second, func() bool {
		if time.Now().Before(midnight.Add(3 * time.Second)) {
			return false
		}
		for gpu := range 8 {
			if _, err := os.Stat(name(gpu, day1, ".csv.gz")); err != nil {
				return false
			}
		}
		return true
	})
	p.stop()
	late.stop(t, p)

	_, zoneOff := midnight.Zone()
	for gpu := range 8 {
		if _, err := os.Stat(name(gpu, day1, ".csv")); err == nil {
			t.Errorf("gpu %d: the finished day is both compressed and not", gpu)
		}
		old := readRows(t, name(gpu, day1, ".csv.gz"))
		cur := readRows(t, name(gpu, day2, ".csv"))
		var times []time.Time
		for i, rows := range [][][]string{old, cur} {
			for _, row := range rows {
				ts := parseTime(t, row[0])
				if (i == 0) != ts.Before(midnight) {
					t.Errorf("gpu %d: row at %s is in the wrong day's file", gpu, row[0])
				}
				if _, off := ts.Zone(); off != zoneOff {
					t.Errorf("gpu %d: row at %s is not in the test's zone", gpu, row[0])
				}
				times = append(times, ts)
			}
		}
		// No tick lost at the rotation: every sample the logger took of this
		// GPU is a row in one of the two files.
		m := regexp.MustCompile(`final status.* gpu` + strconv.Itoa(gpu) + `\.samples=(\d+)`).FindStringSubmatch(p.stderr.String())
		if m == nil {
			t.Fatalf("final status lacks gpu%d.samples", gpu)
		}
		if n, _ := strconv.Atoi(m[1]); len(old)+len(cur) != n {
			t.Errorf("gpu %d: %d rows before midnight and %d after, for %d samples taken", gpu, len(old), len(cur), n)
		}
		// And the day's last row and the next day's first are one tick apart,
		// or as many more as the logger counted ticks run late or skipped
		// around them: a row is stamped when the loop runs, which a loaded
		// machine delays.
		last, first := parseTime(t, old[len(old)-1][0]), parseTime(t, cur[0][0])
		if d, n := first.Sub(last), late.between(last, first); missedTicks(d) > n {
			t.Errorf("gpu %d: %v between the last row before midnight and the first after, and %d ticks counted late or skipped around them; want one tick (100 ms) more per counted tick", gpu, d, n)
		}
		// Cadence in the second on either side: every tick has its row, or
		// the logger counted why not (a loaded machine ran the loop late):
		// the ticks missing in that window are no more than the late or
		// skipped ticks counted in it.
		var missed uint64
		var from, to time.Time
		for i := 1; i < len(times); i++ {
			d := times[i].Sub(times[i-1])
			if d <= 0 {
				t.Errorf("gpu %d: rows out of order at %v after %v", gpu, times[i], times[i-1])
			}
			if times[i].After(midnight.Add(-time.Second)) && times[i].Before(midnight.Add(time.Second)) {
				if from.IsZero() {
					from = times[i-1]
				}
				to = times[i]
				missed += missedTicks(d)
			}
		}
		if n := late.between(from, to); missed > n {
			t.Errorf("gpu %d: %d ticks without a row from %v to %v, next to midnight, and %d counted late or skipped then; want no more than counted", gpu, missed, from, to, n)
		}
		// The logger went on sampling into the new day: its first 3 s are 30
		// ticks, 25 rows allowing for the start of the first tick and the
		// stop, less one per tick the logger counted late or skipped in
		// them (a starved loop skips whole ticks and counts each).
		if n := late.between(midnight, midnight.Add(3*time.Second)); uint64(len(cur))+n < 25 {
			t.Errorf("gpu %d: %d rows in the new day's file after 3 s, and %d ticks counted late or skipped then; want 25 less one per counted tick", gpu, len(cur), n)
		}
	}
}
