package report

import (
	"fmt"
	"html"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"
)

// The charts are SVG written here directly, not through a plotting library:
// the report needs one shared time axis across panels and GPUs, gaps left
// as gaps, bands for throttle reasons and markers across every panel, all
// as plain inline SVG with no script and no font to fetch. The libraries
// that emit SVG (gonum/plot, go-chart) either embed fonts or script, or
// would need the same amount of code to bend to this layout.

// Chart geometry, in SVG user units.
const (
	svgWidth   = 1200
	plotLeft   = 96  // room for the y labels and throttle reason names
	plotRight  = 70  // room for a right axis and legends
	panelH     = 110 // one chart panel
	panelGap   = 26  // between panels: the panel title sits here
	noteH      = 18  // the line above the chart: where its data starts, and why
	markerRowH = 12  // one row of marker numbers in the strip above the panels
	keyTitleH  = 18  // the marker key's title below the time axis
	keyRowH    = 13  // one marker in the key
	keyChars   = 180 // a key line's label is cut after this many bytes (the table has it whole)
	axisH      = 34  // the time axis below
	bandRowH   = 13  // one throttle reason band
	plotWidth  = svgWidth - plotLeft - plotRight
	maxColumns = plotWidth // at most about two points per pixel column
)

// xmap maps times of the shared window to x.
type xmap struct{ from, to time.Time }

func (m xmap) x(t time.Time) float64 {
	span := m.to.Sub(m.from).Seconds()
	if span <= 0 {
		return plotLeft
	}
	return plotLeft + plotWidth*t.Sub(m.from).Seconds()/span
}

// axis is the charts' shared time axis: the window, narrowed to the rows
// of all GPUs together when they cover less of it (the logger started or
// stopped inside the window), so the charts use their width.
func (rep *Report) axis() xmap {
	xm := xmap{rep.From, rep.To}
	var first, last time.Time
	for _, g := range rep.GPUs {
		if len(g.Rows) == 0 {
			continue
		}
		if first.IsZero() || g.Rows[0].Time.Before(first) {
			first = g.Rows[0].Time
		}
		if t := g.Rows[len(g.Rows)-1].Time; t.After(last) {
			last = t
		}
	}
	if first.After(xm.from) {
		xm.from = first
	}
	if inc := rep.Incident.Time.Add(time.Second); last.Before(xm.to) {
		xm.to = last
		if xm.to.Before(inc) {
			xm.to = inc // the incident stays in view
		}
	}
	return xm
}

// writeSVG draws one GPU: the marker strip, one panel per reading, the
// throttle bands and the time axis, all on the report's window.
func (rep *Report) writeSVG(b *strings.Builder, g GPUData) {
	fans := 0
	for _, r := range g.Rows {
		fans = max(fans, len(r.Fans))
	}
	ps := panels(fans)
	reasons := throttleNames(g.Rows)
	bandH := max(bandRowH*len(reasons), bandRowH)
	xm := rep.axis()
	ms, stripRows := rep.chartMarkers(g.Index, xm)
	stripTop := noteH
	stripH := 8 + markerRowH*max(stripRows, 1)
	keyH := 0
	if len(ms) > 0 {
		keyH = keyTitleH + keyRowH*len(ms)
	}
	height := stripTop + stripH + len(ps)*(panelH+panelGap) + panelGap + bandH + axisH + keyH
	fmt.Fprintf(b, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" font-family=\"sans-serif\" font-size=\"11\">\n",
		svgWidth, height, svgWidth, height)
	b.WriteString("<rect x=\"0\" y=\"0\" width=\"100%\" height=\"100%\" fill=\"#ffffff\"/>\n")
	fmt.Fprintf(b, "<text x=\"%d\" y=\"13\" font-size=\"11\" fill=\"#444\">%s</text>\n", plotLeft, html.EscapeString(rep.dataNote(g)))
	top := stripTop + stripH
	for _, p := range ps {
		top += panelGap
		drawPanel(b, p, g.Rows, xm, top)
		top += panelH
	}
	top += panelGap
	drawBands(b, g.Rows, reasons, xm, top, bandH)
	bottom := top + bandH
	drawAxis(b, xm, rep.Incident.Time, stripTop, bottom, rep.Loc)
	drawMarkers(b, rep, ms, stripTop, bottom)
	drawMarkerKey(b, rep, ms, bottom+axisH)
	b.WriteString("</svg>\n")
}

// drawBands draws the throttle reasons panel: one row per reason, a band
// for each stretch of time it was set.
func drawBands(b *strings.Builder, rows []Row, reasons []string, xm xmap, top, height int) {
	fmt.Fprintf(b, "<text x=\"%d\" y=\"%d\" font-weight=\"bold\">Throttle reasons</text>\n", plotLeft, top-8)
	fmt.Fprintf(b, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"#fafafa\" stroke=\"#bbb\"/>\n", plotLeft, top, plotWidth, height)
	for i, name := range reasons {
		y := top + i*bandRowH
		fmt.Fprintf(b, "<text x=\"%d\" y=\"%d\" text-anchor=\"end\" font-size=\"10\">%s</text>\n", plotLeft-4, y+10, html.EscapeString(name))
		for _, s := range bands(rows, name) {
			x0, x1 := xm.x(s[0]), xm.x(s[1])
			fmt.Fprintf(b, "<rect x=\"%.1f\" y=\"%d\" width=\"%.1f\" height=\"%d\" fill=\"%s\" opacity=\"0.8\"><title>%s %s</title></rect>\n",
				x0, y+1, math.Max(x1-x0, 1.5), bandRowH-2, palette[(i+3)%len(palette)], html.EscapeString(name), html.EscapeString(fmtDur(s[1].Sub(s[0]))))
		}
	}
	if len(reasons) == 0 {
		fmt.Fprintf(b, "<text x=\"%d\" y=\"%d\" font-size=\"10\" fill=\"#666\">none in the window</text>\n", plotLeft+4, top+10)
	}
}

