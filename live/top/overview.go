package top

import (
	"strconv"
	"strings"

	"github.com/gdamore/tcell/v2"

	"github.com/gpu-telemetry/gpu-telemetry/live"
)

// overview is the default view: the host lines and one block or line per
// GPU, failing and critical GPUs first and never scrolled off (layout),
// with sparklines of the buffered readings where the width allows.
type overview struct {
	shown Screen // the last screen drawn: where the scrolling stands
}

func (*overview) Name() string   { return "Overview" }
func (*overview) Key() tcell.Key { return tcell.KeyF2 }
func (v *overview) Data(m *Model) any {
	if m.Doc == nil {
		return nil
	}
	return m.Doc
}

func (v *overview) Render(m *Model, width, height int) []Line {
	if m.Doc == nil {
		return []Line{{pad("gpu-telemetry top: waiting for the daemon", width), SevHead}}
	}
	body, sc := overviewBody(m.Doc, m, width, height, v.shown.Scroll)
	v.shown = sc
	out := make([]Line, len(body))
	sev := SevNormal
	sel := false
	for i, l := range body {
		switch {
		case i == 0:
			sev = SevHead
		case strings.HasPrefix(l, "GPU "):
			sev, sel = gpuSev(l), strings.HasPrefix(l, "GPU "+strconv.Itoa(m.Sel)+" ")
		case strings.HasPrefix(l, "-- "):
			sev, sel = SevDim, false
			if strings.Contains(l, "failing") {
				sev = SevWarn
			}
		case !strings.HasPrefix(l, "  "):
			sev, sel = SevNormal, false
		}
		out[i] = Line{pad(l, width), sev}
		if sel && strings.HasPrefix(l, "GPU ") {
			out[i].Sev = SevSel
		}
	}
	return out
}

// gpuSev is the severity of a GPU's head line by its state word.
func gpuSev(l string) Sev {
	f := strings.Fields(l)
	if len(f) < 3 {
		return SevNormal
	}
	switch strings.TrimSuffix(f[2], ":") {
	case "ok":
		if strings.Contains(l, "WARNING") {
			return SevWarn
		}
		return SevNormal
	case "CRITICAL", "HUNG", "LOST", "FAILING":
		return SevCrit
	}
	return SevWarn
}

func (v *overview) OnKey(m *Model, ev *tcell.EventKey) bool {
	switch ev.Key() {
	case tcell.KeyUp, tcell.KeyDown, tcell.KeyPgUp, tcell.KeyPgDn, tcell.KeyHome, tcell.KeyEnd:
		v.shown.Scroll, _ = onKey(ev, v.shown)
		return true
	}
	return false
}

// sparkWidth is the most cells a sparkline takes: one a second over a
// minute.
const sparkWidth = 60

// sparks is the GPU's sparklines of temperature, power and utilization in
// about room cells ("" when there is no room, m is nil, or nothing is
// buffered yet): each the last seconds of the buffer, one cell a second,
// labelled with how many seconds it covers.
func (m *Model) sparks(g live.GPUDoc, room int) string {
	if m == nil {
		return ""
	}
	n := min(sparkWidth, (room-18)/3)
	temp := m.Series(g.UUID, "temperature_c")
	if n < 8 || len(temp) == 0 {
		return ""
	}
	pl, ok := g.Reading("power_limit_w").Num()
	if !ok {
		pl = 700 // no limit known: the largest board's
	}
	// 30-100 C: the span from idle to the slowdown of current boards.
	return strconv.Itoa(n) + "s temp " + spark(temp, n, 30, 100) +
		" pwr " + spark(m.Series(g.UUID, "power_w"), n, 0, pl) +
		" util " + spark(m.Series(g.UUID, "gpu_util_pct"), n, 0, 100)
}
