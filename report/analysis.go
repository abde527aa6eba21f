package report

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

// Peak is the extreme of one reading of one GPU in the window.
type Peak struct {
	GPU   int
	Board string // the board (sink.BoardID) when the index held more than one in the window
	What  string // "temperature", "power", ...
	Value string // "90 C", "390 W (65 % of 600 W)"
	Time  time.Time
}

// name is the peak's GPU as the report lists it: gpu0, or gpu0/5a3c1e2f
// when GPU 0 was two boards in the window.
func (p Peak) name() string {
	if p.Board != "" {
		return "gpu" + strconv.Itoa(p.GPU) + "/" + p.Board
	}
	return "gpu" + strconv.Itoa(p.GPU)
}

// peakSpec is one reading whose peak the report gives: a table, so adding
// one is one line.
var peakSpecs = []struct {
	what string
	unit string
	get  func(Row) reading.Opt[float64]
	low  bool // the lowest value matters (fans), not the highest
}{
	{"temperature", "C", func(r Row) reading.Opt[float64] { return r.Temp }, false},
	{"memory temperature", "C", func(r Row) reading.Opt[float64] { return r.MemTemp }, false},
	{"power", "W", func(r Row) reading.Opt[float64] { return r.Power }, false},
	{"lowest power limit", "W", func(r Row) reading.Opt[float64] { return r.Limit }, true},
	{"slowest fan", "%", slowestFan, true},
	{"graphics clock", "MHz", func(r Row) reading.Opt[float64] { return r.GPUClock }, false},
}

func slowestFan(r Row) reading.Opt[float64] {
	var out reading.Opt[float64]
	for _, f := range r.Fans {
		if v, ok := f.Speed.Get(); ok && (!out.OK || v < out.V) {
			out = reading.Some(v)
		}
	}
	return out
}

// peaks returns each GPU's extremes in the window.
func peaks(gpus []GPUData) []Peak {
	var out []Peak
	boards := map[int]int{}
	for _, g := range gpus {
		boards[g.Index]++
	}
	for _, g := range gpus {
		board := ""
		if boards[g.Index] > 1 && g.Board.UUID != "" {
			board = g.Board.ID()
		}
		for _, s := range peakSpecs {
			var best reading.Opt[float64]
			var at Row
			for _, r := range g.Rows {
				v, ok := s.get(r).Get()
				if !ok {
					continue
				}
				if !best.OK || (s.low && v < best.V) || (!s.low && v > best.V) {
					best, at = reading.Some(v), r
				}
			}
			if !best.OK {
				continue
			}
			val := strconv.FormatFloat(best.V, 'f', 0, 64) + " " + s.unit
			if s.what == "power" {
				if l, ok := at.Limit.Get(); ok && l > 0 {
					val += fmt.Sprintf(" (%.0f %% of %.0f W)", 100*best.V/l, l)
				}
			}
			if s.what == "slowest fan" {
				val += " at " + num(at.Temp, 0) + " C"
			}
			out = append(out, Peak{GPU: g.Index, Board: board, What: s.what, Value: val, Time: at.Time})
		}
	}
	return out
}

// run is a stretch of consecutive rows carrying one flag family.
type run struct {
	start, end time.Time
	rows       int
	a, b       []int64 // the flag's numeric arguments, per row
}

// flagRuns finds the runs of a flag family in rows up to t.
func flagRuns(rows []Row, fam string, until time.Time) []run {
	var out []run
	var cur *run
	for _, r := range rows {
		if r.Time.After(until) {
			break
		}
		f, ok := findFlag(r.Flags, fam)
		if !ok {
			cur = nil
			continue
		}
		if cur == nil {
			out = append(out, run{start: r.Time})
			cur = &out[len(out)-1]
		}
		cur.end, cur.rows = r.Time, cur.rows+1
		a, b := flagArgs(f)
		cur.a, cur.b = append(cur.a, a), append(cur.b, b)
	}
	return out
}

func findFlag(flags, fam string) (string, bool) {
	if flags == "" {
		return "", false
	}
	for _, f := range strings.Split(flags, "|") {
		if flagFamily(f) == fam {
			return f, true
		}
	}
	return "", false
}

// flagArgs reads the first two numbers of a flag: TEMP_FAN_INV(85C@30%) ->
// 85, 30; SPUR_THROT(20%ofLim) -> 20, 0.
func flagArgs(f string) (a, b int64) {
	var nums []int64
	cur, in := int64(0), false
	for i := 0; i <= len(f); i++ {
		if i < len(f) && f[i] >= '0' && f[i] <= '9' {
			cur, in = cur*10+int64(f[i]-'0'), true
			continue
		}
		if in {
			nums = append(nums, cur)
			cur, in = 0, false
		}
	}
	if len(nums) > 0 {
		a = nums[0]
	}
	if len(nums) > 1 {
		b = nums[1]
	}
	return
}

func span(v []int64) string {
	lo, hi := v[0], v[0]
	for _, x := range v {
		lo, hi = min(lo, x), max(hi, x)
	}
	if lo == hi {
		return strconv.FormatInt(lo, 10)
	}
	return strconv.FormatInt(lo, 10) + "-" + strconv.FormatInt(hi, 10)
}

// precursorWindow is how far back counts of repeated precursors reach.
const precursorWindow = 60 * time.Second

