package top

import (
	"strings"

	"github.com/gdamore/tcell/v2"
)

// help is every key, and what public NVML cannot give.
type help struct{ scroll int }

func (*help) Name() string   { return "Help" }
func (*help) Key() tcell.Key { return tcell.KeyF1 }

// Data is the help's text.
func (*help) Data(*Model) any { return helpText }

func (v *help) OnKey(m *Model, ev *tcell.EventKey) bool { return scrollKey(&v.scroll, ev) }

// Render wraps the help at the terminal's width, a key's description
// going on under itself.
func (v *help) Render(m *Model, width, height int) []Line {
	var ls []Line
	for _, t := range helpText {
		if t != "" && t[0] != ' ' {
			ls = append(ls, Line{t, SevHead})
			continue
		}
		indent := 2
		if len(t) > 19 && t[17:19] == "  " && t[19] != ' ' && width >= 40 {
			indent = 19 // under the description, past the key's column
		}
		first := wrap(t, width, 1<<20)
		ls = append(ls, Line{Text: first[0]})
		rest := strings.TrimLeft(strings.TrimPrefix(t, strings.TrimRight(first[0], " ")), " ")
		if rest == "" {
			continue
		}
		for _, l := range wrap(rest, max(width-indent, 1), 1<<20) {
			ls = append(ls, Line{Text: strings.Repeat(" ", indent) + l})
		}
	}
	out, from := page(ls, v.scroll, width, height)
	v.scroll = from
	return out
}

// helpText is the help view, line by line.
var helpText = []string{
	"gpu-telemetry top: keys",
	"  F1 or ?          this help",
	"  F2               Overview: every GPU, failing and critical ones first, never scrolled off",
	"  F3 or Enter      GPU detail of the selected GPU",
	"  F4               Processes on every GPU (f: the selected GPU only)",
	"  F5               Events: this host's last events.log lines, newest first (f: the selected GPU's)",
	"  Tab, Shift-Tab   the next, the previous view",
	"  ←/→              select the previous, the next GPU",
	"  0-9              select GPU 0-9 and show its detail",
	"  ↑/↓ PgUp/PgDn    scroll (the Processes view moves its highlighted row)",
	"  Home/End         the top, the end",
	"  s                Processes: sort by memory, SM share, pid",
	"  f                Processes and Events: all GPUs or the selected one",
	"  Space            pause: stop applying new documents (PAUSED on the footer); again to resume",
	"  e                export the current view's data as JSON to a new file, named on the footer",
	"                   (gpu-telemetry-top-<view>-<time>.json in the current directory, else $TMPDIR)",
	"  q, Esc, Ctrl-C   quit",
	"",
	"Colours",
	"  red: failing, critical, Xid; yellow: warning, throttling; none with NO_COLOR or a monochrome terminal",
	"",
	"What public NVML cannot give",
	"  rmtop's GSP-RM panel (RPC queues, GSP heap, task state) reads private RM controls that public NVML",
	"  does not expose. The GPU view shows what NVML gives of the GSP: the firmware's version and mode",
	"  (enabled or disabled) and the last GSP Xids (119 RPC timeout, 120 GSP error).",
	"  A reading the GPU or driver does not give shows n/a, never 0.",
}
