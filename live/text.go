package live

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"
)

func itoa(i int) string    { return strconv.Itoa(i) }
func utoa(u uint64) string { return strconv.FormatUint(u, 10) }

// na is how an absent reading is shown.
const na = "n/a"

// OptUint is an optional number followed by unit, or n/a when absent.
func OptUint(p *uint32, unit string) string {
	if p == nil {
		return na
	}
	return utoa(uint64(*p)) + unit
}

// gib is bytes in GiB with one decimal.
func gib(n float64, ok bool) string {
	if !ok {
		return na
	}
	return strconv.FormatFloat(n/(1<<30), 'f', 1, 64)
}

// clock shows a time of day in now's zone, or the date too when it is not
// now's day.
func clock(t, now time.Time) string {
	t = t.In(now.Location())
	if y, m, d := t.Date(); y == now.Year() && m == now.Month() && d == now.Day() {
		return t.Format("15:04:05")
	}
	return t.Format("2006-01-02 15:04:05")
}

// dur shows a duration as 2h05m, 3m10s or 4.2s.
func dur(d time.Duration) string {
	switch {
	case d >= time.Hour:
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	case d >= time.Minute:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	}
	return strconv.FormatFloat(d.Seconds(), 'f', 1, 64) + "s"
}

// Millis is seconds s as milliseconds with one decimal: 4.2ms.
func Millis(s float64) string { return strconv.FormatFloat(s*1000, 'f', 1, 64) + "ms" }

// optMs is ms, or n/a when nothing was measured.
func optMs(p *float64) string {
	if p == nil {
		return na
	}
	return Millis(*p)
}

// StateText is a GPU's state as status and top show it: "ok", "hung 12.0s
// in nvmlDeviceGetTemperature since 15:04:05", "lost since ...", "failing:
// <error>", "not started".
func StateText(g GPUDoc, now time.Time) string {
	s := g.State
	switch {
	case g.HungS != nil:
		s += " " + dur(time.Duration(*g.HungS*float64(time.Second))) + " in " + g.Function
		if g.StateSince != nil {
			s += " since " + clock(*g.StateSince, now)
		}
	case g.State == StateLost.String() && g.StateSince != nil:
		s += " since " + clock(*g.StateSince, now)
	case g.Error != "":
		s += ": " + g.Error
	}
	return s
}

// HostLines is the host part of the status screen.
func HostLines(d Doc) []string {
	h := d.Host
	c := h.Cadence
	// Counts come from the counter table, the one place they are.
	l1 := "gpu-telemetry " + h.Version + " on " + orNA(h.Name) + "  up " + dur(time.Duration(h.UptimeS*float64(time.Second))) +
		"  driver " + orNA(h.Driver) + "  interval " + Millis(h.IntervalS) +
		"  cadence " + Millis(c.MeanPeriodS) + " mean / " + Millis(c.P99PeriodS) + " p99 / " + h.CounterText(CounterTickOverruns) + " overruns"
	l2 := "rows " + h.CounterText(CounterRowsWritten) + " written / " + h.CounterText(CounterRowsDropped) + " dropped (" + utoa(h.RowsDropped10) + " in 10m)" +
		"  disk " + h.Disk + "  kernel log " + h.Kmsg + "  NVML events " + h.NVMLEvents
	// Stretches, busy skips and log lines lost are on the lost work line;
	// lines delayed by a full disk (written late, with their own
	// timestamps) are not lost, and show here.
	p := h.Pacer
	pacer := "NVML pacer level " + itoa(p.Level) + "  tick " + optMs(p.TickNVMLS) +
		" in the driver, last GPU " + optMs(p.LastLateS) + " late  log lines waiting " + itoa(h.LogLines.Waiting) +
		" / " + h.CounterText(CounterLogLinesDelayed) + " delayed"
	l3 := "last incident: none"
	if in := h.LastIncident; in != nil {
		l3 = "last incident: " + clock(in.Time, d.Time) + " GPU " + itoa(in.GPU) + " " + in.Reason
	}
	var lost []string
	for _, c := range h.Counters {
		if c.Loss && c.Value > 0 {
			lost = append(lost, c.Name+"="+utoa(c.Value))
		}
	}
	l4 := "lost work: none"
	if len(lost) > 0 {
		l4 = "lost work: " + strings.Join(lost, " ")
	}
	out := []string{l1, l2, pacer, l3, l4}
	if h.GPUsMissing > 0 {
		out = append(out, "GPUs missing since this start: "+itoa(h.GPUsMissing)+" (GPU_MISSING in events.log)")
	}
	if b := h.BERT; b != nil {
		out = append(out, "the firmware left a boot error record (BERT): "+b.Severity+" (CPER in events.log)")
	}
	if len(h.Fabric) > 0 {
		var s []string
		for _, f := range h.Fabric {
			if f.Running {
				s = append(s, f.Name+" running (pid "+itoa(f.PID)+")")
			} else {
				s = append(s, f.Name+" NOT running")
			}
		}
		out = append(out, "fabric services: "+strings.Join(s, ", "))
	}
	for _, b := range h.MissingBoards {
		was := " (GPU " + itoa(b.Index) + " in the previous run): "
		if b.Index < 0 {
			was = " (missing since an earlier run): "
		}
		out = append(out, "missing board "+b.UUID+was+ActionText(GPUDoc{Action: b.Action}, d.Time))
	}
	return out
}

