package report

import (
	"fmt"
	"html"
	"io"
	"math"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/reading"
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

// series is one line of a panel.
type series struct {
	name  string
	color string
	dash  string // stroke-dasharray, "" for solid
	get   func(Row) reading.Opt[float64]
	right bool // drawn on the panel's right axis
}

// panel is one chart of a GPU.
type panel struct {
	title  string
	unit   string
	series []series
	// minSpan is the least y-range shown: a healthy GPU's noise (55 +- 1 C,
	// 35 +- 1 % fan, 380 +- 10 W) fills a tenth of the panel or less, so
	// it looks flat, as it is, and a real change still fills it.
	minSpan float64
}

var palette = []string{"#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22"}

// panels returns the charts of a GPU; fans depend on its fan count.
func panels(fans int) []panel {
	fan := panel{title: "Fans: speed (solid) against target (dashed)", unit: "%", minSpan: 20}
	for i := 0; i < fans; i++ {
		i := i
		c := palette[i%len(palette)]
		fan.series = append(fan.series,
			series{name: "fan" + strconv.Itoa(i) + " speed", color: c, get: func(r Row) reading.Opt[float64] { return fanAt(r, i, false) }},
			series{name: "fan" + strconv.Itoa(i) + " target", color: c, dash: "5,3", get: func(r Row) reading.Opt[float64] { return fanAt(r, i, true) }})
	}
	out := []panel{
		{title: "Temperature", unit: "C", minSpan: 20, series: []series{
			{name: "GPU", color: "#d62728", get: func(r Row) reading.Opt[float64] { return r.Temp }},
			{name: "memory", color: "#ff7f0e", get: func(r Row) reading.Opt[float64] { return r.MemTemp }},
		}},
	}
	if fans > 0 {
		out = append(out, fan)
	}
	return append(out,
		panel{title: "Power against limit and enforced limit", unit: "W", minSpan: 100, series: []series{
			{name: "power", color: "#1f77b4", get: func(r Row) reading.Opt[float64] { return r.Power }},
			{name: "limit", color: "#000000", dash: "6,3", get: func(r Row) reading.Opt[float64] { return r.Limit }},
			{name: "enforced", color: "#7f7f7f", dash: "2,2", get: func(r Row) reading.Opt[float64] { return r.Enforced }},
		}},
		panel{title: "Clocks: graphics and SM", unit: "MHz", minSpan: 300, series: []series{
			{name: "graphics", color: "#2ca02c", get: func(r Row) reading.Opt[float64] { return r.GPUClock }},
			{name: "SM", color: "#9467bd", dash: "4,2", get: func(r Row) reading.Opt[float64] { return r.SMClock }},
		}},
		// The memory clock is ten times the others and moves on its own:
		// a panel of its own, so it neither hides them nor flattens them.
		panel{title: "Memory clock", unit: "MHz", minSpan: 300, series: []series{
			{name: "memory", color: "#8c564b", get: func(r Row) reading.Opt[float64] { return r.MemClock }},
		}},
	)
}

func fanAt(r Row, i int, target bool) reading.Opt[float64] {
	if i >= len(r.Fans) {
		return reading.Opt[float64]{}
	}
	if target {
		return r.Fans[i].Target
	}
	return r.Fans[i].Speed
}

// WriteHTMLFile writes the HTML form of the report to path, through a
// temporary file renamed into place, so a reader never sees half a page.
func (rep *Report) WriteHTMLFile(path string) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".report-*.html")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	rep.htmlDir = filepath.Dir(path)
	defer func() { rep.htmlDir = "" }()
	if err := rep.WriteHTML(tmp); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// link is the path to a file of the log dir as the page links it: relative
