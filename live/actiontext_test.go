package live

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/action"
	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

// A GPU's repair action reaches its status document and the status screen,
// with the last acknowledgement; none shows no line.
func TestActionInStatus(t *testing.T) {
	now := time.Date(2026, 1, 2, 12, 0, 10, 0, time.UTC)
	g := GPU{Info: reading.GPU{Index: 3, UUID: "GPU-1a2b"},
		Action:      action.Current{Action: action.PowerCycle, Reasons: []string{"warm reboot did not recover it (xid79 in the previous boot)", "the board is not enumerated"}},
		ActionSince: now.Add(-10 * time.Second),
		Ack:         Ack{Time: now.Add(-time.Hour), Action: action.Reboot, Note: "rebooted", By: "root"}}
	d := gpuDoc(&g, now, 0)
	b, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"action":{"name":"power_cycle","reasons":["warm reboot did not recover it (xid79 in the previous boot)","the board is not enumerated"],"since":"2026-01-02T12:00:00Z","ack":{"time":"2026-01-02T11:00:10Z","action":"reboot","note":"rebooted","by":"root"}}`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("document lacks %s:\n%s", want, b)
		}
	}
	var back GPUDoc
	if err := json.Unmarshal(b, &back); err != nil || back.Action.Name != action.PowerCycle || back.Action.Ack.By != "root" {
		t.Errorf("decoded %+v, %v", back.Action, err)
	}
	lines := GPULines(d, now)
	for _, want := range []string{
		"  action power_cycle: warm reboot did not recover it (xid79 in the previous boot); the board is not enumerated (since 12:00:00)",
		"  acked reboot by root at 11:00:10: rebooted",
	} {
		if !slices.Contains(lines, want) {
			t.Errorf("status lacks %q:\n%s", want, strings.Join(lines, "\n"))
		}
	}
	g = GPU{Info: reading.GPU{Index: 3}}
	for _, l := range GPULines(gpuDoc(&g, now, 0), now) {
		if strings.Contains(l, "action") {
			t.Errorf("a GPU with no action shows %q", l)
		}
	}
}

// A board of the previous run that is not enumerated now shows with its
// action on the host lines and in the document's missing_boards.
func TestMissingBoardInStatus(t *testing.T) {
	now := time.Date(2026, 1, 2, 12, 0, 10, 0, time.UTC)
	v := View{Host: Host{Now: now, Start: now.Add(-time.Minute), Missing: []MissingBoard{{Index: 1, UUID: "GPU-dead",
		Action: action.Current{Action: action.PowerCycle, Reasons: []string{"warm reboot did not recover it (xid79 in the previous boot)"}}}}}}
	d := NewDoc(v)
	if len(d.Host.MissingBoards) != 1 || d.Host.MissingBoards[0].Action.Name != action.PowerCycle || d.Host.MissingBoards[0].UUID != "GPU-dead" {
		t.Fatalf("missing_boards %+v", d.Host.MissingBoards)
	}
	want := "missing board GPU-dead (GPU 1 in the previous run): action power_cycle: warm reboot did not recover it (xid79 in the previous boot)"
	if lines := HostLines(d); !slices.Contains(lines, want) {
		t.Errorf("host lines lack %q:\n%s", want, strings.Join(lines, "\n"))
	}
}