func orNA(s string) string {
	if s == "" {
		return na
	}
	return s
}

// RecentFlags returns the kinds of flag a GPU showed in the last d before
// now, the document's time (on the flags' ages when the document has them).
func RecentFlags(g GPUDoc, now time.Time, d time.Duration) []string {
	var out []string
	for _, f := range g.Flags {
		if within(f.Last, f.AgeS, now, d) {
			out = append(out, f.Kind)
		}
	}
	return out
}

// GPULines is one GPU's block on the status screen.
func GPULines(g GPUDoc, now time.Time) []string {
	l1 := "GPU " + itoa(g.Index) + "  " + g.Name + "  " + g.BusID + "  " + orNA(g.UUID) + "  serial " + orNA(g.Serial) + "  " + StateText(g, now)
	if g.SampleTime == nil {
		return append([]string{l1, "  no sample yet"}, actionLines(g, now)...)
	}
	if g.State != StateAnswering.String() {
		// No stale numbers: the last values are in the CSV and the snapshot.
		lines := append([]string{l1, "  no current readings (last answered sample " + clock(*g.SampleTime, now) + ")", eventLine(g, now),
			"  " + HealthText(g)}, actionLines(g, now)...)
		return slices.Concat(lines, fanGuardLine(g.FanGuard), ProcLines(g, now))
	}
	fans := make([]string, 0, len(g.Fans))
	for _, f := range g.Fans {
		fans = append(fans, OptUint(f["speed_pct"], "%")+"/"+OptUint(f["target_pct"], "%"))
	}
	fanText := "none"
	if len(fans) > 0 {
		fanText = strings.Join(fans, " ")
	}
	r := g.Reading
	l2 := "  temp " + r("temperature_c").Text("C") + " mem " + r("memory_temperature_c").Text("C") + "  fans " + fanText +
		"  power " + r("power_w").Format(0, "W") + " / " + r("power_limit_w").Format(0, "W") + " (enforced " + r("enforced_limit_w").Format(0, "W") + ")"
	l3 := "  clocks " + r("graphics_clock_mhz").Text("") + "/" + r("sm_clock_mhz").Text("") + "/" + r("memory_clock_mhz").Text("") + " MHz" +
		"  util gpu " + r("gpu_util_pct").Text("%") + " mem " + r("memory_util_pct").Text("%") + " enc " + r("encoder_util_pct").Text("%") +
		" dec " + r("decoder_util_pct").Text("%") + "  memory " + gib(r("memory_used_bytes").Num()) + "/" + gib(r("memory_total_bytes").Num()) +
		" GiB  pstate " + optP(r("pstate"))
	thr := na
	if names := r("throttle_reasons").Names(); names != nil {
		thr = "none"
		if len(names) > 0 {
			thr = strings.Join(names, ",")
		}
	}
	flags := "none"
	if f := RecentFlags(g, now, time.Minute); len(f) > 0 {
		flags = strings.Join(f, ",")
	}
	l4 := "  throttle " + thr + "  flags (1 min) " + flags
	lines := append([]string{l1, l2, l3, l4, eventLine(g, now), "  " + HealthText(g)}, actionLines(g, now)...)
	return slices.Concat(lines, fanGuardLine(g.FanGuard), ProcLines(g, now))
}

// eventLine is a GPU's last Xid, recovery action, incidents and newest
// snapshot.
func eventLine(g GPUDoc, now time.Time) string {
	xid := "none"
	if x := g.LastXid; x != nil {
		xid = utoa(x.Code) + " at " + clock(x.Time, now) + " (" + x.Name + ")"
	}
	l := "  last Xid " + xid + "  incidents " + utoa(g.Incidents)
	if r := g.LastRecovery; r != nil {
		l += "  recovery action " + utoa(r.Code) + " at " + clock(r.Time, now) + " (" + r.Name + ")"
	}
	if o := g.OpEvents; o.Count > 0 {
		// Operational events and CPER records only where there are some.
		l += "  op events " + utoa(o.Count) + " (" + utoa(o.Critical) + " critical)"
	}
	if c := g.CPER; c.Last != nil {
		l += "  CPER " + utoa(c.Records) + " (last " + c.Last.Severity + " at " + clock(c.Last.Time, now) + ")"
	}
	if g.NewestSnapshot != "" {
		l += "  snapshot " + g.NewestSnapshot
	}
	return l
}

// optP is a performance state: P0 to P15.
func optP(v Value) string {
	if _, ok := v.Num(); !ok {
		return na
	}
	return "P" + v.Text("")
}

// WriteText writes the status screen: the host lines, then each GPU's block.
func WriteText(w io.Writer, d Doc) error {
	var b strings.Builder
	for _, l := range HostLines(d) {
		b.WriteString(l + "\n")
	}
	for _, g := range d.GPUs {
		for _, l := range GPULines(g, d.Time) {
			b.WriteString(l + "\n")
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}
