package report

import (
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/anomaly"
	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

// EntryKind classifies a timeline line.
type EntryKind string

// Timeline entry kinds; the text report prints them as they are.
const (
	KindStart     EntryKind = "START"    // the first row of the window
	KindFlagOn    EntryKind = "FLAG+"    // a row flag appears
	KindFlagOff   EntryKind = "FLAG-"    // it is gone again (with its duration)
	KindFlag      EntryKind = "FLAG"     // a one-row flag (FAN_SPIKE)
	KindThrottle  EntryKind = "THROTTLE" // the clocks event reasons changed
	KindGap       EntryKind = "GAP"      // no rows for a while
	KindEvent     EntryKind = "EVENT"    // an events.log line
	KindIncident  EntryKind = "INCIDENT" // the incident itself
	KindEndOfData EntryKind = "END"      // the last row of the GPU in the window
)

// Entry is one timeline line.
type Entry struct {
	Time   time.Time
	GPU    int // -1: not tied to a monitored GPU
	Kind   EntryKind
	What   string // e.g. "TEMP_FAN_INV on (85C@30%)", "Xid 62: ..."
	Values string // the GPU's readings at that moment (last row at or before Time)
	Marker string // for the charts: "flag", "xid", "hang", "lost", "aer", "incident", "" (none)
}

// flagFamily is a flag's name without its arguments: TEMP_FAN_INV(85C@30%)
// -> TEMP_FAN_INV, PWR+40W -> PWR, NVML_FAILED:x -> NVML_FAILED.
func flagFamily(f string) string {
	if i := strings.IndexAny(f, "(:"); i >= 0 {
		f = f[:i]
	}
	if strings.HasPrefix(f, "PWR+") {
		return "PWR"
	}
	return f
}

// instantFlags are set on one row only; they get one line, no duration.
// TDP and Xid flags are left to their events.log lines, which say more.
// HEALTH_WARN and HEALTH_CRIT mark the row where a health reason began:
// how long it lasts is the rows' health verdict (Row.Health), which holds
// while the reading that raised it does.
var instantFlags = map[string]bool{"FAN_SPIKE": true}
var eventFlags = map[string]bool{"TDP_REDUCED": true, "TDP_RESTORED": true, "XID": true, "HEALTH_WARN": true, "HEALTH_CRIT": true}

// healthConditions adds to present the health reasons that hold at the row,
// keyed as the logger flags them (HEALTH_WARN(remap_pending)), each with
// what it means.
func healthConditions(v anomaly.HealthVerdict, present map[string]string) {
	for r := range anomaly.NumHealthReasons {
		if !v.Has(r) {
			continue
		}
		d := anomaly.HealthReasonDefs[r]
		kind := reading.Flag{Kind: reading.FlagHealthWarn, S: d.Name}
		if d.Critical {
			kind.Kind = reading.FlagHealthCrit
		}
		present[string(kind.AppendText(nil))] = d.Help
	}
}

// medianInterval is the usual time between rows (over the first 1000).
func medianInterval(rows []Row) time.Duration {
	if len(rows) < 2 {
		return 0
	}
	d := make([]time.Duration, 0, min(len(rows)-1, 1000))
	for i := 1; i < len(rows) && len(d) < cap(d); i++ {
		d = append(d, rows[i].Time.Sub(rows[i-1].Time))
	}
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	return d[len(d)/2]
}

// rowTimeline builds one GPU's entries from its rows.
func rowTimeline(gpu int, rows []Row) []Entry {
	if len(rows) == 0 {
		return nil
	}
	var out []Entry
	out = append(out, Entry{Time: rows[0].Time, GPU: gpu, Kind: KindStart, What: "first row in the window", Values: values(rows[0])})
	type onset struct {
		at   time.Time
		text string
	}
	open := map[string]onset{}
	var prev *Row
	for i := range rows {
		r := &rows[i]
		if prev != nil {
			if r.Gap > 0 {
				out = append(out, Entry{Time: prev.Time, GPU: gpu, Kind: KindGap,
					What: "no rows for " + fmtDur(r.Gap) + " (logger down, GPU hung or disk paused)", Values: values(*prev)})
			}
			// To or from an absent cell (a lost or hung GPU) is not a
			// throttle change; the flags say what happened.
			if r.Reasons != prev.Reasons && r.Reasons != "" && prev.Reasons != "" {
				out = append(out, Entry{Time: r.Time, GPU: gpu, Kind: KindThrottle,
					What: "throttle " + orNone(prev.Reasons) + " -> " + orNone(r.Reasons), Values: values(*r)})
			}
		}
		present := map[string]string{}
		if r.Flags != "" {
			for _, f := range strings.Split(r.Flags, "|") {
				fam := flagFamily(f)
				if eventFlags[fam] {
					continue
				}
				if instantFlags[fam] {
					out = append(out, Entry{Time: r.Time, GPU: gpu, Kind: KindFlag, What: f, Values: values(*r), Marker: "flag"})
					continue
				}
				if _, dup := present[fam]; !dup {
					present[fam] = f
				}
			}
		}
		healthConditions(r.Health, present)
		for fam, f := range present {
			if _, ok := open[fam]; !ok {
				open[fam] = onset{at: r.Time, text: f}
				out = append(out, Entry{Time: r.Time, GPU: gpu, Kind: KindFlagOn, What: fam + " on: " + f,
					Values: values(*r), Marker: markerOf(fam)})
			}
		}
		for fam, o := range open {
			if _, still := present[fam]; !still {
				out = append(out, Entry{Time: r.Time, GPU: gpu, Kind: KindFlagOff,
					What: fam + " off after " + fmtDur(r.Time.Sub(o.at)), Values: values(*r)})
				delete(open, fam)
			}
		}
		prev = r
	}
	last := rows[len(rows)-1]
	var still []string
	for fam, o := range open {
		still = append(still, fam+" (for "+fmtDur(last.Time.Sub(o.at))+")")
	}
	sort.Strings(still)
	what := "last row in the window"
	if len(still) > 0 {
		what += "; still on: " + strings.Join(still, ", ")
	}
	out = append(out, Entry{Time: last.Time, GPU: gpu, Kind: KindEndOfData, What: what, Values: values(last)})
	return out
}

// markerOf says how a flag is marked on the charts.
func markerOf(fam string) string {
	switch fam {
	case "NVML_HUNG":
		return "hang"
	case "GPU_LOST":
		return "lost"
	}
	return "flag"
}

func orNone(s string) string {
	if s == "" {
		return "(absent)"
	}
	return s
}

// values formats a row's readings for a timeline line; absent ones show "-".
func values(r Row) string {
	if !r.Temp.OK && !r.Power.OK && !r.GPUClock.OK {
		return "(no readings)"
	}
	var b strings.Builder
	b.WriteString(num(r.Temp, 0) + "C")
	if r.MemTemp.OK {
		b.WriteString(" mem " + num(r.MemTemp, 0) + "C")
	}
	if len(r.Fans) > 0 {
		b.WriteString(" fans")
		for _, f := range r.Fans {
			b.WriteString(" " + num(f.Speed, 0) + "/" + num(f.Target, 0) + "%")
		}
	}
	b.WriteString(" " + num(r.Power, 0) + "/" + num(r.Limit, 0) + "W")
	if r.Enforced.OK && r.Enforced != r.Limit {
		b.WriteString(" (enf " + num(r.Enforced, 0) + "W)")
	}
	b.WriteString(" gfx/sm/mem " + num(r.GPUClock, 0) + "/" + num(r.SMClock, 0) + "/" + num(r.MemClock, 0) + "MHz")
	return b.String()
}

func num(o reading.Opt[float64], prec int) string {
	v, ok := o.Get()
	if !ok {
		return "-"
	}
	return strconv.FormatFloat(v, 'f', prec, 64)
}

// fmtDur formats a duration for people: 350ms, 4.2s, 1m05s.
func fmtDur(d time.Duration) string {
	switch {
	case d < time.Second:
		return strconv.FormatInt(d.Milliseconds(), 10) + "ms"
	case d < time.Minute:
		return strconv.FormatFloat(d.Seconds(), 'f', 1, 64) + "s"
	case d < time.Hour:
		m := int(d / time.Minute)
		s := int((d % time.Minute) / time.Second)
		return strconv.Itoa(m) + "m" + pad2(s) + "s"
	}
	h := int(d / time.Hour)
	m := int((d % time.Hour) / time.Minute)
	return strconv.Itoa(h) + "h" + pad2(m) + "m"
}

func pad2(n int) string {
	if n < 10 {
		return "0" + strconv.Itoa(n)
	}
	return strconv.Itoa(n)
}

// rowAt returns the last row at or before t, or false.
func rowAt(rows []Row, t time.Time) (Row, bool) {
	i := sort.Search(len(rows), func(i int) bool { return rows[i].Time.After(t) })
	if i == 0 {
		return Row{}, false
	}
	return rows[i-1], true
}

// kernelTime places a kernel-log event by its printk timestamp (ktime, in
// seconds on the kernel log's clock) instead of the moment the logger read
// it: the rows' dmesg_time column is the same clock, so the row whose
// dmesg_time is nearest maps it to wall time. ok is false when the event
// carries no ktime or no row has a dmesg_time.
func kernelTime(rows []Row, ktime string) (time.Time, bool) {
	k, err := strconv.ParseFloat(ktime, 64)
	if err != nil || len(rows) == 0 {
		return time.Time{}, false
	}
	i := sort.Search(len(rows), func(i int) bool {
		d, ok := rows[i].DmesgTime.Get()
		return ok && d >= k
	})
	best := -1
	for _, j := range []int{i - 1, i} {
		if j < 0 || j >= len(rows) || !rows[j].DmesgTime.OK {
			continue
		}
		if best < 0 || math.Abs(rows[j].DmesgTime.V-k) < math.Abs(rows[best].DmesgTime.V-k) {
			best = j
		}
	}
	if best < 0 {
		return time.Time{}, false
	}
	off := time.Duration((k - rows[best].DmesgTime.V) * float64(time.Second))
	return rows[best].Time.Add(off), true
}
