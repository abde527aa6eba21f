package monitor

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/action/board"
	"github.com/gpu-telemetry/gpu-telemetry/reading"
	"github.com/gpu-telemetry/gpu-telemetry/xid"
)

// A GPU's state file is saved again at the next round (judgeActions)
// without a new event: an ack whose write failed (the file's name taken by
// a directory), as one a Save left to a later one while another write was
// in progress (board.Board.Save never waits for it), is not lost.
func TestAckGPUWriteRetried(t *testing.T) {
	r := newRig(t, 1, nil)
	gs := r.m.gpus[0]
	uuid := gs.g.Info().UUID
	now := time.Now()
	gs.judgeAction(now, true, func(rp repairEvents) { rp.Xid(xid.ExplainDetail(79, reading.XidDetail{}), now) })
	p, _ := board.Path(r.dir, uuid)
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(p, "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	cur := gs.slot.Get().Action.Action
	if _, err := r.m.Ack("0", cur, "reseated", "root"); err != nil {
		t.Fatal(err)
	}
	if n := r.counted("board_state_write_failures"); n == 0 {
		t.Errorf("board_state_write_failures %d, want some", n)
	}
	if err := os.RemoveAll(p); err != nil {
		t.Fatal(err)
	}
	r.m.judgeActions(time.Now().Add(2 * judgeEvery))
	if h, err := board.Read(r.dir, uuid); err != nil || h.Ack == nil || h.Ack.Note != "reseated" {
		t.Fatalf("the ack whose write failed was not written again: %+v, %v", h, err)
	}
}
