package monitor

import (
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpu-telemetry/gpu-telemetry/action"
	"github.com/gpu-telemetry/gpu-telemetry/action/board"
	"github.com/gpu-telemetry/gpu-telemetry/internal/events"
	"github.com/gpu-telemetry/gpu-telemetry/reading"
	"github.com/gpu-telemetry/gpu-telemetry/sampler/fakenvml"
)

// countedThisBoot reads gs's repair board: class's count in this boot.
func countedThisBoot(t *testing.T, r *rig, gs *gpuState, class string) action.ClassCount {
	t.Helper()
	h, err := board.Read(r.dir, gs.g.Info().UUID)
	if err != nil {
		t.Fatal(err)
	}
	return h.Boot(r.m.repairBoot()).Classes[class]
}

// writeAckedEarlier writes gs's repair board as an earlier run in this
// boot left it: class counted an hour ago and acknowledged at act a minute
// after.
func writeAckedEarlier(t *testing.T, r *rig, gs *gpuState, class string, act action.Action) {
	t.Helper()
	began := time.Now().Add(-time.Hour)
	h := action.History{UUID: gs.g.Info().UUID}
	h.Count(r.m.repairBoot(), class, began)
	h.Acknowledge(action.AckRecord{Time: began.Add(time.Minute), Action: act, Classes: []string{class}})
	h.AckAs(class, act)
	if err := board.Write(r.dir, h); err != nil {
		t.Fatal(err)
	}
}

// setField sets field id of d to v.
func setField(d *fakenvml.Dev, id uint32, v uint64) {
	if d.Fields == nil {
		d.Fields = map[uint32]uint64{}
	}
	d.Fields[id] = v
}

// A recovery action acknowledged, then missing from one health reading
// (its field entry timed out, or the whole sample failed), then read
// again: one occurrence, counted once, still acknowledged (an absent
// reading is not an absence).
func TestAnAckedRecoveryActionGoesOnThroughAGapInItsReading(t *testing.T) {
	for _, gap := range []string{"field entry timed out", "sample failed"} {
		t.Run(gap, func(t *testing.T) {
			r := newRig(t, 1, nil)
			gs := r.m.gpus[0]
			r.devs[0].Update(func(d *fakenvml.Dev) { setField(d, nvml.FI_DEV_GET_GPU_RECOVERY_ACTION, 2) })
			_, _, sample := stepper(r, 0)
			n := 0
			run := func(k int) {
				for range k {
					sample(n)
					n++
				}
			}
			run(12)
			g := gs.slot.Get()
			if g.Action.Action != action.Reboot {
				t.Fatalf("action %v %q, want reboot: the recovery action", g.Action.Action, g.Action.Reasons)
			}
			if _, err := r.m.Ack("0", g.Action.Action, "", "op"); err != nil {
				t.Fatal(err)
			}
			run(12)
			if g := gs.slot.Get(); g.Action.Action != action.Watch {
				t.Fatalf("after the ack: %v %q, want watch", g.Action.Action, g.Action.Reasons)
			}
			if gap == "field entry timed out" {
				r.devs[0].Update(func(d *fakenvml.Dev) {
					d.FieldRet = map[uint32]nvml.Return{nvml.FI_DEV_GET_GPU_RECOVERY_ACTION: nvml.ERROR_TIMEOUT}
				})
			} else {
				r.devs[0].SetAll(nvml.ERROR_UNKNOWN)
			}
			for start := n; gs.Health().Vals[reading.HRecoveryAction].OK; { // until a health view lacks it
				if n-start > 40 {
					t.Fatal("no health view without the recovery action")
				}
				run(1)
			}
			r.devs[0].Update(func(d *fakenvml.Dev) { d.FieldRet = nil })
			r.devs[0].SetAll(0)
			run(24)
			if v, ok := gs.Health().Vals[reading.HRecoveryAction].Get(); !ok || v != 2 {
				t.Fatalf("recovery action read %v %v after the gap, want 2", v, ok)
			}
			c := countedThisBoot(t, r, gs, "recovery_2")
			g = gs.slot.Get()
			if c.Count != 1 || g.Action.Action != action.Watch {
				t.Errorf("recovery_2 counted %d, action %v %q; want 1, watch (one occurrence, acknowledged)", c.Count, g.Action.Action, g.Action.Reasons)
			}
		})
	}
}

// A restart: an earlier run in this boot counted a DBE and it was
// acknowledged; this run's first health reading lacks the DBE count (its
// field entry timed out). The DBE read next is the earlier run's, covered
// by its ack: not counted again.
func TestAnAckedDBEGoesOnWhenTheFirstHealthReadingLacksIt(t *testing.T) {
	r := newRig(t, 1, nil)
	gs := r.m.gpus[0]
	writeAckedEarlier(t, r, gs, "ecc_dbe", action.ResetGPU)
	r.devs[0].Update(func(d *fakenvml.Dev) {
		setField(d, nvml.FI_DEV_ECC_CURRENT, 1) // ECC on: the DBE count means something
		setField(d, nvml.FI_DEV_ECC_DBE_VOL_TOTAL, 1)
		d.FieldRet = map[uint32]nvml.Return{nvml.FI_DEV_ECC_DBE_VOL_TOTAL: nvml.ERROR_TIMEOUT}
	})
	_, _, sample := stepper(r, 0)
	n := 0
	for ; gs.Health().At.IsZero(); n++ {
		if n > 40 {
			t.Fatal("no health view")
		}
		sample(n)
	}
	if gs.Health().Vals[reading.HDBEVolatile].OK {
		t.Fatal("the first health reading has the DBE count")
	}
	r.devs[0].Update(func(d *fakenvml.Dev) { d.FieldRet = nil })
	for start := n; !gs.Health().Vals[reading.HDBEVolatile].OK; n++ {
		if n-start > 40 {
			t.Fatal("the DBE count is never read")
		}
		sample(n)
	}
	sample(n)
	c := countedThisBoot(t, r, gs, "ecc_dbe")
	g := gs.slot.Get()
	if c.Count != 1 || g.Action.Action != action.Watch {
		t.Errorf("ecc_dbe counted %d, action %v %q; want 1, watch (the earlier run's, acknowledged)", c.Count, g.Action.Action, g.Action.Reasons)
	}
}

