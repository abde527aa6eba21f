// Package top is `gpu-telemetry top`: a full-screen live view of every GPU,
// refreshed every second from the daemon's control socket. Render is pure
// (a status document and a terminal size in, the screen's lines out) and
// tested against golden screens; Run only draws those lines with tcell.
package top

import (
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/gpu-telemetry/gpu-telemetry/live"
)

// MinWidth and MinHeight are the smallest terminal laid out in full; a
// smaller one gets what fits, cut, never wrapped.
const (
	MinWidth  = 80
	MinHeight = 24
)

// segment is one piece of a line; when a line is too wide the segments with
// the highest drop rank go first.
type segment struct {
	text string
	drop int // 0: never dropped (cut at the end instead); higher drops first
}

// fit joins the segments that fit in width, dropping the highest ranks
// first, and cuts the result to width.
func fit(width int, segs ...segment) string {
	for {
		total, worst, at := 0, 0, -1
		for i, s := range segs {
			total += utf8.RuneCountInString(s.text)
			if s.drop > worst {
				worst, at = s.drop, i
			}
		}
		if total <= width || at < 0 {
			break
		}
		segs = append(segs[:at:at], segs[at+1:]...)
	}
	var b strings.Builder
	for _, s := range segs {
		b.WriteString(s.text)
	}
	return cut(b.String(), width)
}

// cut shortens s to at most width runes.
func cut(s string, width int) string {
	if utf8.RuneCountInString(s) <= width {
		return s
	}
	r := []rune(s)
	return string(r[:max(width, 0)])
}

// bar draws value/limit as [####----] of width cells (brackets included).
func bar(value, limit float64, width int) string {
	inner := width - 2
	if inner < 1 {
		return ""
	}
	n := 0
	if limit > 0 {
		n = int(value/limit*float64(inner) + 0.5)
	}
	n = min(max(n, 0), inner)
	return "[" + strings.Repeat("#", n) + strings.Repeat("-", inner-n) + "]"
}

// Render lays out the screen for a document at width x height. err, when
// not nil, says why the document is old or missing (the daemon did not
// answer); fetched is when d was fetched.
func Render(d *live.Doc, err error, fetched time.Time, width, height int) []string {
	if width < 1 || height < 1 {
		return nil
	}
	var lines []string
	footer := "q quit"
	if d != nil {
		footer += "  updated " + d.Time.In(fetched.Location()).Format("15:04:05")
	}
	if err != nil {
		// The whole reason, wrapped over the last lines, never cut at the
		// terminal's width.
		footer = "daemon not answering (q quit): " + err.Error()
	}
	if d == nil {
		lines = append(lines, cut("gpu-telemetry top: waiting for the daemon", width))
		return finish(lines, footer, width, height)
	}
	lines = append(lines, hostLines(d, width)...)
	barW := 12
	if width >= 160 {
		barW = 22
	}
	// Full blocks (3 lines per GPU) when they fit, else one line per GPU.
	room := height - len(lines) - 1
	full := len(d.GPUs)*3 <= room
	for i, g := range d.GPUs {
		var block []string
		if full {
			block = gpuBlock(g, d.Time, width, barW)
		} else {
			block = []string{gpuLine(g, d.Time, width)}
		}
		if len(lines)+len(block) > height-1 {
			lines = append(lines, cut("... "+strconv.Itoa(len(d.GPUs)-i)+" more GPUs: enlarge the terminal", width))
			break
		}
		lines = append(lines, block...)
	}
	return finish(lines, footer, width, height)
}

// finish pads the screen to height lines of width with the footer last.
// A footer longer than the width is wrapped over up to a third of the
// screen.
func finish(lines []string, footer string, width, height int) []string {
	foot := wrap(footer, width, max(height/3, 1))
	if len(lines) > height-len(foot) {
		lines = lines[:max(height-len(foot), 0)]
	}
	for len(lines) < height-len(foot) {
		lines = append(lines, "")
	}
	lines = append(lines, foot...)
	lines = lines[:min(len(lines), height)]
	for i, l := range lines {
		if n := utf8.RuneCountInString(l); n < width {
			lines[i] = l + strings.Repeat(" ", width-n)
		}
	}
	return lines
}

