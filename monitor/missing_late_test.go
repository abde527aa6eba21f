package monitor

import (
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/action"
	"github.com/gpu-telemetry/gpu-telemetry/action/board"
)

// A board an earlier run already missed (its state file; a restart in the
// same boot), still gone, with another GPU stuck at this start: the boards
// not seen cannot be told from missing ones until that GPU answers, and
// then it is raised, once (one GPU_MISSING line, gpus_missing 1, its
// action in the host view), however often the check runs after.
func TestEarlierMissingBoardRaisedOnceEveryGPUAnswered(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lib := fakeLib(2)
		answer := lib.Devs[1].Block("GetName", nil)
		t.Cleanup(answer)
		r := newRigOn(t, lib, nil)
		const gone = "GPU-dead0002-0000-0000-0000-000000000000"
		h := action.History{UUID: gone}
		h.Boot("an-earlier-boot")
		if err := board.Write(r.dir, h); err != nil {
			t.Fatal(err)
		}
		var atStart int
		r.run(5*time.Second, func() {
			time.Sleep(3 * time.Second)
			atStart = r.m.hostView().GPUsMissing
			answer()
		})
		if !strings.Contains(r.logs.String(), "its static facts are known now") {
			t.Fatalf("GPU 1 did not answer within the run:\n%s", r.logs)
		}
		if atStart != 0 {
			t.Errorf("gpus_missing %d while GPU 1 was stuck, want 0 (it may be the board)", atStart)
		}
		lines := func() int { return strings.Count(r.eventsLog(), "uuid="+gone+" ") }
		if n := lines(); n != 2 { // its ACTION line and its GPU_MISSING line
			t.Errorf("%d lines of the missing board, want 2:\n%s", n, r.eventsLog())
		}
		hv := r.m.hostView()
		if hv.GPUsMissing != 1 || len(hv.Missing) != 1 || hv.Missing[0].UUID != gone || !hv.Missing[0].Action.Action.Drains() {
			t.Errorf("host view: gpus_missing %d, missing %+v", hv.GPUsMissing, hv.Missing)
		}
		r.m.missingFromState() // again: nothing
		if n, hv := lines(), r.m.hostView(); n != 2 || hv.GPUsMissing != 1 || len(hv.Missing) != 1 {
			t.Errorf("the check run again: %d lines of the missing board, gpus_missing %d, %d missing boards; want 2, 1, 1", n, hv.GPUsMissing, len(hv.Missing))
		}
	})
}
