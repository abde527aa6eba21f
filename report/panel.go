package report

import (
	"fmt"
	"html"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

// series is one line of a panel.
type series struct {
	name  string
	color string
	dash  string // stroke-dasharray, "" for solid
	get   func(Row) reading.Opt[float64]
	right bool // drawn on the panel's right axis
}

// dashAttr is the series' stroke-dasharray attribute, nothing when solid.
func (s series) dashAttr() string {
	if s.dash == "" {
		return ""
	}
	return " stroke-dasharray=\"" + s.dash + "\""
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
			fmt.Fprintf(b, "<path d=\"%s\" fill=\"none\" stroke=\"%s\" stroke-width=\"1.6\"%s/>\n", d, s.color, s.dashAttr())
		}
		// Legend inside the panel's top, left to right.
		fmt.Fprintf(b, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"%s\" stroke-width=\"2\"%s/>\n", lx, top+10, lx+16, top+10, s.color, s.dashAttr())
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
