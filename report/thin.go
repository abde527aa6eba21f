package report

import (
	"sort"
	"time"
)

// maxRowsPerFile bounds the rows one CSV file keeps in memory. A window of
// a whole day at 100 ms is 864 000 rows per GPU; keeping every one for 8
// GPUs would take gigabytes. Past the bound, rows are thinned: every row
// that matters is kept (flags and the row after them, throttle and health
// verdict changes, gaps and the row before them, readings going absent or
// coming back, new extremes), and of the rest every k-th, so the timeline, the precursors and
// the peaks stay exact and the charts (a few pixels per second at that
// scale) lose nothing visible: a chart is 1104 pixel columns wide and draws
// each column's lowest and highest value, so about ten rows per column are
// more than it can show. With 50 000 rows a day of 8 GPUs kept 770 000 rows,
// 670 MB at the peak (make bench, BenchmarkReportWindow24h); with 12 000,
// about 190 000.
const maxRowsPerFile = 12_000

// intervalSample is how many intervals between rows the gap threshold is
// estimated from.
const intervalSample = 200

// thinner decides, row by row, what a file's reader keeps, and marks gaps.
type thinner struct {
	span      time.Duration // the window
	intervals []time.Duration
	gap       time.Duration // 0 until estimated
	k         int           // keep every k-th ordinary row
	n         int
	prev      Row
	havePrev  bool
	prevKept  bool
	// Running maxima of temperature, memory temperature, power and the
	// graphics clock, and of minus the slowest fan. (The lowest power limit
	// changes only on rows flagged TDP_*, which are kept.)
	hi   [5]float64
	hiOK [5]bool
}

func newThinner(from, to time.Time) *thinner {
	return &thinner{span: to.Sub(from), k: 1}
}

// gapThreshold is the smallest pause between rows that is a gap: several
// usual intervals, and never under a second (one late tick is not a gap).
func gapThreshold(median time.Duration) time.Duration {
	return max(3*median, time.Second)
}

// add takes the next row (in time order) and calls emit with the rows to
// keep: none, the row, or the row before it and the row.
func (t *thinner) add(r Row, emit func(Row)) {
	if t.havePrev {
		d := r.Time.Sub(t.prev.Time)
		if len(t.intervals) < intervalSample {
			t.intervals = append(t.intervals, d)
			s := append([]time.Duration(nil), t.intervals...)
			sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
			med := s[len(s)/2]
			t.gap = gapThreshold(med)
			if len(t.intervals) == intervalSample && med > 0 {
				t.k = max(1, int(t.span/(med*maxRowsPerFile))+1)
			}
		}
		if len(t.intervals) > 1 && d >= t.gap {
			r.Gap = d
		}
	}
	keep := t.k == 1 || t.n%t.k == 0 || !t.havePrev || r.Flags != "" || t.prev.Flags != "" ||
		r.Reasons != t.prev.Reasons || r.Health != t.prev.Health || r.Gap > 0 || r.Temp.OK != t.prev.Temp.OK || r.Power.OK != t.prev.Power.OK ||
		t.extreme(r)
	if keep {
		// The row before a change or a gap shows the state that ended.
		if t.havePrev && !t.prevKept {
			emit(t.prev)
		}
		emit(r)
	}
	t.prev, t.havePrev, t.prevKept = r, true, keep
	t.n++
}

// extreme notes the row's readings in the running extremes and reports
// whether one of them is new (so the peaks are exact after thinning).
func (t *thinner) extreme(r Row) bool {
	vals := [5]struct {
		v  float64
		ok bool
	}{{r.Temp.V, r.Temp.OK}, {r.MemTemp.V, r.MemTemp.OK}, {r.Power.V, r.Power.OK}, {r.GPUClock.V, r.GPUClock.OK}}
	if f := slowestFan(r); f.OK {
		vals[4].v, vals[4].ok = -f.V, true
	}
	news := false
	for i, v := range vals {
		if v.ok && (!t.hiOK[i] || v.v > t.hi[i]) {
			t.hi[i], t.hiOK[i] = v.v, true
			news = true
		}
	}
	return news
}