// to the page's own directory when WriteHTMLFile knows it, else the log dir
// as given joined with the file.
func (rep *Report) link(rel string) string {
	p := filepath.Join(rep.Dir, rel)
	if rep.htmlDir == "" {
		return p
	}
	abs, err1 := filepath.Abs(p)
	page, err2 := filepath.Abs(rep.htmlDir)
	if err1 != nil || err2 != nil {
		return p
	}
	if r, err := filepath.Rel(page, abs); err == nil {
		return r
	}
	return abs
}

// WriteHTML writes one self-contained page (XHTML-compatible: it parses as
// XML): the incident, SVG charts per GPU on one shared time axis, the
// timeline as a table, peaks and precursors. Nothing is loaded from anywhere.
func (rep *Report) WriteHTML(w io.Writer) error {
	var b strings.Builder
	esc := html.EscapeString
	inc := rep.Incident
	title := "gpu-telemetry report: " + inc.What + " at " + fmtTime(inc.Time, rep.Loc)
	if rep.Headline != "" {
		title = "gpu-telemetry report: " + rep.Headline + " at " + fmtTime(inc.Time, rep.Loc)
	}
	b.WriteString("<!DOCTYPE html>\n<html xmlns=\"http://www.w3.org/1999/xhtml\" lang=\"en\">\n<head>\n<meta charset=\"utf-8\"/>\n<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"/>\n")
	b.WriteString("<title>" + esc(title) + "</title>\n<style>\n" + css + "</style>\n</head>\n<body>\n")
	b.WriteString("<h1>" + esc(title) + "</h1>\n<p>")
	gpu := "all GPUs"
	switch {
	case rep.Board != "":
		gpu = "board " + rep.Board
	case inc.GPU >= 0:
		gpu = "GPU " + strconv.Itoa(inc.GPU)
	}
	b.WriteString(esc(fmt.Sprintf("Incident on %s, began with %s. Window %s .. %s. Log dir %s.", gpu, inc.What, fmtTime(rep.From, rep.Loc), fmtTime(rep.To, rep.Loc), rep.Dir)))
	b.WriteString("</p>\n")
	if len(rep.Files) > 0 {
		b.WriteString("<h2>Snapshots of this incident</h2>\n<ul class=\"files\">\n")
		for _, f := range rep.Files {
			href := (&url.URL{Path: filepath.ToSlash(rep.link(f.Path))}).String()
			b.WriteString("<li>" + esc(strings.TrimSpace(f.label())) + " <a href=\"" + esc(href) + "\">" + esc(f.Path) + "</a> " +
				esc(strings.TrimPrefix(f.describe(rep.Loc), f.Path+" ")) + "</li>\n")
		}
		b.WriteString("</ul>\n")
	}
	if len(rep.Skipped) > 0 {
		b.WriteString("<ul class=\"skipped\">\n")
		for _, s := range rep.Skipped {
			b.WriteString("<li>Skipped: " + esc(s) + "</li>\n")
		}
		b.WriteString("</ul>\n")
	}
	if len(rep.Precursors) > 0 {
		b.WriteString("<h2>Precursors found</h2>\n<ul>\n")
		for _, p := range rep.Precursors {
			b.WriteString("<li>" + esc(p) + "</li>\n")
		}
		b.WriteString("</ul>\n")
	}
	b.WriteString(legendHTML)
	for _, g := range rep.GPUs {
		b.WriteString("<h2>" + esc(g.Name()) + "</h2>\n")
		rep.writeSVG(&b, g)
	}

	b.WriteString("<h2>Timeline</h2>\n<div class=\"scroll\"><table>\n<tr><th>time</th><th>offset</th><th>GPU</th><th>kind</th><th>what</th><th>values</th></tr>\n")
	for _, e := range rep.Timeline {
		g := "-"
		if e.GPU >= 0 {
			g = strconv.Itoa(e.GPU)
		}
		cls := ""
		if e.Marker != "" {
			cls = " class=\"m-" + e.Marker + "\""
		}
		fmt.Fprintf(&b, "<tr%s><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td></tr>\n", cls,
			esc(e.Time.In(rep.Loc).Format("15:04:05.000")), esc(offset(e.Time.Sub(inc.Time))), g, esc(string(e.Kind)), esc(e.What), esc(e.Values))
	}
	b.WriteString("</table></div>\n<h2>Peaks</h2>\n<div class=\"scroll\"><table>\n<tr><th>GPU</th><th>reading</th><th>value</th><th>time</th><th>offset</th></tr>\n")
	for _, p := range rep.Peaks {
		fmt.Fprintf(&b, "<tr><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td></tr>\n", esc(strings.TrimPrefix(p.name(), "gpu")), esc(p.What), esc(p.Value),
			esc(p.Time.In(rep.Loc).Format("15:04:05.000")), esc(offset(p.Time.Sub(inc.Time))))
	}
	b.WriteString("</table></div>\n<p class=\"foot\">Read: " + esc(strings.Join(rep.Read, "; ")) + "</p>\n</body>\n</html>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

const css = `body { font-family: sans-serif; margin: 16px; color: #222; }
h1 { font-size: 20px; } h2 { font-size: 17px; margin-top: 22px; }
table { border-collapse: collapse; font-size: 12px; font-family: monospace; }
td, th { border: 1px solid #ccc; padding: 2px 6px; text-align: left; vertical-align: top; }
tr.m-xid td, tr.m-incident td { background: #fde0e0; }
tr.m-lost td, tr.m-hang td { background: #f3d9f7; }
tr.m-aer td { background: #fff1cc; }
tr.m-flag td { background: #eef4ff; }
.skipped { color: #a00; }
.legend span { display: inline-block; margin-right: 14px; font-size: 13px; }
.foot { color: #666; font-size: 12px; }
svg { display: block; max-width: 100%; height: auto; }
.scroll { overflow-x: auto; max-width: 100%; }
`

// markerColors: one colour per marker kind, on the charts and in the legend.
var markerColors = []struct{ kind, color, label string }{
	{"incident", "#d00000", "incident"},
	{"xid", "#e4572e", "Xid / recovery"},
	{"lost", "#8e44ad", "GPU lost / off the bus"},
	{"hang", "#c71585", "NVML hang"},
	{"aer", "#d4a017", "PCIe AER"},
	{"flag", "#4a78c2", "flag / TDP change"},
}

func markerColor(kind string) string {
	for _, m := range markerColors {
		if m.kind == kind {
			return m.color
		}
	}
	return "#888"
}

var legendHTML = func() string {
	var b strings.Builder
	b.WriteString("<p class=\"legend\">Markers: ")
	for _, m := range markerColors {
		fmt.Fprintf(&b, "<span><svg width=\"14\" height=\"12\" style=\"display:inline\"><rect x=\"5\" y=\"0\" width=\"3\" height=\"12\" fill=\"%s\"/></svg> %s</span>", m.color, html.EscapeString(m.label))
	}
	b.WriteString("<span>Throttle reasons are bands in the bottom panel. Gaps in the data are gaps in the lines.</span></p>\n")
	return b.String()
}()

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
	fmt.Fprintf(b, "<text x=\"%d\" y=\"%d\" font-weight=\"bold\">Throttle reasons</text>\n", plotLeft, top-8)
	fmt.Fprintf(b, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"#fafafa\" stroke=\"#bbb\"/>\n", plotLeft, top, plotWidth, bandH)
	for i, name := range reasons {
		y := top + i*bandRowH
		fmt.Fprintf(b, "<text x=\"%d\" y=\"%d\" text-anchor=\"end\" font-size=\"10\">%s</text>\n", plotLeft-4, y+10, html.EscapeString(name))
		for _, s := range bands(g.Rows, name) {
			x0, x1 := xm.x(s[0]), xm.x(s[1])
			fmt.Fprintf(b, "<rect x=\"%.1f\" y=\"%d\" width=\"%.1f\" height=\"%d\" fill=\"%s\" opacity=\"0.8\"><title>%s %s</title></rect>\n",
				x0, y+1, math.Max(x1-x0, 1.5), bandRowH-2, palette[(i+3)%len(palette)], html.EscapeString(name), html.EscapeString(fmtDur(s[1].Sub(s[0]))))
		}
	}
	if len(reasons) == 0 {
		fmt.Fprintf(b, "<text x=\"%d\" y=\"%d\" font-size=\"10\" fill=\"#666\">none in the window</text>\n", plotLeft+4, top+10)
	}
	bottom := top + bandH
	drawAxis(b, xm, rep.Incident.Time, stripTop, bottom, rep.Loc)
	drawMarkers(b, rep, ms, stripTop, bottom)
	drawMarkerKey(b, rep, ms, bottom+axisH)
	b.WriteString("</svg>\n")
}

// drawPanel draws one chart: frame, y grid with labels, the lines (broken
// at gaps and absent cells) and a legend on the right.
func drawPanel(b *strings.Builder, p panel, rows []Row, xm xmap, top int) {
	fmt.Fprintf(b, "<text x=\"%d\" y=\"%d\" font-weight=\"bold\">%s (%s)</text>\n", plotLeft, top-8, html.EscapeString(p.title), html.EscapeString(p.unit))
	fmt.Fprintf(b, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"#fafafa\" stroke=\"#bbb\"/>\n", plotLeft, top, plotWidth, panelH)
	left, right := yRange(p.series, rows, false, p.minSpan), yRange(p.series, rows, true, p.minSpan)
	drawYAxis(b, left, top, plotLeft-4, "end", true)
	if right.ok {
		drawYAxis(b, right, top, plotLeft+plotWidth+4, "start", false)
	}
	lx := plotLeft + 8
	for _, s := range p.series {
		yr := left
		if s.right {
			yr = right
		}
		d := path(rows, s.get, xm, yr, top)
		if d != "" {
			fmt.Fprintf(b, "<path d=\"%s\" fill=\"none\" stroke=\"%s\" stroke-width=\"1.6\"", d, s.color)
			if s.dash != "" {
				fmt.Fprintf(b, " stroke-dasharray=\"%s\"", s.dash)
			}
			b.WriteString("/>\n")
		}
		// Legend inside the panel's top, left to right.
		fmt.Fprintf(b, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"%s\" stroke-width=\"2\"", lx, top+10, lx+16, top+10, s.color)
		if s.dash != "" {
			fmt.Fprintf(b, " stroke-dasharray=\"%s\"", s.dash)
		}
		b.WriteString("/>\n")
		label := s.name
		if s.right {
			label += " (right)"
		}
		if d == "" {
			label += " (absent)"
		}
		fmt.Fprintf(b, "<text x=\"%d\" y=\"%d\" font-size=\"10\">%s</text>\n", lx+20, top+13, html.EscapeString(label))
		lx += 28 + 6*len(label)
	}
}

// yrange is a panel axis's value range.
type yrange struct {
	lo, hi float64
	ok     bool
}

func (r yrange) y(v float64, top int) float64 {
	return float64(top) + panelH - 4 - (panelH-22)*(v-r.lo)/(r.hi-r.lo)
}

// yRange finds the range of the series on one side, padded and widened to
// at least minSpan (at least 10) so noise and a flat line sit in the middle.
func yRange(ss []series, rows []Row, right bool, minSpan float64) yrange {
	var r yrange
	for _, s := range ss {
		if s.right != right {
			continue
		}
		for _, row := range rows {
			v, ok := s.get(row).Get()
			if !ok {
				continue
			}
			if !r.ok {
				r = yrange{v, v, true}
			}
			r.lo, r.hi = math.Min(r.lo, v), math.Max(r.hi, v)
		}
	}
	if !r.ok {
		return r
	}
	span := r.hi - r.lo
	minSpan = math.Max(minSpan, 10)
	if span < minSpan {
		mid := (r.hi + r.lo) / 2
		r.lo, r.hi, span = mid-minSpan/2, mid+minSpan/2, minSpan
		if r.lo < 0 {
			r.lo, r.hi = 0, minSpan // readings are never negative
		}
	}
	r.lo -= span * 0.08
	r.hi += span * 0.08
	if r.lo < 0 && r.hi > 0 && r.lo > -span*0.2 {
		r.lo = 0 // readings here are never negative: keep zero as the floor
	}
	return r
}

// drawYAxis writes a few labelled grid lines.
func drawYAxis(b *strings.Builder, r yrange, top, x int, anchor string, grid bool) {
	if !r.ok {
		return
	}
	step := niceStep((r.hi - r.lo) / 4)
	for v := math.Ceil(r.lo/step) * step; v <= r.hi; v += step {
		y := r.y(v, top)
		if grid {
			fmt.Fprintf(b, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#e3e3e3\"/>\n", plotLeft, y, plotLeft+plotWidth, y)
		}
		fmt.Fprintf(b, "<text x=\"%d\" y=\"%.1f\" text-anchor=\"%s\" font-size=\"10\">%s</text>\n", x, y+3, anchor, strconv.FormatFloat(v, 'f', -1, 64))
	}
}

// niceStep rounds a step up to 1, 2 or 5 times a power of ten.
func niceStep(raw float64) float64 {
	if raw <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= raw {
			return m * p
		}
	}
	return 10 * p
}

// path builds an SVG path of one series. The line is broken (a new "M")
// wherever the cell is absent or a row follows a gap (Row.Gap): missing
// data is never drawn as a line. With more rows than pixel columns, each
// column keeps its lowest and highest value, so spikes survive.
func path(rows []Row, get func(Row) reading.Opt[float64], xm xmap, yr yrange, top int) string {
	if !yr.ok {
		return ""
	}
	var b strings.Builder
	pen := false
	point := func(x, y float64) {
		if pen {
			b.WriteString(" L")
		} else {
			if b.Len() > 0 {
				b.WriteByte(' ')
			}
			b.WriteString("M")
		}
		b.WriteString(strconv.FormatFloat(x, 'f', 1, 64) + "," + strconv.FormatFloat(y, 'f', 1, 64))
		pen = true
	}
	thin := len(rows) > 2*maxColumns
	col, lo, hi := -1, 0.0, 0.0
	var loT, hiT time.Time
	flush := func() {
		if col < 0 {
			return
		}
		if loT.Before(hiT) {
			point(xm.x(loT), yr.y(lo, top))
			point(xm.x(hiT), yr.y(hi, top))
		} else {
			point(xm.x(hiT), yr.y(hi, top))
			if lo != hi {
				point(xm.x(loT), yr.y(lo, top))
			}
		}
		col = -1
	}
	for _, r := range rows {
		v, ok := get(r).Get()
		if r.Gap > 0 {
			flush()
			pen = false
		}
		if !ok {
			flush()
			pen = false
			continue
		}
		if !thin {
			point(xm.x(r.Time), yr.y(v, top))
			continue
		}
		c := int(xm.x(r.Time))
		if c != col {
			flush()
			col, lo, hi, loT, hiT = c, v, v, r.Time, r.Time
			continue
		}
		if v < lo {
			lo, loT = v, r.Time
		}
		if v > hi {
			hi, hiT = v, r.Time
		}
	}
	flush()
	return b.String()
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
		plotLeft+plotWidth/2, bottom+28, html.EscapeString(inc.In(loc).Format("2006-01-02 15:04:05.000 MST")))
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

// chartMarker is one marked timeline entry on a GPU's chart, numbered for
// the key below the chart.
type chartMarker struct {
	n   int
	x   float64
	row int // the strip row its number is written in
	e   Entry
}

// chartMarkers returns the timeline's marked entries of this GPU (and those
// tied to no GPU) inside the axis, numbered in time order, each given the
// first strip row with room for its number, and how many rows that takes.
func (rep *Report) chartMarkers(gpu int, xm xmap) ([]chartMarker, int) {
	var out []chartMarker
	var rowEnd []float64
	for _, e := range rep.Timeline {
		if e.Marker == "" || (e.GPU != gpu && e.GPU >= 0) || e.Time.Before(xm.from) || e.Time.After(xm.to) {
			continue
		}
		m := chartMarker{n: len(out) + 1, x: xm.x(e.Time), e: e, row: -1}
		w := float64(6*len(strconv.Itoa(m.n)) + 4)
		for i := range rowEnd {
			if m.x > rowEnd[i]+2 {
				m.row = i
				break
			}
		}
		if m.row < 0 {
			m.row = len(rowEnd)
			rowEnd = append(rowEnd, 0)
		}
		rowEnd[m.row] = m.x + w
		out = append(out, m)
	}
	return out, len(rowEnd)
}

// drawMarkers draws the markers as vertical lines across all panels, each
// numbered in the strip at the top (the key below the chart says what each
// is, so a picture or a printout of the chart is complete), with a tooltip
// with the whole line.
func drawMarkers(b *strings.Builder, rep *Report, ms []chartMarker, stripTop, bottom int) {
	for _, m := range ms {
		c := markerColor(m.e.Marker)
		w := "1.2"
		if m.e.Marker == "incident" {
			w = "2.5"
		}
		y := stripTop + markerRowH*(m.row+1)
		fmt.Fprintf(b, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"%s\" stroke-width=\"%s\" opacity=\"0.75\"><title>%s</title></line>\n",
			m.x, y-markerRowH+2, m.x, bottom, c, w, html.EscapeString(strconv.Itoa(m.n)+": "+offset(m.e.Time.Sub(rep.Incident.Time))+" "+m.e.What))
		fmt.Fprintf(b, "<text x=\"%.1f\" y=\"%d\" font-size=\"10\" font-weight=\"bold\" fill=\"%s\">%d</text>\n", m.x+2, y, c, m.n)
	}
}

// drawMarkerKey writes the key of the numbered markers below the chart: the
// number, the offset from the incident, the kind and the whole label.
func drawMarkerKey(b *strings.Builder, rep *Report, ms []chartMarker, top int) {
	if len(ms) == 0 {
		return
	}
	fmt.Fprintf(b, "<text x=\"%d\" y=\"%d\" font-weight=\"bold\">Markers</text>\n", plotLeft, top+12)
	for i, m := range ms {
		y := top + keyTitleH + keyRowH*i + 10
		label := m.e.What
		if len(label) > keyChars {
			label = label[:keyChars] + "..."
		}
		fmt.Fprintf(b, "<text x=\"%d\" y=\"%d\" text-anchor=\"end\" font-size=\"10\" font-weight=\"bold\" fill=\"%s\">%d</text>\n", plotLeft-6, y, markerColor(m.e.Marker), m.n)
		fmt.Fprintf(b, "<text x=\"%d\" y=\"%d\" font-size=\"10\">%s</text>\n", plotLeft, y,
			html.EscapeString(offset(m.e.Time.Sub(rep.Incident.Time))+"  "+string(m.e.Kind)+"  "+label))
	}
}

// dataNote says where the chart's data starts and why, against the window
// asked for: the logger started, the GPU joined, or a gap before it.
func (rep *Report) dataNote(g GPUData) string {
	asked := "window asked: " + offset(rep.From.Sub(rep.Incident.Time)) + " .. " + offset(rep.To.Sub(rep.Incident.Time))
	if len(g.Rows) == 0 {
		return "No rows in the window; " + asked
	}
	first := g.Rows[0].Time
	at := "Data from " + offset(first.Sub(rep.Incident.Time)) + " (" + first.In(rep.Loc).Format("15:04:05.000") + ")"
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
