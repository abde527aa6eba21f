package anomaly

import (
	"testing"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/action"
	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

// judgeAt judges in at t0+d, the monotonic clock in step, answered unless
// failing.
func judgeAt(r *Repair, d time.Duration, in RepairInput) action.Current {
	in.Now, in.Mono, in.Answered = t0.Add(d), 3*time.Hour+d, !in.Failing
	return r.Judge(in)
}

// countOf is how often this boot's history counted class.
func countOf(r *Repair, class string) uint64 {
	h, _ := r.History()
	return h.Boot("A").Classes[class].Count
}

// A class acknowledged whose reading is missing from one judgement (its
// field entry timed out, or the whole sample failed) goes on through the
// gap: an absent reading is not an absence. When it reads again it is the
// same occurrence, counted once and still acknowledged.
func TestAClassGoesOnThroughAGapInItsReading(t *testing.T) {
	dbe := vals(uint64(reading.HRecoveryAction), 0, uint64(reading.HDBEVolatile), 1)
	two := vals(uint64(reading.HRecoveryAction), 2, uint64(reading.HDBEVolatile), 0)
	links := vals(uint64(reading.HNVLinkCount), 4, uint64(reading.HNVLinkUp), 3)
	for _, tc := range []struct {
		name, class string
		shown, gap  RepairInput
	}{
		{"recovery field entry timed out", "recovery_2", RepairInput{Vals: two}, RepairInput{Vals: vals(uint64(reading.HDBEVolatile), 0)}},
		{"recovery, the sample failed", "recovery_2", RepairInput{Vals: two}, RepairInput{Vals: &reading.Values{}, Failing: true}},
		{"health field entry timed out", "ecc_dbe", RepairInput{Vals: dbe, Health: verdict(ReasonDBE)}, RepairInput{Vals: vals(uint64(reading.HRecoveryAction), 0)}},
		{"health, the sample failed", "ecc_dbe", RepairInput{Vals: dbe, Health: verdict(ReasonDBE)}, RepairInput{Vals: &reading.Values{}, Failing: true}},
		// The link count read, the per-link states not (their call failed):
		// the verdict cannot say whether a link is down.
		{"nvlink states not read", "nvlink_down", RepairInput{Vals: links, Health: verdict(ReasonNVLinkDown)}, RepairInput{Vals: vals(uint64(reading.HNVLinkCount), 4)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := NewRepair("A", 0, action.History{UUID: "GPU-x"})
			cur := judgeAt(r, 0, tc.shown)
			if cur.Action < action.ResetGPU {
				t.Fatalf("shown: %v %q, want a repair", cur.Action, cur.Reasons)
			}
			r.Ack(cur, t0.Add(time.Second), "op", "")
			judgeAt(r, 2*time.Second, tc.shown)
			gap := judgeAt(r, 3*time.Second, tc.gap)
			if !tc.gap.Failing && gap.Action != action.Watch {
				t.Errorf("in the gap: %v %q, want watch: the class goes on, acknowledged", gap.Action, gap.Reasons)
			}
			cur = judgeAt(r, 4*time.Second, tc.shown)
			if n := countOf(r, tc.class); n != 1 || cur.Action != action.Watch {
				t.Errorf("after the gap: %s counted %d, action %v %q; want 1, watch (the same occurrence, acknowledged)", tc.class, n, cur.Action, cur.Reasons)
			}
		})
	}
}

// A class judged absent where its reading is present, then shown, is new.
func TestAClassAbsentWhereItsReadingIsPresentIsNew(t *testing.T) {
	r := NewRepair("A", 0, action.History{UUID: "GPU-x"})
	dbe := vals(uint64(reading.HDBEVolatile), 1)
	cur := judgeAt(r, 0, RepairInput{Vals: dbe, Health: verdict(ReasonDBE)})
	r.Ack(cur, t0.Add(time.Second), "op", "")
	judgeAt(r, 2*time.Second, RepairInput{Vals: vals(uint64(reading.HDBEVolatile), 0)})
	cur = judgeAt(r, 3*time.Second, RepairInput{Vals: dbe, Health: verdict(ReasonDBE)})
	if n := countOf(r, "ecc_dbe"); n != 2 || cur.Action != action.ResetGPU {
		t.Errorf("ecc_dbe counted %d, action %v; want 2, reset_gpu (a new occurrence)", n, cur.Action)
	}
}

// A recovery action an event reported is replaced by the field's reading:
// after the field read 0 (the GPU was reset), a timeout of the field does
// not bring the old event's class back as a new occurrence.
func TestAFieldReadReplacesARecoveryEvent(t *testing.T) {
	r := NewRepair("A", 0, action.History{UUID: "GPU-x"})
	r.Recovery(2, t0)
	cur := judgeAt(r, 0, RepairInput{Vals: vals(uint64(reading.HRecoveryAction), 2)})
	r.Ack(cur, t0.Add(time.Second), "op", "")
	judgeAt(r, 2*time.Second, RepairInput{Vals: vals(uint64(reading.HRecoveryAction), 0)})
	cur = judgeAt(r, 3*time.Second, RepairInput{Vals: vals(uint64(reading.HSRAMThreshold), 0)})
	if n := countOf(r, "recovery_2"); n != 1 || cur.Action != action.None {
		t.Errorf("recovery_2 counted %d, action %v %q; want 1, none: the field read 0 since the event", n, cur.Action, cur.Reasons)
	}
}

// A restart: an earlier run in this boot counted ecc_dbe and it was
// acknowledged. This run's first health reading lacks the DBE count (its
// field entry timed out): that is no absence, so the DBE shown next is the
// earlier run's occurrence, covered by its ack.
func TestAnAckedClassGoesOnWhenTheFirstReadingLacksIt(t *testing.T) {
	h := action.History{UUID: "GPU-x"}
	h.Count("A", "ecc_dbe", t0.Add(-time.Hour))
	h.Acknowledge(action.AckRecord{Time: t0.Add(-time.Hour + time.Second), Action: action.ResetGPU, Classes: []string{"ecc_dbe"}})
	r := NewRepair("A", 0, h)
	judgeAt(r, 0, RepairInput{})
	judgeAt(r, time.Second, RepairInput{Vals: vals(uint64(reading.HSRAMThreshold), 0)})
	cur := judgeAt(r, 2*time.Second, RepairInput{Vals: vals(uint64(reading.HRecoveryAction), 0, uint64(reading.HDBEVolatile), 1), Health: verdict(ReasonDBE)})
	if n := countOf(r, "ecc_dbe"); n != 1 || cur.Action != action.Watch {
		t.Errorf("ecc_dbe counted %d, action %v %q; want 1, watch (the earlier run's, acknowledged)", n, cur.Action, cur.Reasons)
	}
}

// A class going on through a gap in its reading keeps its place among the
// reasons: the GPU's action and reasons do not change (no ACTION line).
func TestAClassGoingOnThroughAGapKeepsItsPlace(t *testing.T) {
	r := NewRepair("A", 0, action.History{UUID: "GPU-x"})
	both := RepairInput{Vals: vals(uint64(reading.HDBEVolatile), 1, uint64(reading.HRemapPending), 1), Health: verdict(ReasonDBE, ReasonRemapPending)}
	before := judgeAt(r, 0, both)
	gap := judgeAt(r, time.Second, RepairInput{Vals: vals(uint64(reading.HRemapPending), 1), Health: verdict(ReasonRemapPending)})
	if !gap.Equal(before) || len(gap.Reasons) != 2 {
		t.Errorf("in the DBE count's gap: %v %q, want %v %q", gap.Action, gap.Reasons, before.Action, before.Reasons)
	}
	if after := judgeAt(r, 2*time.Second, both); !after.Equal(before) || countOf(r, "ecc_dbe") != 1 {
		t.Errorf("after the gap: %v %q, ecc_dbe counted %d; want %q, 1", after.Action, after.Reasons, countOf(r, "ecc_dbe"), before.Reasons)
	}
}

// A recovery action an event reports is news to the health readings taken
// before it: the judgement that takes the event in weighs the last
// sample's view (the field read 0 on a healthy GPU), which does not clear
// it; a sample that fails after it keeps it, counted once.
func TestARecoveryEventIsNotClearedByAReadingOlderThanIt(t *testing.T) {
	r := NewRepair("A", 0, action.History{UUID: "GPU-x"})
	view := RepairInput{Vals: vals(uint64(reading.HRecoveryAction), 0, uint64(reading.HDBEVolatile), 0)}
	judgeAt(r, 0, view)
	r.Recovery(2, t0.Add(time.Second))
	at := judgeAt(r, time.Second, view)
	failed := judgeAt(r, 2*time.Second, RepairInput{Vals: &reading.Values{}, Failing: true})
	if at.Action != action.Reboot || failed.Action != action.Reboot || len(failed.Reasons) != 2 {
		t.Errorf("at the event: %v %q; sample failed: %v %q; want reboot for the recovery action at both, with every NVML call failing", at.Action, at.Reasons, failed.Action, failed.Reasons)
	}
	if n := countOf(r, "recovery_2"); n != 1 {
		t.Errorf("recovery_2 counted %d, want 1", n)
	}
	judgeAt(r, 3*time.Second, RepairInput{Vals: vals(uint64(reading.HRecoveryAction), 2)}) // the field caught up
	if cur := judgeAt(r, 4*time.Second, view); cur.Action != action.None {
		t.Errorf("the field read 0 after the event: %v %q, want none", cur.Action, cur.Reasons)
	}
}

// A fast sample publishes a health view whose recovery action field was
// read by the slow health tier before the event (0), under a time after
// it: the stale 0 does not clear the event, which stands until the field
// reads its value, counted once.
func TestARecoveryEventStandsUntilTheFieldReadsIt(t *testing.T) {
	r := NewRepair("A", 0, action.History{UUID: "GPU-x"})
	stale := RepairInput{Vals: vals(uint64(reading.HRecoveryAction), 0)}
	judgeAt(r, 0, stale)
	r.Recovery(2, t0.Add(time.Second))
	for i, in := range []RepairInput{stale, stale, {Vals: vals(uint64(reading.HRecoveryAction), 2)}} {
		d := time.Second + time.Duration(i)*200*time.Millisecond
		if cur := judgeAt(r, d, in); cur.Action != action.Reboot {
			t.Errorf("judgement %d (field %v): %v %q, want reboot (the recovery action)", i, in.Vals[reading.HRecoveryAction], cur.Action, cur.Reasons)
		}
	}
	if n := countOf(r, "recovery_2"); n != 1 {
		t.Errorf("recovery_2 counted %d, want 1", n)
	}
}

// A restart in the same boot: nvlink_down acknowledged in the earlier run;
// this run's first judgement has the link count but not the links up (a
// link's state entry failed). That is no absence, so the link down read
// next is the earlier run's occurrence, covered by its ack, not counted
// again.
func TestAnAckedLinkDownGoesOnWhenTheFirstReadingLacksTheLinksUp(t *testing.T) {
	down := RepairInput{Vals: vals(uint64(reading.HNVLinkCount), 4, uint64(reading.HNVLinkUp), 3), Health: verdict(ReasonNVLinkDown)}
	early := NewRepair("A", 0, action.History{UUID: "GPU-x"})
	early.Ack(judgeAt(early, 0, down), t0.Add(time.Second), "op", "")
	judgeAt(early, 2*time.Second, down)
	h, _ := early.History()
	r := NewRepair("A", 0, h)
	judgeAt(r, 10*time.Second, RepairInput{Vals: vals(uint64(reading.HNVLinkCount), 4)})
	cur := judgeAt(r, 11*time.Second, down)
	if n := countOf(r, "nvlink_down"); n != 1 || cur.Action != action.Watch {
		t.Errorf("nvlink_down counted %d, action %v %q; want 1, watch (the earlier run's, acknowledged)", n, cur.Action, cur.Reasons)
	}
}

// A class of early (the board's UUID not yet read) whose reading is
// missing from the board's first judgement goes on through the gap, as it
// would in one Repair: read again, it is the same occurrence, counted
// once and still acknowledged.
func TestAnAbsorbedClassGoesOnThroughAGapInItsReading(t *testing.T) {
	early := NewRepair("A", 0, action.History{})
	two := RepairInput{Vals: vals(uint64(reading.HRecoveryAction), 2)}
	cur := judgeAt(early, 0, two)
	early.Ack(cur, t0.Add(time.Second), "op", "")
	judgeAt(early, 2*time.Second, two)
	r := NewRepair("A", 0, action.History{UUID: "GPU-x"})
	r.Absorb(early)
	gap := judgeAt(r, 3*time.Second, RepairInput{Vals: vals(uint64(reading.HDBEVolatile), 0)})
	cur = judgeAt(r, 4*time.Second, two)
	if n := countOf(r, "recovery_2"); n != 1 || gap.Action != action.Watch || cur.Action != action.Watch {
		t.Errorf("gap: %v %q; after: %v %q, recovery_2 counted %d; want watch, watch, 1", gap.Action, gap.Reasons, cur.Action, cur.Reasons, n)
	}
}

// A reason judged from two readings, one of which this GPU never supports
// (a driver with the channel repair field but not the TPC one; HW thermal
// slowdown's time without the power brake's), is judged absent where the
// one it has shown present reads: a reading never supported is not a gap,
// so the reason clears when that one reads clear, not held until acked.
func TestAReasonClearsWhereItsReadingNeverSupportedIsAbsent(t *testing.T) {
	for _, tc := range []struct {
		name        string
		reason      HealthReason
		shown, gone *reading.Values
	}{
		{"repair_pending without the TPC field", ReasonRepairPending,
			vals(uint64(reading.HChannelRepairPending), 1), vals(uint64(reading.HChannelRepairPending), 0)},
		{"hw_slowdown without the power brake's time", ReasonHWSlowdown,
			vals(uint64(reading.HClkHWThermal), 5), vals(uint64(reading.HClkHWThermal), 5)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := NewRepair("A", 0, action.History{UUID: "GPU-x"})
			if cur := judgeAt(r, 0, RepairInput{Vals: tc.shown, Health: verdict(tc.reason)}); cur.Action == action.None {
				t.Fatalf("shown: %v %q, want an action", cur.Action, cur.Reasons)
			}
			if cur := judgeAt(r, time.Second, RepairInput{Vals: tc.gone}); cur.Action != action.None {
				t.Errorf("its reading present and clear: %v %q, want none", cur.Action, cur.Reasons)
			}
		})
	}
}