// throttleNames lists the throttle reasons set in any row, sorted.
func throttleNames(rows []Row) []string {
	seen := map[string]bool{}
	for _, r := range rows {
		for _, n := range strings.Split(r.Reasons, "|") {
			if n != "" && n != "None" {
				seen[n] = true
			}
		}
	}
	var out []string
	for n := range seen {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// bands returns the stretches of time during which reason name was set: a
// stretch ends at the first row without it, or at a gap.
func bands(rows []Row, name string) [][2]time.Time {
	var out [][2]time.Time
	var start, last time.Time
	on := false
	for _, r := range rows {
		has := false
		for _, n := range strings.Split(r.Reasons, "|") {
			has = has || n == name
		}
		if on && (!has || r.Gap > 0) {
			end := r.Time
			if r.Gap > 0 {
				end = last
			}
			out = append(out, [2]time.Time{start, end})
			on = false
		}
		if has && !on {
			start, on = r.Time, true
		}
		last = r.Time
	}
	if on {
		out = append(out, [2]time.Time{start, last})
	}
	return out
}

// drawAxis writes the time axis: ticks at a round step, labelled with the
// offset from the incident, and the clock time of the first tick.
func drawAxis(b *strings.Builder, xm xmap, inc time.Time, top, bottom int, loc *time.Location) {
	span := xm.to.Sub(xm.from).Seconds()
	step := timeStep(span / 12)
	first := math.Ceil(xm.from.Sub(inc).Seconds()/step) * step
	for s := first; s <= xm.to.Sub(inc).Seconds()+1e-9; s += step {
		t := inc.Add(time.Duration(s * float64(time.Second)))
		x := xm.x(t)
		fmt.Fprintf(b, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#eeeeee\"/>\n", x, top, x, bottom)
		label := tickLabel(s, step)
		fmt.Fprintf(b, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\" font-size=\"10\">%s</text>\n", x, bottom+13, label)
	}
	fmt.Fprintf(b, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\" font-size=\"11\">seconds from the incident at %s</text>\n",
		plotLeft+plotWidth/2, bottom+28, html.EscapeString(fmtTime(inc, loc)))
}

// timeStep rounds a tick step in seconds up to a round one: 1, 2 or 5 times
// a power of ten under a minute, whole minutes and hours above.
func timeStep(raw float64) float64 {
	if raw < 60 {
		return niceStep(raw)
	}
	for _, s := range []float64{60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200} {
		if s >= raw {
			return s
		}
	}
	return 86400 * math.Ceil(raw/86400)
}

// tickLabel writes an axis offset in seconds, or in minutes and hours
// once the ticks are a minute or more apart ("-30s", "+5s", "-2h30m").
func tickLabel(s, step float64) string {
	sign := ""
	switch {
	case s > 0:
		sign = "+"
	case s < 0:
		sign = "-"
	}
	a := math.Abs(s)
	if step < 60 || a == 0 {
		return sign + strconv.FormatFloat(a, 'f', -1, 64) + "s"
	}
	d := time.Duration(a) * time.Second
	h, m := int(d/time.Hour), int(d%time.Hour/time.Minute)
	switch {
	case h == 0:
		return sign + strconv.Itoa(m) + "m"
	case m == 0:
		return sign + strconv.Itoa(h) + "h"
	}
	return sign + strconv.Itoa(h) + "h" + pad2(m) + "m"
}

// dataNote says where the chart's data starts and why, against the window
// asked for: the logger started, the GPU joined, or a gap before it.
func (rep *Report) dataNote(g GPUData) string {
	asked := "window asked: " + rep.since(rep.From) + " .. " + rep.since(rep.To)
	if len(g.Rows) == 0 {
		return "No rows in the window; " + asked
	}
	first := g.Rows[0].Time
	at := "Data from " + rep.since(first) + " (" + rep.clock(first) + ")"
	if first.Sub(rep.From) < time.Second {
		return at + "; " + asked
	}
	why := "the logger started then (no earlier row of this GPU)"
	switch {
	case g.Earlier:
		why = "no rows of this GPU between the window's start and then (logger down, GPU hung or disk paused)"
	case rep.firstRow().Before(first.Add(-time.Second)):
		why = "GPU " + strconv.Itoa(g.Index) + " joined then (its first row, after the other GPUs')"
	}
	return at + ": " + why + "; " + asked
}

// firstRow is the earliest row of any GPU.
func (rep *Report) firstRow() time.Time {
	var t time.Time
	for _, g := range rep.GPUs {
		if len(g.Rows) > 0 && (t.IsZero() || g.Rows[0].Time.Before(t)) {
			t = g.Rows[0].Time
		}
	}
	return t
}