// wrap breaks s into lines of at most width runes, at spaces where it can,
// at most n lines (the last one cut).
func wrap(s string, width, n int) []string {
	var out []string
	r := []rune(s)
	for len(r) > width && len(out) < n-1 {
		brk := width
		for i := width; i > width/2; i-- {
			if r[i] == ' ' {
				brk = i
				break
			}
		}
		out = append(out, string(r[:brk]))
		r = []rune(strings.TrimLeft(string(r[brk:]), " "))
	}
	return append(out, cut(string(r), width))
}

func hostLines(d *live.Doc, width int) []string {
	h := d.Host
	c := h.Cadence
	up := time.Duration(h.UptimeS * float64(time.Second)).Truncate(time.Second)
	// The pacer shows on narrow screens too once it stretched or skipped.
	skips, _ := h.Counter(live.CounterBusySkips) // absent: shown n/a, the pacer not forced in
	pacer := segment{"  nvml level " + strconv.Itoa(h.Pacer.Level) + " skips " + h.CounterText(live.CounterBusySkips), 5}
	if h.Pacer.Level > 0 || skips > 0 {
		pacer.drop = 1
	}
	l1 := fit(width,
		segment{"gpu-telemetry " + h.Version, 0},
		segment{"  up " + up.String(), 2},
		segment{"  driver " + h.Driver, 3},
		segment{"  interval " + live.Millis(h.IntervalS), 4},
		segment{"  period " + live.Millis(c.MeanPeriodS) + "/" + live.Millis(c.P99PeriodS) + " p99", 1},
		segment{"  overruns " + h.CounterText(live.CounterTickOverruns), 1},
		pacer,
	)
	lost := uint64(0)
	for _, k := range h.Counters {
		if k.Loss {
			lost += k.Value
		}
	}
	l2 := fit(width,
		segment{"rows " + h.CounterText(live.CounterRowsWritten) + " dropped " + h.CounterText(live.CounterRowsDropped), 0},
		segment{"  disk " + h.Disk, 0},
		segment{"  kmsg " + h.Kmsg, 3},
		segment{"  events " + h.NVMLEvents, 4},
		segment{"  lost work " + strconv.FormatUint(lost, 10), 2},
	)
	inc := "last incident: none"
	if h.LastIncident != nil {
		inc = "last incident: " + h.LastIncident.Time.In(d.Time.Location()).Format("15:04:05") + " GPU " +
			strconv.Itoa(h.LastIncident.GPU) + " " + h.LastIncident.Reason
	}
	return []string{l1, l2, cut(inc, width), ""}
}

// stateText is the GPU's state in capitals when it is not ok.
func stateText(g live.GPUDoc, now time.Time) string {
	t := live.StateText(g, now)
	if g.State == "ok" {
		return t
	}
	return strings.ToUpper(g.State) + strings.TrimPrefix(t, g.State)
}

