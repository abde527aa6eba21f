package report

import (
	"testing"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

// TestThinningKeepsWhatMatters: a day at 100 ms is thinned to about
// maxRowsPerFile rows, and every row the timeline, the precursors and the
// peaks need is still there.
func TestThinningKeepsWhatMatters(t *testing.T) {
	start := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	const n = 864000
	th := newThinner(start, start.Add(24*time.Hour))
	var kept []Row
	var gapAt time.Time
	for i := 0; i < n; i++ {
		at := start.Add(time.Duration(i) * 100 * time.Millisecond)
		if i >= 500000 {
			at = at.Add(7 * time.Second) // the logger was down for 7 s
		}
		if i == 500000 {
			gapAt = at
		}
		r := Row{Time: at, Temp: reading.Some(60.0 + float64(i%7)), Power: reading.Some(300.0), Reasons: "None"}
		switch {
		case i == 123457:
			r.Temp = reading.Some(97.0) // the peak
		case i >= 300000 && i < 300050:
			r.Flags = "TEMP_FAN_INV(85C@30%)"
		case i >= 400000 && i < 400020:
			r.Reasons = "SwPowerCap"
		case i >= 600000 && i < 600010:
			r.Temp, r.Power = reading.Opt[float64]{}, reading.Opt[float64]{} // hung
		}
		th.add(r, func(r Row) { kept = append(kept, r) })
	}
	if len(kept) > 2*maxRowsPerFile || len(kept) < maxRowsPerFile/2 {
		t.Errorf("kept %d of %d rows, want about %d", len(kept), n, maxRowsPerFile)
	}
	has := func(at time.Time) *Row {
		for i := range kept {
			if kept[i].Time.Equal(at) {
				return &kept[i]
			}
		}
		return nil
	}
	row := func(i int) time.Time { return start.Add(time.Duration(i) * 100 * time.Millisecond) }
	for _, tc := range []struct {
		what string
		at   time.Time
	}{
		{"the peak", row(123457)},
		{"the first flagged row", row(300000)},
		{"the last flagged row", row(300049)},
		{"the row after the flags", row(300050)},
		{"the throttle change", row(400000)},
		{"the throttle end", row(400020)},
		{"the row before the gap", row(499999)},
		{"the first hung row", row(600000).Add(7 * time.Second)},
		{"the first row answering again", row(600010).Add(7 * time.Second)},
	} {
		if has(tc.at) == nil {
			t.Errorf("%s (%v) was thinned away", tc.what, tc.at)
		}
	}
	if r := has(gapAt); r == nil || r.Gap != 7100*time.Millisecond {
		t.Errorf("row after the gap: %+v, want Gap 7.1s", r)
	}
	gaps := 0
	for _, r := range kept {
		if r.Gap > 0 {
			gaps++
		}
	}
	if gaps != 1 {
		t.Errorf("%d gaps marked, want 1 (thinning is not a gap)", gaps)
	}
	// The timeline of the thinned rows tells the same story.
	var on, off, thr int
	for _, e := range rowTimeline(0, kept) {
		switch {
		case e.Kind == KindFlagOn && e.Time.Equal(row(300000)):
			on++
		case e.Kind == KindFlagOff && e.Time.Equal(row(300050)) && e.What == "TEMP_FAN_INV off after 5.0s":
			off++
		case e.Kind == KindThrottle:
			thr++
		}
	}
	if on != 1 || off != 1 || thr != 2 {
		t.Errorf("timeline of thinned rows: %d onsets, %d ends, %d throttle changes; want 1, 1, 2", on, off, thr)
	}
}
