// Package top is `gpu-telemetry top`: a full-screen live view of every GPU,
// refreshed every second from a source of status documents (the daemon's
// control socket, or a remote host's). Each view (app.go's View, one file
// each: overview, detail, procs, events, help) renders a Model at a
// terminal size to the screen's lines and their severity, keeping only its
// own scroll position and sort, and is tested against golden screens; App
// takes the keys and the documents, and Run only draws App's lines with
// tcell. This file is the overview's layout.
package top

import (
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/gpu-telemetry/gpu-telemetry/action"
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

// Screen is one drawn screen: its lines, and where the scrolled list of
// GPUs stands.
type Screen struct {
	Lines []string
	// Scroll is the first GPU of the scrolled list on the screen: the
	// position asked for, held so that the last page is full. Page is how
	// many of the scrolled GPUs are on the screen (what PgUp and PgDn move
	// by). Both are 0 when every GPU fits.
	Scroll, Page int
}

// Render is the overview alone on a screen of width x height with a
// plain footer ("q quit  updated ..."), scrolled to the scroll'th GPU of
// those that do not fit (see layout): the overview's layout without the
// frame of App.Screen, which the golden screens of issue 35 pin. err, when not
// nil, says why the document is old or missing (the daemon did not
// answer); fetched is when d was fetched.
func Render(d *live.Doc, err error, fetched time.Time, width, height, scroll int) Screen {
	if width < 1 || height < 1 {
		return Screen{}
	}
	footer := "q quit"
	if d != nil {
		footer += "  updated " + d.Time.In(fetched.Location()).Format("15:04:05")
	}
	if err != nil {
		// The whole reason, wrapped over the last lines, never cut at the
		// terminal's width.
		footer = "daemon not answering (q quit): " + err.Error()
	}
	foot := wrap(footer, width, max(height/3, 1))
	if d == nil {
		return Screen{Lines: finish([]string{cut("gpu-telemetry top: waiting for the daemon", width)}, foot, width, height)}
	}
	body, sc := overviewBody(d, nil, width, height-len(foot), scroll)
	sc.Lines = finish(body, foot, width, height)
	return sc
}

// overviewBody is the overview's lines for d in room lines of width,
// scrolled to the scroll'th GPU of those that do not fit; m, when not nil,
// gives the sparklines of each GPU's recent readings.
func overviewBody(d *live.Doc, m *Model, width, room, scroll int) ([]string, Screen) {
	barW := 12
	if width >= 160 {
		barW = 22
	}
	es := make([]entry, len(d.GPUs))
	for i, g := range d.GPUs {
		es[i] = newEntry(g, d.Time, width, barW, m)
	}
	// Failing GPUs first, then critical ones, each in the document's order.
	slices.SortStableFunc(es, func(a, b entry) int { return a.rank - b.rank })
	pinned := 0
	for pinned < len(es) && es[pinned].rank < rankOther {
		pinned++
	}
	return layout(hostLines(d, width), es, pinned, room, scroll, width)
}

// layout places the host lines and the GPUs in room lines, taking the first
// arrangement that fits:
//
//  1. every GPU as a block of lines;
//  2. the pinned GPUs (es[:pinned]: failing or critical) as blocks, the
//     others one line each;
//  3. every GPU on one line;
//  4. the pinned GPUs as blocks, the others one line each in a scrolled
//     window of at least 3 lines (a GPU between the lines that say how many
//     are above and below);
//  5. the pinned GPUs one line each, the others scrolled, with the host
//     lines dropped one by one (the blank line, rows and disk, the last
//     incident, the title) to make room;
//  6. every GPU one line each in a scrolled window, pinned ones first: a
//     screen too small for the pinned GPUs alone, where the lines above
//     and under the window say how many of the hidden GPUs are failing or
//     critical.
//
// A pinned GPU is never scrolled away but in 6: its state and last Xid
// (the last text of its line to drop) are on the screen.
func layout(host []string, es []entry, pinned, room, scroll, width int) ([]string, Screen) {
	trouble, rest := es[:pinned], es[pinned:]
	tb, tl, rl := blocks(trouble), lines(trouble), lines(rest)
	fits := func(parts ...[]string) bool {
		n := 0
		for _, p := range parts {
			n += len(p)
		}
		return n <= room
	}
	if all := append(tb[:len(tb):len(tb)], blocks(rest)...); fits(host, all) {
		return slices.Concat(host, all), Screen{}
	}
	if fits(host, tb, rl) {
		return slices.Concat(host, tb, rl), Screen{}
	}
	if fits(host, tl, rl) {
		return slices.Concat(host, tl, rl), Screen{}
	}
	least := min(len(rest), 3)
	if n := room - len(host) - len(tb); n >= least {
		win, sc := window(rest, scroll, n, width)
		return slices.Concat(host, tb, win), sc
	}
	for h := len(host); h >= 0; h-- {
		if n := room - h - len(tl); n >= least {
			win, sc := window(rest, scroll, n, width)
			return slices.Concat(keepHost(host, h), tl, win), sc
		}
	}
	return window(es, scroll, room, width)
}

// keepHost is the h most telling of the host lines (title, rows and disk,
// last incident, blank), in their order: the blank line goes first, then
// rows and disk, then the last incident.
func keepHost(host []string, h int) []string {
	var out []string
	for i, l := range host {
		if slices.Index(hostRank, i) < h {
			out = append(out, l)
		}
	}
	return out
}

// hostRank is the host lines' indices, the most telling first.
var hostRank = []int{0, 2, 1, 3}

// window shows es one line each in n lines from the from'th: a line saying
// how many are above when some are, and one saying how many are below when
// some are (with how many of those are failing or critical). from is held
// so that the last page is full. Under 3 lines there is no room for those
// lines: the GPUs from the from'th fill it.
func window(es []entry, from, n, width int) ([]string, Screen) {
	if len(es) <= n {
		return lines(es), Screen{Page: len(es)}
	}
	if n < 3 {
		from = min(max(from, 0), len(es)-max(n, 0))
		return lines(es[from : from+max(n, 0)]), Screen{Scroll: from, Page: max(n, 0)}
	}
	// The last page: the last n-1 GPUs under the line above them.
	from = min(max(from, 0), len(es)-(n-1))
	var up, down []string
	if from > 0 {
		up = []string{hidden(es[:from], "above", "Up/PgUp", width)}
	}
	shown := n - len(up)
	if from+shown < len(es) {
		shown--
		down = []string{hidden(es[from+shown:], "below", "Down/PgDn", width)}
	}
	return slices.Concat(up, lines(es[from:from+shown]), down), Screen{Scroll: from, Page: shown}
}

// hidden is the line that stands for the GPUs es scrolled off the screen
// (where: "above" or "below"), naming the keys that bring them back.
func hidden(es []entry, where, keys string, width int) string {
	trouble := 0
	for _, e := range es {
		if e.rank < rankOther {
			trouble++
		}
	}
	what := "-- " + strconv.Itoa(len(es)) + " more GPU"
	if len(es) > 1 {
		what += "s"
	}
	t := ""
	if trouble > 0 {
		t = ", " + strconv.Itoa(trouble) + " failing or critical"
	}
	return fit(width, segment{what + " " + where + t, 0}, segment{" (" + keys + ")", 1}, segment{" --", 2})
}

func blocks(es []entry) []string {
	var out []string
	for _, e := range es {
		out = append(out, e.block...)
	}
	return out
}

func lines(es []entry) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.line
	}
	return out
}

