package runstate

import (
	"errors"
	"slices"
	"testing"

	"github.com/gpu-telemetry/gpu-telemetry/reading"
	"github.com/gpu-telemetry/gpu-telemetry/sink"
)

// TestSaverSaves: nothing is saved before Begin; a change is written on
// top of what Begin recorded (the previous run's fans held kept); a change
// that changes nothing writes nothing; a failed write leaves the state as
// it was, so that the next Save writes it.
func TestSaverSaves(t *testing.T) {
	dir := t.TempDir()
	held := []FanHold{{UUID: "GPU-a", Fans: []int{0}}}
	if err := Write(dir, State{BootID: "boot-a", PID: 1, FanGuard: held}); err != nil {
		t.Fatal(err)
	}
	writes := 0
	fail := false
	s := &Saver{Dir: dir, Rewrite: func(dir string, st State) error {
		writes++
		if fail {
			return errors.New("disk on fire")
		}
		return Write(dir, st)
	}}
	setSeq := func(seq uint64) func(*State) bool {
		return func(st *State) bool {
			moved := st.KmsgSeq != reading.Some(seq)
			st.KmsgSeq = reading.Some(seq)
			return moved
		}
	}
	if err := s.Save(setSeq(1)); !errors.Is(err, ErrNotBegun) {
		t.Fatalf("Save before Begin: %v, want ErrNotBegun", err)
	}
	if prev, err := s.Begin(State{BootID: "boot-a", PID: 2}); err != nil || prev.State.PID != 1 {
		t.Fatalf("Begin found %+v, %v", prev, err)
	}
	if err := s.Save(setSeq(7)); err != nil {
		t.Fatal(err)
	}
	s.Save(setSeq(7)) // not moved
	fail = true
	if err := s.Save(setSeq(8)); err == nil {
		t.Fatal("a failed write was not returned")
	}
	fail = false
	if err := s.Save(setSeq(8)); err != nil {
		t.Fatal(err)
	}
	got, _, err := Read(dir)
	if err != nil || got.PID != 2 || got.KmsgSeq != reading.Some[uint64](8) || len(got.FanGuard) != 1 || got.FanGuard[0].UUID != "GPU-a" {
		t.Errorf("run-state %+v, %v; want PID 2, kmsg_seq 8 and GPU-a's fans", got, err)
	}
	if writes != 3 {
		t.Errorf("%d writes, want 3 (7, the failed 8, 8)", writes)
	}
}

// TestSaverHandsOnThePreviousRun: the previous run's fans held go to the
// first GPU that claims them, once; the boards held missing while a GPU
// had no UUID are missing once every GPU has one and none is theirs.
func TestSaverHandsOnThePreviousRun(t *testing.T) {
	dir := t.TempDir()
	held := []FanHold{{UUID: "GPU-b", Fans: []int{1}}, {UUID: "GPU-a", Fans: []int{0, 1}}}
	if err := Write(dir, State{BootID: "boot-a", FanGuard: held}); err != nil {
		t.Fatal(err)
	}
	s := &Saver{Dir: dir}
	if s.ClaimFans("GPU-a") != nil {
		t.Error("fans claimed before Begin")
	}
	if _, err := s.Begin(State{BootID: "boot-a"}); err != nil {
		t.Fatal(err)
	}
	if got := s.ClaimFans("GPU-a"); !slices.Equal(got, []int{0, 1}) {
		t.Errorf("GPU-a claimed %v, want 0,1", got)
	}
	if got := s.ClaimFans("GPU-a"); got != nil {
		t.Errorf("GPU-a claimed %v again", got)
	}
	if got := HoldsText(s.UnclaimedFans()); got != "GPU-b fans 1" {
		t.Errorf("unclaimed %q, want GPU-b fans 1", got)
	}

	gone, back := sink.Board{Index: 0, UUID: "GPU-gone"}, sink.Board{Index: 1, UUID: "GPU-back"}
	s.HoldMissing(sink.InventoryChange{Change: sink.InventoryMissing, Board: gone, Unidentified: 1})
	s.HoldMissing(sink.InventoryChange{Change: sink.InventoryMissing, Board: back, Unidentified: 1})
	if got := s.HeldMissing([]sink.Board{{Index: 0, UUID: "GPU-c"}, {Index: 1}}); got != nil {
		t.Fatalf("missing %+v while a GPU has no UUID", got)
	}
	got := s.HeldMissing([]sink.Board{{Index: 0, UUID: "GPU-c"}, back})
	if len(got) != 1 || got[0].Board != gone || got[0].Unidentified != 0 {
		t.Errorf("missing %+v, want GPU-gone alone, unidentified 0", got)
	}
	if got := s.HeldMissing([]sink.Board{{Index: 0, UUID: "GPU-c"}}); got != nil {
		t.Errorf("missing %+v a second time", got)
	}
}
