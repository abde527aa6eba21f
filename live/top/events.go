package top

import (
	"strconv"
	"strings"

	"github.com/gdamore/tcell/v2"
)

// events is this host's last events.log lines, newest first, as the
// document carries them (Doc.Events), all of them or (f) the selected
// GPU's; scrollable.
type events struct {
	scroll int
	only   bool
}

func (*events) Name() string   { return "Events" }
func (*events) Key() tcell.Key { return tcell.KeyF5 }

// Data is the lines shown, newest first.
func (v *events) Data(m *Model) any { return v.lines(m) }

// lines are the document's events, the selected GPU's only when filtered:
// a line of its (by uuid=, or gpu= where it has no UUID).
func (v *events) lines(m *Model) []string {
	out := []string{}
	if m.Doc == nil {
		return out
	}
	g := m.GPU()
	for _, l := range m.Doc.Events {
		if v.only && g != nil && !ofGPU(l, g.UUID, g.Index) {
			continue
		}
		out = append(out, l)
	}
	return out
}

// ofGPU reports whether events.log line l is about the GPU uuid (index).
func ofGPU(l, uuid string, index int) bool {
	f := " " + l + " "
	return uuid != "" && strings.Contains(f, " uuid="+uuid+" ") || strings.Contains(f, " gpu="+strconv.Itoa(index)+" ")
}

func (v *events) OnKey(m *Model, ev *tcell.EventKey) bool {
	if ev.Key() == tcell.KeyRune && ev.Rune() == 'f' {
		v.only, v.scroll = !v.only, 0
		return true
	}
	return scrollKey(&v.scroll, ev)
}

func (v *events) Render(m *Model, width, height int) []Line {
	ls := v.lines(m)
	scope := "all GPUs"
	if v.only {
		scope = "GPU " + strconv.Itoa(m.Sel)
	}
	head := Line{pad(strconv.Itoa(len(ls))+" events on "+scope+", newest first  (f all GPUs/selected, ↑/↓ PgUp/PgDn scroll)", width), SevHead}
	if len(ls) == 0 {
		why := "no events"
		if m.Doc != nil && m.Doc.Events == nil {
			why = "no events in the document (a daemon that does not serve them, or none logged yet)"
		}
		return []Line{head, {pad(why, width), SevDim}}
	}
	body := make([]Line, len(ls))
	for i, l := range ls {
		body[i] = Line{l, SevNormal}
		switch {
		case strings.Contains(l, "level=critical"):
			body[i].Sev = SevCrit
		case strings.Contains(l, "level=warning"):
			body[i].Sev = SevWarn
		}
	}
	shown, from := page(body, v.scroll, width, height-1)
	v.scroll = from
	return append([]Line{head}, shown...)
}