// precursors lists the known precursors of a GSP crash found before the
// incident on its GPU (every GPU when the incident names none).
func precursors(rep *Report) []string {
	inc := rep.Incident
	label := shortIncident(inc.What)
	var out []string
	boards := map[int]int{} // boards per index: more than one (the indices moved) names each
	for _, g := range rep.GPUs {
		boards[g.Index]++
	}
	done := map[int]bool{} // indices whose events, climbs and gaps are said
	for _, g := range rep.GPUs {
		if inc.GPU >= 0 && g.Index != inc.GPU {
			continue
		}
		prefix := "GPU " + strconv.Itoa(g.Index) + ": "
		if boards[g.Index] > 1 && g.Board.UUID != "" {
			prefix = "GPU " + strconv.Itoa(g.Index) + " (board " + g.Board.ID() + "): "
		}
		rows := g.Rows
		if runs := flagRuns(rows, "TEMP_FAN_INV", inc.Time); len(runs) > 0 {
			r := runs[len(runs)-1]
			d := r.end.Sub(r.start) + medianInterval(rows)
			out = append(out, fmt.Sprintf("%shot die (%s C) with fans at %s %% for %s, ending %s before %s",
				prefix, span(r.a), span(r.b), fmtDur(d), fmtDur(inc.Time.Sub(r.end)), label))
		}
		since := inc.Time.Add(-precursorWindow)
		countRows := func(fam string) (n int) {
			for _, r := range rows {
				if r.Time.After(since) && !r.Time.After(inc.Time) {
					if _, ok := findFlag(r.Flags, fam); ok {
						n++
					}
				}
			}
			return n
		}
		if n := countRows("SPUR_THROT"); n > 0 {
			out = append(out, fmt.Sprintf("%sspurious SwPowerCap (throttled at low power) %d times in the last %s before %s",
				prefix, n, fmtDur(precursorWindow), label))
		}
		if n := countRows("FAN_SPIKE"); n > 0 {
			out = append(out, fmt.Sprintf("%s%d fan spike(s) in the last %s before %s", prefix, n, fmtDur(precursorWindow), label))
		}
		if n := countRows("PWR"); n > 0 {
			out = append(out, fmt.Sprintf("%spower above the limit in %d rows in the last %s before %s", prefix, n, fmtDur(precursorWindow), label))
		}
		if n := countRows("NVML_HUNG"); n > 0 && !strings.HasPrefix(inc.What, "NVML call hung") {
			out = append(out, fmt.Sprintf("%sNVML calls hung in %d rows before %s", prefix, n, label))
		}
		// The events, climbs and gaps are the index's (events.log names
		// the index): said once for it, whichever boards it held.
		if done[g.Index] {
			continue
		}
		done[g.Index] = true
		prefix = "GPU " + strconv.Itoa(g.Index) + ": "
		var tdp, aer, xids []string
		for _, e := range rep.Timeline {
			if e.GPU != g.Index || e.Kind != KindEvent || !e.Time.Before(inc.Time) {
				continue
			}
			ago := fmtDur(inc.Time.Sub(e.Time))
			switch {
			case strings.HasPrefix(e.What, "health warning ") || strings.HasPrefix(e.What, "health CRITICAL "):
				// The logger's verdict on the health counters: what DCGM's
				// health watches warn of before a DBE, a remap or a lost GPU.
				out = append(out, fmt.Sprintf("%s%s, %s before %s", prefix, e.What, ago, label))
			case strings.HasPrefix(e.What, "TDP "):
				tdp = append(tdp, strings.TrimPrefix(e.What, "TDP ")+" "+ago+" before")
			case strings.HasPrefix(e.What, "PCIe AER"):
				aer = append(aer, e.What+" "+ago+" before")
			case strings.HasPrefix(e.What, "Xid "):
				xids = append(xids, shortIncident(e.What)+" "+ago+" before")
			}
		}
		if len(tdp) > 0 {
			out = append(out, fmt.Sprintf("%spower limit changed %d time(s) before %s: %s", prefix, len(tdp), label, strings.Join(tdp, "; ")))
		}
		if len(aer) > 0 {
			out = append(out, fmt.Sprintf("%s%d PCIe AER line(s) before %s: %s", prefix, len(aer), label, strings.Join(aer, "; ")))
		}
		if len(xids) > 0 {
			out = append(out, fmt.Sprintf("%searlier Xids: %s", prefix, strings.Join(xids, "; ")))
		}
		for _, c := range rep.climbs {
			if c.gpu != g.Index || c.link != "" || !c.last.Time.Before(inc.Time) || !errorCounter(c.counter) {
				continue
			}
			ago := fmtDur(inc.Time.Sub(c.last.Time))
			if c.steps > 1 {
				ago = "the last " + ago
			}
			out = append(out, fmt.Sprintf("%s%s, %s before %s", prefix, c.summary(), ago, label))
		}
		for _, e := range rep.Timeline {
			if e.GPU == g.Index && e.Kind == KindGap && e.Time.Before(inc.Time) {
				out = append(out, fmt.Sprintf("%s%s, %s before %s", prefix, e.What, fmtDur(inc.Time.Sub(e.Time)), label))
			}
		}
	}
	return out
}

// shortIncident shortens an incident's description for "before X":
// "Xid 62: Internal ... (nvml)" -> "Xid 62", "NVML call hung: fn" -> "NVML
// call hung", "GPU lost (poll)" -> "GPU lost".
func shortIncident(what string) string {
	if i := strings.Index(what, ": "); i > 0 {
		what = what[:i]
	}
	if i := strings.Index(what, " ("); i > 0 {
		what = what[:i]
	}
	return what
}