// A recovery action an event reported stands only while the field is
// absent or reads what it read when the event came; any other value the
// field reads decides (the field moved on: an event missed or replayed
// out of order, Xid 154 of an older change read back after a fresh NVML
// event). The field read 2 (reboot); an event of 1 (reset) stands while
// the field reads 2; a third value (4) is shown and counted, and 0 clears.
func TestARecoveryEventGivesWayToAFieldThatMovedOn(t *testing.T) {
	field := func(v uint64) RepairInput { return RepairInput{Vals: vals(uint64(reading.HRecoveryAction), v)} }
	r := NewRepair("A", 0, action.History{UUID: "GPU-x"})
	judgeAt(r, 0, field(2))
	r.Recovery(1, t0.Add(time.Second))
	if cur := judgeAt(r, time.Second, field(2)); cur.Action != action.ResetGPU {
		t.Errorf("the field still reads 2: %v %q, want reset (the event, newer than the field's 2)", cur.Action, cur.Reasons)
	}
	if cur := judgeAt(r, 2*time.Second, field(4)); cur.Action != action.DrainAndReset || countOf(r, "recovery_4") != 1 {
		t.Errorf("the field reads 4: %v %q, recovery_4 counted %d; want drain and reset, counted once", cur.Action, cur.Reasons, countOf(r, "recovery_4"))
	}
	if cur := judgeAt(r, 3*time.Second, RepairInput{Vals: &reading.Values{}}); cur.Action != action.DrainAndReset {
		t.Errorf("the field absent after it read 4: %v %q, want drain and reset (4 goes on; the event does not come back)", cur.Action, cur.Reasons)
	}
	if cur := judgeAt(r, 4*time.Second, field(0)); cur.Action != action.None {
		t.Errorf("the field reads 0: %v %q, want none", cur.Action, cur.Reasons)
	}
}
