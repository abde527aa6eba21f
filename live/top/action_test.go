package top

import (
	"strings"
	"testing"

	"github.com/gpu-telemetry/gpu-telemetry/action"
	"github.com/gpu-telemetry/gpu-telemetry/live"
)

// A GPU's repair action shows in its block and in its one line; none
// shows nothing.
func TestActionOnScreen(t *testing.T) {
	d := fleet(2)
	for i := range d.GPUs {
		d.GPUs[i].Action = live.ActionDoc{Name: action.None}
	}
	d.GPUs[1].Action = live.ActionDoc{Name: action.PowerCycle, Reasons: []string{"warm reboot did not recover it"}}
	for _, size := range [][2]int{{160, 40}, {160, 4}} {
		lines := Render(&d, nil, d.Time, size[0], size[1], 0).Lines
		all := strings.Join(lines, "\n")
		if !strings.Contains(all, "action power_cycle") {
			t.Errorf("%dx%d: GPU 1's action is not on screen:\n%s", size[0], size[1], all)
		}
		if strings.Count(all, "action ") != 1 {
			t.Errorf("%dx%d: an action shown for a GPU with none:\n%s", size[0], size[1], all)
		}
	}
}