func gpuBlock(g live.GPUDoc, now time.Time, width, barW int) []string {
	head := fit(width,
		segment{"GPU " + strconv.Itoa(g.Index) + " ", 0},
		segment{stateText(g, now), 0},
		segment{"  " + g.Name, 2},
		segment{"  " + g.BusID, 3},
	)
	if g.State != "ok" || g.SampleTime == nil {
		why := "  no readings: not answering"
		if g.SampleTime != nil {
			why += " (last sample " + g.SampleTime.In(now.Location()).Format("15:04:05") + ")"
		}
		return []string{head, cut(why, width), cut(eventText(g, now), width), cut("  "+live.HealthText(g), width)}
	}
	fans := ""
	for i, f := range g.Fans {
		fans += " " + live.OptUint(f["speed_pct"], "%")
		if i == 0 {
			fans = "  fan" + fans
		}
	}
	r := g.Reading
	pw, _ := r("power_w").Num() // absent: 0, an empty bar (as with no limit)
	pl, _ := r("power_limit_w").Num()
	l2 := fit(width,
		segment{"  " + r("temperature_c").Text("C"), 0},
		segment{" mem " + r("memory_temperature_c").Text("C"), 4},
		segment{fans, 3},
		segment{"  pwr " + bar(pw, pl, barW) + " " + r("power_w").Format(0, "") + "/" + r("power_limit_w").Format(0, "") + "W", 0},
		segment{" enf " + r("enforced_limit_w").Format(0, "") + "W", 5},
		segment{"  clk " + r("graphics_clock_mhz").Text("") + "/" + r("memory_clock_mhz").Text("") + "MHz", 2},
		segment{"  P" + r("pstate").Text(""), 6},
	)
	gu, _ := r("gpu_util_pct").Num()
	mu, _ := r("memory_util_pct").Num()
	mem := "n/a"
	if used, ok := r("memory_used_bytes").Num(); ok {
		mem = strconv.FormatFloat(used/(1<<30), 'f', 1, 64)
		if total, ok := r("memory_total_bytes").Num(); ok {
			mem += "/" + strconv.FormatFloat(total/(1<<30), 'f', 1, 64)
		}
		mem += "G"
	}
	thr := "n/a"
	if names := r("throttle_reasons").Names(); names != nil {
		thr = "-"
		if len(names) > 0 {
			thr = strings.Join(names, ",")
		}
	}
	flags := "-"
	if f := live.RecentFlags(g, now, time.Minute); len(f) > 0 {
		flags = strings.Join(f, ",")
	}
	l3 := fit(width,
		segment{"  gpu " + bar(gu, 100, barW) + " " + r("gpu_util_pct").Text("%"), 0},
		segment{"  mem " + bar(mu, 100, barW) + " " + r("memory_util_pct").Text("%"), 3},
		segment{"  vram " + mem, 2},
		segment{"  thr " + thr, 1},
		segment{"  flags " + flags, 1},
		segment{eventText(g, now), 4},
	)
	return []string{head, l2, l3, cut("  "+live.HealthText(g), width)}
}

// eventText is the last Xid (or recovery action) in a few words.
func eventText(g live.GPUDoc, now time.Time) string {
	s := ""
	if x := g.LastXid; x != nil {
		s += "  Xid " + strconv.FormatUint(x.Code, 10) + " " + x.Time.In(now.Location()).Format("15:04:05") + " " + x.Name
	}
	if r := g.LastRecovery; r != nil {
		s += "  recovery " + strconv.FormatUint(r.Code, 10) + " " + r.Name
	}
	return s
}

// gpuLine is a GPU in one line, for terminals too short for blocks.
func gpuLine(g live.GPUDoc, now time.Time, width int) string {
	if g.State != "ok" || g.SampleTime == nil {
		return fit(width, segment{"GPU " + strconv.Itoa(g.Index) + " " + stateText(g, now), 0}, segment{eventText(g, now), 1})
	}
	health := ""
	if g.Health != nil && g.Health.Verdict != "ok" {
		health = "  health " + strings.ToUpper(g.Health.Verdict)
	}
	return fit(width,
		segment{"GPU " + strconv.Itoa(g.Index) + " ok", 0},
		segment{health, 0},
		segment{"  " + g.Reading("temperature_c").Text("C"), 0},
		segment{"  " + g.Reading("power_w").Format(0, "") + "/" + g.Reading("power_limit_w").Format(0, "") + "W", 0},
		segment{"  util " + g.Reading("gpu_util_pct").Text("%"), 0},
		segment{"  " + g.Reading("graphics_clock_mhz").Text("MHz"), 2},
		segment{"  flags " + strings.Join(live.RecentFlags(g, now, time.Minute), ","), 3},
		segment{eventText(g, now), 4},
	)
}
