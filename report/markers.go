package report

import (
	"fmt"
	"html"
	"strconv"
	"strings"
)

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
			m.x, y-markerRowH+2, m.x, bottom, c, w, html.EscapeString(strconv.Itoa(m.n)+": "+rep.since(m.e.Time)+" "+m.e.What))
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
			html.EscapeString(rep.since(m.e.Time)+"  "+string(m.e.Kind)+"  "+label))
	}
}