// finish pads the screen to height lines of width with the footer's lines
// last.
func finish(lines, foot []string, width, height int) []string {
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

// The ranks of GPUs on the screen, the first first: failing ones (hung,
// lost, failing: no readings), then critical ones (answering, but with a
// critical reason of live.CheckGPU, an Xid or a recovery action in the
// last 10 minutes, or a critical hardware health verdict), then the rest.
const (
	rankFailing = iota
	rankCritical
	rankOther
)

func rankOf(g live.GPUDoc, now time.Time) int {
	switch g.State {
	case live.StateHung.String(), live.StateLost.String(), live.StateFailing.String():
		return rankFailing
	}
	crit, _ := live.CheckGPU(g, now)
	// "critical" is the worst of anomaly's health levels.
	if len(crit) > 0 || g.Health != nil && g.Health.Verdict == "critical" {
		return rankCritical
	}
	return rankOther
}

// entry is one GPU as the screen can show it: as a block of lines, or on
// one line.
type entry struct {
	rank  int
	block []string
	line  string
}

func newEntry(g live.GPUDoc, now time.Time, width, barW int, m *Model) entry {
	rank := rankOf(g, now)
	block, line := gpuBlock(g, rank, now, width, barW), gpuLine(g, rank, now, width)
	if s := m.sparks(g, width-8); s != "" {
		block = append(block, cut("  "+s, width))
	}
	if s := m.sparks(g, (width-80)*2/3); s != "" {
		line = fit(width, segment{line, 0}, segment{"  " + s, 1})
	}
	return entry{rank, block, line}
}

// stateSegs are the GPU's state: the word (in capitals when it is not ok;
// CRITICAL for an answering GPU of rankCritical) that is never dropped, and
// what follows it in live.StateText (how long it hangs, and where; since
// when it is lost; why it fails).
func stateSegs(g live.GPUDoc, rank int, now time.Time, detail int) []segment {
	word := strings.ToUpper(g.State)
	switch {
	case g.State == live.StateAnswering.String() && rank == rankCritical:
		word = "CRITICAL"
	case g.State == live.StateAnswering.String():
		word = g.State
	}
	return []segment{
		{"GPU " + strconv.Itoa(g.Index) + " " + word, 0},
		{strings.TrimPrefix(live.StateText(g, now), g.State), detail},
	}
}

// troubleSegs say what went wrong on a GPU in trouble: its last Xid (the
// code last of all to drop, then when, then its name; "no Xid" said of a GPU
// that is not answering), its last recovery action, health (when not
// empty), and its flags of the last minute.
func troubleSegs(g live.GPUDoc, now time.Time, health string) []segment {
	var segs []segment
	if g.State != live.StateAnswering.String() {
		segs = []segment{{"  no Xid", 2}}
	}
	if x := g.LastXid; x != nil {
		segs = []segment{
			{"  Xid " + strconv.FormatUint(x.Code, 10), 0},
			{" " + x.Time.In(now.Location()).Format("15:04:05"), 3},
			{" " + x.Name, 4},
		}
	}
	if r := g.LastRecovery; r != nil {
		segs = append(segs, segment{"  recovery " + strconv.FormatUint(r.Code, 10), 1}, segment{" " + r.Name, 4})
	}
	if health != "" {
		segs = append(segs, segment{health, 1})
	}
	if f := live.RecentFlags(g, now, time.Minute); len(f) > 0 {
		segs = append(segs, segment{"  flags " + strings.Join(f, ","), 1})
	}
	if g.FanGuard.Holding() {
		segs = append(segs, segment{"  fan guard " + g.FanGuard.Text, 1})
	}
	return segs
}

func gpuBlock(g live.GPUDoc, rank int, now time.Time, width, barW int) []string {
	head := fit(width, append(stateSegs(g, rank, now, 0),
		segment{"  " + g.Name, 2},
		segment{"  " + g.BusID, 3},
	)...)
	health := cut("  "+live.HealthText(g)+actionText(g), width)
	if g.State != live.StateAnswering.String() || g.SampleTime == nil {
		why := "  no readings: not answering"
		if g.SampleTime != nil {
			why += " (last sample " + g.SampleTime.In(now.Location()).Format("15:04:05") + ")"
		}
		return []string{head, fit(width, troubleSegs(g, now, "")...), cut(why, width), health}
	}
	// Each fan's speed against the firmware's target, as status shows them.
	fans := ""
	for i, f := range g.Fans {
		fans += " " + live.OptUint(f["speed_pct"], "%") + "/" + live.OptUint(f["target_pct"], "%")
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
	l3 := []segment{
		{"  gpu " + bar(gu, 100, barW) + " " + r("gpu_util_pct").Text("%"), 0},
		{"  mem " + bar(mu, 100, barW) + " " + r("memory_util_pct").Text("%"), 3},
		{"  vram " + mem, 2},
		{"  thr " + thr, 1},
	}
	if rank == rankCritical {
		// What went wrong comes first, under the head: the last Xid,
		// recovery action and flags, then the health line.
		block := []string{head}
		if segs := troubleSegs(g, now, ""); len(segs) > 0 {
			block = append(block, fit(width, segs...))
		}
		return append(block, health, l2, fit(width, l3...))
	}
	flags := "-"
	if f := live.RecentFlags(g, now, time.Minute); len(f) > 0 {
		flags = strings.Join(f, ",")
	}
	l3 = append(l3, segment{"  flags " + flags, 1}, segment{eventText(g, now), 4})
	return []string{head, l2, fit(width, l3...), health}
}

// actionText is the GPU's repair action in a few words ("  action
// reboot"), "" for none: the reasons are in status.
func actionText(g live.GPUDoc) string {
	if g.Action.Name == action.None {
		return ""
	}
	return "  action " + g.Action.Name.String()
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

// gpuLine is a GPU in one line, for terminals too short for blocks. A GPU
// in trouble keeps its state and what went wrong; its readings drop first.
func gpuLine(g live.GPUDoc, rank int, now time.Time, width int) string {
	health := ""
	if g.Health != nil && g.Health.Verdict != "ok" {
		health = "  health " + live.VerdictText(g.Health.Verdict)
	}
	health += actionText(g)
	if rank < rankOther || g.State != live.StateAnswering.String() || g.SampleTime == nil {
		segs := append(stateSegs(g, rank, now, 2), troubleSegs(g, now, health)...)
		if g.State == live.StateAnswering.String() {
			segs = append(segs,
				segment{"  " + g.Reading("temperature_c").Text("C"), 5},
				segment{"  " + g.Reading("power_w").Format(0, "") + "/" + g.Reading("power_limit_w").Format(0, "") + "W", 6},
				segment{"  util " + g.Reading("gpu_util_pct").Text("%"), 5},
			)
		}
		return fit(width, segs...)
	}
	flags := "-"
	if f := live.RecentFlags(g, now, time.Minute); len(f) > 0 {
		flags = strings.Join(f, ",")
	}
	return fit(width,
		segment{"GPU " + strconv.Itoa(g.Index) + " ok", 0},
		segment{health, 0},
		segment{"  " + g.Reading("temperature_c").Text("C"), 0},
		segment{"  " + g.Reading("power_w").Format(0, "") + "/" + g.Reading("power_limit_w").Format(0, "") + "W", 0},
		segment{"  util " + g.Reading("gpu_util_pct").Text("%"), 0},
		segment{"  " + g.Reading("graphics_clock_mhz").Text("MHz"), 2},
		segment{"  flags " + flags, 3},
		segment{eventText(g, now), 4},
	)
}
