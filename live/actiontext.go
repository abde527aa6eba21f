package live

import (
	"strings"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/action"
)

// ActionText is a GPU's repair action in one line, as status, top and the
// snapshot header show it: "action reboot: the driver reports the GPU lost
// (since 12:00:03)"; "" for none with no acknowledgement to show.
func ActionText(g GPUDoc, now time.Time) string {
	a := g.Action
	if a.Name == action.None {
		return ""
	}
	s := "action " + a.Name.String()
	if len(a.Reasons) > 0 {
		s += ": " + strings.Join(a.Reasons, "; ")
	}
	if a.Since != nil {
		s += " (since " + clock(*a.Since, now) + ")"
	}
	return s
}

// AckText is the last acknowledgement of a GPU's action in one line:
// "acked reboot by root at 12:01:00: reseated"; "" for none.
func AckText(g GPUDoc, now time.Time) string {
	k := g.Action.Ack
	if k == nil {
		return ""
	}
	s := "acked " + k.Action.String() + " by " + orNA(k.By) + " at " + clock(k.Time, now)
	if k.Note != "" {
		s += ": " + k.Note
	}
	return s
}

// actionLines are the status screen's lines of the GPU's action and its
// acknowledgement, those that are not "".
func actionLines(g GPUDoc, now time.Time) []string {
	var out []string
	for _, s := range []string{ActionText(g, now), AckText(g, now)} {
		if s != "" {
			out = append(out, "  "+s)
		}
	}
	return out
}