// A recovery action an event reported, acknowledged; the field then reads
// 0 (the GPU was reset), then times out once: the old event does not bring
// its class back as a new occurrence (the field's reading replaced it).
func TestAnOldRecoveryEventDoesNotComeBackWhenTheFieldTimesOut(t *testing.T) {
	r := newRig(t, 1, nil)
	gs := r.m.gpus[0]
	r.devs[0].Update(func(d *fakenvml.Dev) {
		setField(d, nvml.FI_DEV_GET_GPU_RECOVERY_ACTION, 2)
		setField(d, nvml.FI_DEV_ECC_CURRENT, 1)
		setField(d, nvml.FI_DEV_ECC_SBE_VOL_TOTAL, 1)
	})
	_, s, sample := stepper(r, 0)
	n := 0
	run := func(k int) {
		for range k {
			sample(n)
			n++
		}
	}
	run(1)
	gs.wake(events.Record{Kind: reading.EventRecovery, Code: 2, At: s.Time, Seen: s.Time}, reading.XidDetail{}).write(gs)
	run(11)
	g := gs.slot.Get()
	if g.Action.Action != action.Reboot {
		t.Fatalf("action %v %q, want reboot: the recovery action", g.Action.Action, g.Action.Reasons)
	}
	if _, err := r.m.Ack("0", g.Action.Action, "", "op"); err != nil {
		t.Fatal(err)
	}
	r.devs[0].Update(func(d *fakenvml.Dev) { setField(d, nvml.FI_DEV_GET_GPU_RECOVERY_ACTION, 0) })
	for start := n; gs.Health().Vals[reading.HRecoveryAction] != reading.Some[uint64](0); run(1) {
		if n-start > 40 {
			t.Fatal("the field never reads 0")
		}
	}
	run(12)
	r.devs[0].Update(func(d *fakenvml.Dev) { // a corrected error in the same reading: a new health view
		d.FieldRet = map[uint32]nvml.Return{nvml.FI_DEV_GET_GPU_RECOVERY_ACTION: nvml.ERROR_TIMEOUT}
		setField(d, nvml.FI_DEV_ECC_SBE_VOL_TOTAL, 2)
	})
	for start := n; gs.Health().Vals[reading.HRecoveryAction].OK; run(1) {
		if n-start > 40 {
			t.Fatal("no health view without the recovery action")
		}
	}
	run(12)
	c := countedThisBoot(t, r, gs, "recovery_2")
	g = gs.slot.Get()
	if c.Count != 1 || g.Action.Action != action.None {
		t.Errorf("recovery_2 counted %d, action %v %q; want 1, none (the field read 0 since the event)", c.Count, g.Action.Action, g.Action.Reasons)
	}
}

// A recovery action an event reports on a healthy GPU: the judgement that
// takes it in weighs the last sample's health view, whose field (0) was
// read before the event and does not clear it; the samples failing after
// it keep it, counted once (the next boot's warm-reboot check needs it).
func TestARecoveryEventIsNotClearedByTheHealthViewBeforeIt(t *testing.T) {
	r := newRig(t, 1, nil)
	gs := r.m.gpus[0]
	r.devs[0].Update(func(d *fakenvml.Dev) { setField(d, nvml.FI_DEV_GET_GPU_RECOVERY_ACTION, 0) })
	_, _, sample := stepper(r, 0)
	n := 0
	for ; gs.Health().Vals[reading.HRecoveryAction] != reading.Some[uint64](0); n++ {
		if n > 40 {
			t.Fatal("the field never reads 0")
		}
		sample(n)
	}
	sample(n) // a second view alike: the event's judgement weighs one it has already judged
	n++
	at := gs.Health().At.Add(50 * time.Millisecond) // after the last view, before the next sample
	gs.wake(events.Record{Kind: reading.EventRecovery, Code: 2, At: at, Seen: at}, reading.XidDetail{}).write(gs)
	if g := gs.slot.Get(); g.Action.Action != action.Reboot {
		t.Errorf("at the event: %v %q, want reboot (the recovery action)", g.Action.Action, g.Action.Reasons)
	}
	r.devs[0].SetAll(nvml.ERROR_UNKNOWN)
	for end := n + 12; n < end; n++ {
		sample(n)
	}
	g := gs.slot.Get()
	if g.Action.Action != action.Reboot || len(g.Action.Reasons) != 2 {
		t.Errorf("samples failing: %v %q, want reboot: the recovery action, and every NVML call fails", g.Action.Action, g.Action.Reasons)
	}
	if c := countedThisBoot(t, r, gs, "recovery_2"); c.Count != 1 {
		t.Errorf("recovery_2 counted %d, want 1", c.Count)
	}
}
