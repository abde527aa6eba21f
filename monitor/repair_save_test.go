package monitor

import (
	"os"
	"path/filepath"
	"testing"
	"testing/synctest"
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
	gs.judgeAction(now, true, func(rp repairEvents) { rp.Xid(xid.ExplainDetail(79, reading.XidDetail{}), now, gs.m.cfg.mono()) })
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

// A board's copy not on disk when the daemon stops (its write failed, or a
// Save found another write in progress, and no judgement follows) is
// written at exit.
func TestBoardCopyWrittenAtExit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 1, nil)
		gs := r.m.gpus[0]
		uuid := gs.g.Info().UUID
		p, _ := board.Path(r.dir, uuid)
		r.run(10*time.Millisecond, func() {
			time.Sleep(300 * time.Millisecond) // the GPU sampled and judged
			os.Remove(p)
			if err := os.MkdirAll(filepath.Join(p, "x"), 0o755); err != nil { // the file's write fails
				t.Error(err)
				return
			}
			now := time.Now()
			gs.judgeAction(now, true, func(rp repairEvents) { rp.Xid(xid.ExplainDetail(79, reading.XidDetail{}), now, gs.m.cfg.mono()) })
			if n := r.counted("board_state_write_failures"); n == 0 {
				t.Errorf("the write did not fail")
			}
			if err := os.RemoveAll(p); err != nil {
				t.Error(err)
			}
		})
		h, err := board.Read(r.dir, uuid)
		if err != nil {
			t.Fatal(err)
		}
		if b := h.Boot(r.m.repairBoot()); b.Classes["xid79"].Count != 1 {
			t.Errorf("the Xid 79 counted before the stop is not in the state file: %+v", *b)
		}
	})
}

// The writing of the boards at exit is bounded even when a worker
// abandoned at stop holds a GPU's repair lock (reading its board's file on
// a stalled disk): what it could not check is counted.
func TestBoardsAtExitBoundedByAStuckWorker(t *testing.T) {
	r := newRig(t, 1, nil) // real time: a goroutine blocked on a mutex does not let synctest's clock move
	gs := r.m.gpus[0]
	gs.repair.mu.Lock() // the stuck worker
	start := time.Now()
	r.m.saveBoardsAtExit(200*time.Millisecond, (*board.Board).Save)
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("took %v, bound 200ms", d)
	}
	if n := r.counted("board_state_write_failures"); n != 1 {
		t.Errorf("board_state_write_failures %d, want 1", n)
	}
	gs.repair.mu.Unlock()
}

// The writing of the boards at exit is bounded when a board's write itself
// is slow (a stalled disk): each board whose copy is still not on disk
// then is counted, one by one, and the write that comes back later still
// lands. A bound that is not kept deadlocks the bubble (the test fails; it
// does not hang).
func TestBoardsAtExitBoundedByASlowWrite(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 2, nil)
		now := time.Now()
		var paths []string
		xid79 := func(rp repairEvents) { rp.Xid(xid.ExplainDetail(79, reading.XidDetail{}), now, r.m.cfg.mono()) }
		for _, gs := range r.m.gpus { // a copy not on disk: its write failed
			gs.judgeAction(now, true, xid79) // the board's file written
			p, _ := board.Path(r.dir, gs.g.Info().UUID)
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
			if err := os.MkdirAll(filepath.Join(p, "x"), 0o755); err != nil {
				t.Fatal(err)
			}
			gs.judgeAction(now, true, xid79)
			paths = append(paths, p)
		}
		failed := r.counted("board_state_write_failures")
		if failed != 2 {
			t.Fatalf("board_state_write_failures %d before the exit, want 2", failed)
		}
		for _, p := range paths {
			if err := os.RemoveAll(p); err != nil {
				t.Fatal(err)
			}
		}
		stalled := make(chan struct{})
		start := time.Now()
		r.m.saveBoardsAtExit(2*time.Second, func(b *board.Board) error { <-stalled; return b.Save() })
		if d := time.Since(start); d != 2*time.Second { // the bubble's clock: exact
			t.Errorf("saveBoardsAtExit returned after %v, want its bound, 2s", d)
		}
		if n := r.counted("board_state_write_failures") - failed; n != 2 {
			t.Errorf("board_state_write_failures +%d at exit, want +2 (each board not written by the bound)", n)
		}
		close(stalled) // the disk answers again
		synctest.Wait()
		for _, gs := range r.m.gpus {
			if h, err := board.Read(r.dir, gs.g.Info().UUID); err != nil || h.Boot(r.m.repairBoot()).Classes["xid79"].Count != 2 {
				t.Errorf("GPU %d: the late write did not land: %+v, %v", gs.idx, h, err)
			}
		}
	})
}
