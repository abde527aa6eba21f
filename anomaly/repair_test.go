package anomaly

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/action"
	"github.com/gpu-telemetry/gpu-telemetry/reading"
	"github.com/gpu-telemetry/gpu-telemetry/xid"
)

func vals(kv ...uint64) *reading.Values {
	var v reading.Values
	for i := 0; i+1 < len(kv); i += 2 {
		v[reading.ID(kv[i])] = reading.Some(kv[i+1])
	}
	return &v
}

func verdict(rs ...HealthReason) HealthVerdict {
	var v HealthVerdict
	for _, r := range rs {
		v.Reasons |= 1 << r
	}
	return v
}

// mono is wall time t on the tests' monotonic clock: it runs with their
// wall clock, from t0.
func mono(t time.Time) time.Duration { return t.Sub(t0) }

// hung is the input of a GPU hung since since, judged at now, the wall and
// monotonic clocks in step (the monotonic clock read, as the monitor reads
// it: three hours at t0), so that these tests run the production path.
func hung(now, since time.Time) RepairInput {
	return RepairInput{Now: now, Mono: 3*time.Hour + mono(now), HungSince: since, HungFor: now.Sub(since)}
}

// TestCauses checks the action of the GPU's state, health verdict and
// recovery action field against their sources: DCGM's health watches
// (modules/health/DcgmHealthWatch.cpp, DcgmGPUHardwareLimits.h), NVML's
// recovery actions (nvml.h) and NVIDIA's memory error management guide.
func TestCauses(t *testing.T) {
	for _, tc := range []struct {
		name   string
		in     RepairInput
		want   action.Action
		source string
	}{
		{"nothing", RepairInput{}, action.None, "a healthy GPU"},
		{"DBE", RepairInput{Health: verdict(ReasonDBE)}, action.ResetGPU, "DCGM: volatile DBE > 0 fails; the remap it leaves pending applies at a reset"},
		{"remap failure", RepairInput{Health: verdict(ReasonRemapFailure)}, action.Inspect, "DCGM: remap failure fails; NVIDIA: a row-remap failure is an RMA"},
		{"remap pending", RepairInput{Health: verdict(ReasonRemapPending)}, action.ResetGPU, "NVIDIA: a pending remap applies at the next GPU reset"},
		{"remaps near the limit", RepairInput{Health: verdict(ReasonRemapNearLimit)}, action.Watch, "DCGM: 512 uncorrectable remaps warns"},
		{"memory unrepairable", RepairInput{Health: verdict(ReasonMemoryUnrepairable)}, action.Inspect, "DCGM: memory unrepairable fails; NVIDIA: an RMA"},
		{"NVLink down", RepairInput{Health: verdict(ReasonNVLinkDown)}, action.ResetGPU, "DCGM: a link down fails; catalog: Xid 74 RESET_GPU"},
		{"NVLink recovery failed", RepairInput{Health: verdict(ReasonNVLinkRecoveryFailed)}, action.ResetGPU, "DCGM NVLink5: failed recovery fails"},
		{"NVLink recovered", RepairInput{Health: verdict(ReasonNVLinkRecovered)}, action.Watch, "DCGM NVLink5: successful recovery warns"},
		{"PCIe replays", RepairInput{Health: verdict(ReasonPCIeReplays)}, action.Watch, "DCGM: replays above the rate warn"},
		{"HW slowdown", RepairInput{Health: verdict(ReasonHWSlowdown)}, action.Watch, "DCGM: violation time growing warns"},
		{"repair pending", RepairInput{Health: verdict(ReasonRepairPending)}, action.ResetGPU, "NVML: a channel or TPC repair applies at a reset"},
		{"recovery field reset", RepairInput{Vals: vals(uint64(reading.HRecoveryAction), 1), Health: verdict(ReasonRecoveryAction)}, action.ResetGPU, "nvml.h GPU_RESET; DCGM fails"},
		{"recovery field reboot", RepairInput{Vals: vals(uint64(reading.HRecoveryAction), 2)}, action.Reboot, "nvml.h NODE_REBOOT; DCGM fails"},
		{"recovery field drain P2P", RepairInput{Vals: vals(uint64(reading.HRecoveryAction), 3), Health: verdict(ReasonRecoveryDrainP2P)}, action.Watch, "nvml.h DRAIN_P2P; DCGM warns"},
		{"recovery field drain and reset", RepairInput{Vals: vals(uint64(reading.HRecoveryAction), 4)}, action.DrainAndReset, "nvml.h DRAIN_AND_RESET; DCGM fails"},
		{"recovery field IMEX domain", RepairInput{Vals: vals(uint64(reading.HRecoveryAction), 5)}, action.RecoverFabric, "nvml.h RECOVER_IMEX_DOMAIN"},
		{"recovery field bus reset", RepairInput{Vals: vals(uint64(reading.HRecoveryAction), 6)}, action.ResetGPU, "nvml.h BUS_RESET"},
		{"recovery field system reboot", RepairInput{Vals: vals(uint64(reading.HRecoveryAction), 7)}, action.Reboot, "nvml.h SYSTEM_REBOOT"},
		{"recovery field unknown", RepairInput{Vals: vals(uint64(reading.HRecoveryAction), 9)}, action.Reboot, "health-counters.md: unknown values need action"},
		{"retired pages under the limit", RepairInput{Vals: vals(uint64(reading.HRetiredSBE), 40, uint64(reading.HRetiredDBE), 22)}, action.None, "DCGM: fails at 63"},
		{"retired pages at the limit", RepairInput{Vals: vals(uint64(reading.HRetiredSBE), 40, uint64(reading.HRetiredDBE), 23)}, action.Inspect, "DCGM: retired SBE+DBE >= 63 fails"},
		{"retired pages pending", RepairInput{Vals: vals(uint64(reading.HRetiredPending), 1)}, action.ResetGPU, "DCGM: pending warns; it applies at the next reset"},
		{"lost", RepairInput{Lost: true}, action.Reboot, "NVML_ERROR_GPU_IS_LOST: a reboot (gpud: REBOOT_SYSTEM)"},
		{"missing", RepairInput{Missing: true}, action.Reboot, "not enumerated: the driver did not take it"},
		{"hung briefly", hung(t0.Add(5*time.Second), t0), action.Watch, "a slow driver"},
		{"hung a minute", hung(t0.Add(time.Minute), t0), action.Reboot, "HungReboot"},
		{"failing", RepairInput{Failing: true}, action.ResetGPU, "every call refused"},
		{"the greatest wins", RepairInput{Lost: true, Health: verdict(ReasonDBE, ReasonRemapFailure)}, action.Inspect, "least first: inspect > reboot > reset"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cur := NewRepair("b", 0, action.History{}).Judge(tc.in)
			if cur.Action != tc.want {
				t.Errorf("%v %q, want %v (%s)", cur.Action, cur.Reasons, tc.want, tc.source)
			}
			if (cur.Action == action.None) != (len(cur.Reasons) == 0) {
				t.Errorf("%v with reasons %q: every action but none has its reasons", cur.Action, cur.Reasons)
			}
		})
	}
}

// TestReasonsDecidingFirst: the reasons are in the order of their actions,
// the greatest (the one that decided) first.
func TestReasonsDecidingFirst(t *testing.T) {
	cur := NewRepair("b", 0, action.History{}).Judge(RepairInput{Lost: true, Health: verdict(ReasonDBE, ReasonPCIeReplays)})
	if cur.Action != action.Reboot || len(cur.Reasons) != 3 || !strings.Contains(cur.Reasons[0], "lost") ||
		!strings.Contains(cur.Reasons[1], "double-bit") || !strings.Contains(cur.Reasons[2], "PCIe") {
		t.Errorf("%v %q", cur.Action, cur.Reasons)
	}
}

var (
	xid79  = xid.ExplainDetail(79, reading.XidDetail{})
	xid13  = xid.ExplainDetail(13, reading.XidDetail{})
	xid154 = xid.ExplainDetail(154, xid.Detail(154, "GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot Required)"))
)

// boot runs one boot of a board: the history from the last, the Xids at
// the boot's start, the state judged; it returns the action and the
// history to carry to the next boot.
func boot(t *testing.T, h action.History, id string, n int, in RepairInput, xids ...xid.Explanation) (action.Current, action.History) {
	t.Helper()
	r := NewRepair(id, n, h)
	for _, e := range xids {
		r.Xid(e, in.Now, in.Mono)
	}
	cur := r.Judge(in)
	h, _ = r.History()
	return cur, h
}

// TestEscalatesAfterBoots: the same critical class after N reboots (the
// default 2, gpud's) escalates to inspect; an application's Xid never does.
func TestEscalatesAfterBoots(t *testing.T) {
	for _, tc := range []struct {
		name  string
		n     int
		xid   xid.Explanation
		boots []action.Action
	}{
		{"Xid 79 in three boots, the default", 0, xid79, []action.Action{action.Reboot, action.Reboot, action.Inspect, action.Inspect}},
		{"Xid 79, after 3 reboots", 3, xid79, []action.Action{action.Reboot, action.Reboot, action.Reboot, action.Inspect}},
		{"recovery action reboot", 1, xid154, []action.Action{action.Reboot, action.Inspect}},
		{"an application's Xid", 1, xid13, []action.Action{action.Watch, action.Watch, action.Watch}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var h action.History
			for i, want := range tc.boots {
				at := t0.Add(time.Duration(i) * time.Hour)
				var cur action.Current
				cur, h = boot(t, h, "boot"+string(rune('A'+i)), tc.n, RepairInput{Now: at}, tc.xid)
				if cur.Action != want {
					t.Fatalf("boot %d: %v %q, want %v", i+1, cur.Action, cur.Reasons, want)
				}
				if want == action.Inspect && !strings.Contains(cur.Reason(), "earlier boots") {
					t.Errorf("boot %d: %q does not say why it escalated", i+1, cur.Reason())
				}
			}
		})
	}
}

// TestBootWithoutTheFaultDoesNotCount: boots without the class are not
// counted; a boot where it recurs is.
func TestBootWithoutTheFaultDoesNotCount(t *testing.T) {
	var h action.History
	var cur action.Current
	cur, h = boot(t, h, "A", 0, RepairInput{Now: t0}, xid79)
	cur, h = boot(t, h, "B", 0, RepairInput{Now: t0.Add(time.Hour)})
	if cur.Action != action.None {
		t.Fatalf("boot B: %v", cur.Action)
	}
	cur, h = boot(t, h, "C", 0, RepairInput{Now: t0.Add(2 * time.Hour)}, xid79)
	if cur.Action != action.Reboot {
		t.Fatalf("boot C (one earlier boot with Xid 79): %v %q", cur.Action, cur.Reasons)
	}
	cur, _ = boot(t, h, "D", 0, RepairInput{Now: t0.Add(3 * time.Hour)}, xid79)
	if cur.Action != action.Inspect {
		t.Fatalf("boot D (two earlier boots with Xid 79): %v %q", cur.Action, cur.Reasons)
	}
}

// TestWarmRebootDidNotRecover: a board whose previous boot ended in Xid 79
// or a recovery action and that is missing or fails to initialise now is
// power-cycled (NVIDIA/open-gpu-kernel-modules 1353, 1200).
func TestWarmRebootDidNotRecover(t *testing.T) {
	for _, tc := range []struct {
		name string
		prev xid.Explanation
		now  RepairInput
		init bool
		want action.Action
	}{
		{"missing after Xid 79", xid79, RepairInput{Missing: true}, false, action.PowerCycle},
		{"failing after Xid 79", xid79, RepairInput{Failing: true}, false, action.PowerCycle},
		{"lost after Xid 154", xid154, RepairInput{Lost: true}, false, action.PowerCycle},
		{"RmInitAdapter failed after Xid 79", xid79, RepairInput{}, true, action.PowerCycle},
		{"answering after Xid 79", xid79, RepairInput{}, false, action.None},
		{"missing after an application's Xid", xid13, RepairInput{Missing: true}, false, action.Reboot},
		// Recovery action 5 asks to recover the fabric, which a reboot
		// does not do: the warm reboot was not the remedy asked for.
		{"missing after recovery action 5", xid.ExplainDetail(154, xid.Detail(154, "GPU recovery action changed from 0x0 (None) to 0x5 (IMEX Domain Recovery)")), RepairInput{Missing: true}, false, action.Reboot},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, h := boot(t, action.History{}, "A", 0, RepairInput{Now: t0}, tc.prev)
			r := NewRepair("B", 0, h)
			if tc.init {
				r.InitFailed()
			}
			tc.now.Now = t0.Add(time.Hour)
			cur := r.Judge(tc.now)
			if cur.Action != tc.want {
				t.Fatalf("%v %q, want %v", cur.Action, cur.Reasons, tc.want)
			}
			if tc.want == action.PowerCycle && !strings.HasPrefix(cur.Reasons[0], "warm reboot did not recover it") {
				t.Errorf("reasons %q", cur.Reasons)
			}
		})
	}
}

// TestMissingAckHoldsWhileTheBoardStaysMissing: a board acknowledged while
// it is missing (sent back, the slot left empty) stays quiet through the
// reboots and logger restarts it stays missing for, as docs/actions.md
// says; unacknowledged, it is raised at each boot and escalates; once it
// answers again, a later absence is a new event.
func TestMissingAckHoldsWhileTheBoardStaysMissing(t *testing.T) {
	missing := func(at time.Duration) RepairInput { return RepairInput{Now: t0.Add(at), Missing: true} }
	_, h := boot(t, action.History{}, "A", 0, RepairInput{Now: t0, Answered: true}) // seen, quiet

	// Unacknowledged: raised at each boot, then escalated.
	cur, hu := boot(t, h, "B", 0, missing(time.Hour))
	if cur.Action != action.Reboot {
		t.Fatalf("boot B: %v", cur)
	}
	cur, hu = boot(t, hu, "C", 0, missing(2*time.Hour))
	if cur.Action != action.Reboot {
		t.Fatalf("boot C, not acknowledged: %v", cur)
	}
	if cur, _ = boot(t, hu, "D", 0, missing(3*time.Hour)); cur.Action != action.Inspect {
		t.Fatalf("boot D, not acknowledged (two earlier boots missing): %v", cur)
	}

	// Acknowledged in boot B.
	r := NewRepair("B", 0, h)
	cur = r.Judge(missing(time.Hour))
	r.Ack(cur, t0.Add(time.Hour+time.Minute), "root", "board sent back")
	if cur = r.Judge(missing(time.Hour + 2*time.Minute)); cur.Action != action.Watch {
		t.Fatalf("after the ack: %v", cur)
	}
	h, _ = r.History()
	if cur, _ = boot(t, h, "B", 0, missing(time.Hour+3*time.Minute)); cur.Action != action.Watch {
		t.Errorf("the logger restarted in boot B: %v", cur)
	}
	for i, id := range []string{"C", "D", "E"} {
		cur, h = boot(t, h, id, 0, missing(time.Duration(i+2)*time.Hour))
		if cur.Action != action.Watch || !strings.HasSuffix(cur.Reasons[0], "(acknowledged)") {
			t.Fatalf("boot %s, still missing: %v %q", id, cur.Action, cur.Reasons)
		}
	}
	// It answers in boot F, then is missing again in G: a new absence.
	if cur, h = boot(t, h, "F", 0, RepairInput{Now: t0.Add(6 * time.Hour), Answered: true}); cur.Action != action.None {
		t.Fatalf("boot F, answering: %v", cur)
	}
	if cur, _ = boot(t, h, "G", 0, missing(7*time.Hour)); cur.Action != action.Reboot {
		t.Errorf("boot G, missing again after answering in F: %v", cur)
	}
	// Answering earlier in the boot ends the absence too: the logger
	// restarted in F (a driver reload) and the board is missing.
	if cur, _ = boot(t, h, "F", 0, missing(6*time.Hour+time.Minute)); cur.Action != action.Reboot {
		t.Errorf("boot F, missing after it answered in F: %v", cur)
	}
}

// TestHangThatTurnsToRebootCounts: a hang begins as watch (a slow driver)
// and asks for a reboot after HungReboot; it is counted in the boot's
// history then, once, so hangs in two earlier boots escalate to inspect.
func TestHangThatTurnsToRebootCounts(t *testing.T) {
	h := action.History{}
	for i, id := range []string{"A", "B", "C"} {
		start := t0.Add(time.Duration(i) * time.Hour)
		r := NewRepair(id, 0, h)
		if cur := r.Judge(hung(start.Add(5*time.Second), start)); cur.Action != action.Watch {
			t.Fatalf("boot %s, hung briefly: %v", id, cur)
		}
		cur := r.Judge(hung(start.Add(time.Minute), start))
		r.Judge(hung(start.Add(2*time.Minute), start))
		h, _ = r.History()
		if c := h.Boot(id).Classes["hung"]; c.Count != 1 || !c.Last.Equal(start.Add(5*time.Second)) {
			t.Errorf("boot %s: hung counted %+v, want once, as of when it began", id, c)
		}
		want := action.Reboot
		if i == 2 {
			want = action.Inspect // hung in two earlier boots
		}
		if cur.Action != want {
			t.Errorf("boot %s, hung a minute: %v %q, want %v", id, cur.Action, cur.Reasons, want)
		}
	}
}

// TestHangAckedAtWatchStillAsksForReboot: an ack given while a hang was
// still watch (a slow driver the operator knows of) acknowledges watch, not
// the reboot the same hang asks for after HungReboot: the GPU's action is
// then reboot, and the boot's history counts the hang unacknowledged (so
// it escalates across boots).
func TestHangAckedAtWatchStillAsksForReboot(t *testing.T) {
	r := NewRepair("A", 0, action.History{})
	cur := r.Judge(hung(t0.Add(5*time.Second), t0))
	if cur.Action != action.Watch {
		t.Fatalf("hung briefly: %v", cur)
	}
	r.Ack(cur, t0.Add(10*time.Second), "root", "slow driver, known")
	if cur = r.Judge(hung(t0.Add(20*time.Second), t0)); cur.Action != action.Watch || !strings.Contains(cur.Reason(), "acknowledged") {
		t.Fatalf("after the ack of watch: %v %q", cur.Action, cur.Reasons)
	}
	cur = r.Judge(hung(t0.Add(time.Minute), t0))
	if cur.Action != action.Reboot || strings.Contains(cur.Reason(), "acknowledged") {
		t.Errorf("hung a minute after an ack of watch: %v %q, want reboot", cur.Action, cur.Reasons)
	}
	h, _ := r.History()
	if c := h.Boot("A").Classes["hung"]; c.Count != 1 || h.IsAcked("hung", c.Last) {
		t.Errorf("hung counted %+v, acked %v: want once, not acknowledged", c, h.IsAcked("hung", c.Last))
	}
}

// TestNewHangBetweenJudgementsIsNew: a hang that ends and another that
// begins between two judgements are two hangs: an ack of the first does
// not cover the second, which asks for its own reboot and is counted
// again.
func TestNewHangBetweenJudgementsIsNew(t *testing.T) {
	r := NewRepair("A", 0, action.History{})
	r.Judge(hung(t0.Add(5*time.Second), t0))
	cur := r.Judge(hung(t0.Add(time.Minute), t0))
	if cur.Action != action.Reboot {
		t.Fatalf("first hang, a minute: %v", cur)
	}
	r.Ack(cur, t0.Add(time.Minute+time.Second), "root", "")
	second := t0.Add(time.Minute + 1500*time.Millisecond) // the first ended, the second began, both within the judging round
	if cur = r.Judge(hung(t0.Add(time.Minute+2*time.Second), second)); cur.Action != action.Watch || strings.Contains(cur.Reason(), "acknowledged") {
		t.Errorf("second hang, briefly: %v %q, want watch, not acknowledged", cur.Action, cur.Reasons)
	}
	if cur = r.Judge(hung(second.Add(time.Minute), second)); cur.Action != action.Reboot {
		t.Errorf("second hang, a minute: %v %q, want reboot", cur.Action, cur.Reasons)
	}
	h, _ := r.History()
	if c := h.Boot("A").Classes["hung"]; c.Count != 2 {
		t.Errorf("hung counted %+v, want twice", c)
	}
}

// TestHangAgeIsOnTheMonotonicClock: a hang's age is HungFor (the monotonic
// clock), not Now less HungSince (the wall clock, which chrony's makestep
// steps): a forward step larger than HungReboot during a short hang leaves
// it watch, not a reboot counted in the board's history; a backward step
// does not hold its reboot off. (Now goes forward or holds, as the monitor
// gives it: a judgement is never earlier than the last.)
func TestHangAgeIsOnTheMonotonicClock(t *testing.T) {
	type judgement struct {
		now     time.Time
		age     time.Duration
		want    action.Action
		wantWhy string // a reason's words, "" for any
	}
	for _, tc := range []struct {
		name      string
		judge     []judgement
		wantCount uint64
	}{
		{"wall stepped forward past HungReboot", []judgement{
			{t0.Add(2 * time.Second), 2 * time.Second, action.Watch, "stuck past the deadline"},
			{t0.Add(3*time.Second + 2*time.Minute), 3 * time.Second, action.Watch, "stuck past the deadline"},
			{t0.Add(4*time.Second + 2*time.Minute), 4 * time.Second, action.Watch, "stuck past the deadline"},
		}, 0},
		{"wall stepped back", []judgement{
			{t0.Add(5 * time.Second), 5 * time.Second, action.Watch, "stuck past the deadline"},
			{t0.Add(5 * time.Second), 30 * time.Second, action.Watch, "stuck past the deadline"}, // 5 min back: the monitor holds Now
			{t0.Add(5 * time.Second), time.Minute + 1500*time.Millisecond, action.Reboot, "stuck for 1m1s"},
		}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := NewRepair("A", 0, action.History{})
			for i, j := range tc.judge {
				cur := r.Judge(RepairInput{Now: j.now, HungSince: t0, HungFor: j.age})
				if cur.Action != j.want || !strings.Contains(cur.Reason(), j.wantWhy) {
					t.Errorf("judgement %d (hung %v, %v on the wall clock): %v %q, want %v %q", i, j.age, j.now.Sub(t0), cur.Action, cur.Reasons, j.want, j.wantWhy)
				}
			}
			h, _ := r.History()
			if c := h.Boot("A").Classes["hung"]; c.Count != tc.wantCount || (c.Count > 0 && !c.Last.Equal(tc.judge[0].now)) {
				t.Errorf("hung counted %+v, want %d, as of the first judgement", c, tc.wantCount)
			}
		})
	}
}

// TestAbsorb: what a GPU's judge counted from its state while its UUID was
// not known goes into its board's history once it is: a class that began in
// this run is counted (and written), one that goes on from an earlier run of
// the logger in this boot keeps its count and its acknowledgement; Xid
// classes are not taken (their events are given again); earlier boots are
// left alone.
func TestAbsorb(t *testing.T) {
	h := action.History{UUID: "GPU-b"}
	h.Count("boot-0", "ecc_dbe", t0.Add(-time.Hour))
	h.Count("boot-1", "lost", t0)
	h.Acknowledge(action.AckRecord{Time: t0.Add(30 * time.Second), Action: action.Reboot, Classes: []string{"lost"}})

	early := NewRepair("boot-1", 0, action.History{}) // the logger restarted in boot-1: the GPU is stuck
	early.Xid(xid79, t0.Add(time.Minute), mono(t0.Add(time.Minute)))
	early.Judge(RepairInput{Now: t0.Add(time.Minute), Lost: true})
	early.Judge(RepairInput{Now: t0.Add(2 * time.Minute), Failing: true})

	r := NewRepair("boot-1", 0, h)
	r.History() // as read: nothing to write
	r.Absorb(early)
	got, dirty := r.History()
	if !dirty {
		t.Errorf("the absorbed history is not to be written")
	}
	b := got.Boot("boot-1")
	if c := b.Classes["lost"]; c.Count != 1 || !c.Last.Equal(t0) {
		t.Errorf("lost %+v, want the earlier run's (1 at t0): it went on", c)
	}
	if c := b.Classes["failing"]; c.Count != 1 || !c.Last.Equal(t0.Add(2*time.Minute)) {
		t.Errorf("failing %+v, want 1 at +2m", c)
	}
	if _, ok := b.Classes["xid79"]; ok {
		t.Errorf("the Xid class absorbed: %+v", b.Classes)
	}
	if prev := got.Boot("boot-0"); len(prev.Classes) != 1 || prev.Classes["ecc_dbe"].Count != 1 {
		t.Errorf("another boot changed: %+v", prev)
	}
	// Lost again after early's last judgement found it failing: a new
	// loss, as the board judges it itself, which the earlier run's ack
	// does not cover.
	if cur := r.Judge(RepairInput{Now: t0.Add(3 * time.Minute), Lost: true}); cur.Action != action.Reboot {
		t.Errorf("lost again since early's last judgement: %v %q, want reboot", cur.Action, cur.Reasons)
	}
	if got, _ := r.History(); got.Boot("boot-1").Classes["lost"].Count != 2 {
		t.Errorf("lost %+v, want 2: the earlier run's and the new one", got.Boot("boot-1").Classes["lost"])
	}
	// Still lost at early's last judgement: the earlier run's loss goes on,
	// acknowledged.
	early = NewRepair("boot-1", 0, action.History{})
	early.Judge(RepairInput{Now: t0.Add(time.Minute), Lost: true})
	early.Judge(RepairInput{Now: t0.Add(2 * time.Minute), Lost: true})
	r = NewRepair("boot-1", 0, h)
	r.Absorb(early)
	if cur := r.Judge(RepairInput{Now: t0.Add(3 * time.Minute), Lost: true}); cur.Action != action.Watch {
		t.Errorf("still lost, acknowledged by the earlier run: %v %q", cur.Action, cur.Reasons)
	}
	if got, _ := r.History(); got.Boot("boot-1").Classes["lost"].Count != 1 {
		t.Errorf("lost %+v, want the earlier run's count: it went on", got.Boot("boot-1").Classes["lost"])
	}

	// A GPU that answered before its UUID was read came back in this boot:
	// after Xid 79 in the boot before, a fault now is not a warm reboot
	// that failed.
	_, h = boot(t, action.History{UUID: "GPU-c"}, "A", 0, RepairInput{Now: t0}, xid79)
	early = NewRepair("B", 0, action.History{})
	early.Judge(RepairInput{Now: t0.Add(time.Hour), Answered: true})
	r = NewRepair("B", 0, h)
	r.Absorb(early)
	if cur := r.Judge(RepairInput{Now: t0.Add(time.Hour + time.Minute), Failing: true}); cur.Action == action.PowerCycle {
		t.Errorf("the board answered in this boot before its UUID was known: %v %q", cur.Action, cur.Reasons)
	}
}

// TestAbsorbAckTheHistoryEscalates: an ack made by index while the GPU's
// UUID did not read covers what was acknowledged, not more. Xid 79 in
// inspectAfter earlier boots makes the board's action inspect; early,
// without the history, asked for a reboot, and an ack of reboot does not
// cover inspect: once the UUID reads, the board asks for inspect and needs
// its own ack, while a class the history does not escalate (a DBE) stays
// acknowledged.
func TestAbsorbAckTheHistoryEscalates(t *testing.T) {
	var h action.History
	for i := range action.DefaultInspectAfter {
		_, h = boot(t, h, bootName(i), 0, RepairInput{Now: t0.Add(time.Duration(i) * time.Hour)}, xid79)
	}
	now := t0.Add(10 * time.Hour)
	early := NewRepair("C", 0, action.History{})
	early.Xid(xid79, now, mono(now))
	cur := early.Judge(RepairInput{Now: now, Health: verdict(ReasonDBE)})
	if cur.Action != action.Reboot {
		t.Fatalf("early, without the history: %v %q, want reboot", cur.Action, cur.Reasons)
	}
	early.Ack(cur, now.Add(time.Second), "root", "")

	r := NewRepair("C", 0, h)
	if got := r.Absorb(early); !slices.Equal(got, []string{"xid79"}) {
		t.Errorf("Absorb left out %q of the ack, want xid79", got)
	}
	r.Xid(xid79, now, mono(now)) // the early events, given again
	cur = r.Judge(RepairInput{Now: now.Add(2 * time.Second), Health: verdict(ReasonDBE)})
	if cur.Action != action.Inspect || !strings.Contains(cur.Reason(), "earlier boots") {
		t.Errorf("the board, its UUID read: %v %q, want inspect", cur.Action, cur.Reasons)
	}
	if len(cur.Reasons) != 2 || !strings.HasSuffix(cur.Reasons[1], "(acknowledged)") {
		t.Errorf("the DBE's ack was dropped: %q", cur.Reasons)
	}
	noDBE := vals(uint64(reading.HDBEVolatile), 0) // the DBE gone is read gone
	cur = r.Judge(RepairInput{Now: now.Add(3 * time.Second), Vals: noDBE})
	r.Ack(cur, now.Add(4*time.Second), "root", "")
	if cur = r.Judge(RepairInput{Now: now.Add(5 * time.Second), Vals: noDBE}); cur.Action != action.None {
		t.Errorf("after the board's own ack of inspect: %v %q", cur.Action, cur.Reasons)
	}
}

// TestAck: an acknowledgement returns the action to none (an event) or
// watch (a condition that still holds) until a new event.
func TestAck(t *testing.T) {
	r := NewRepair("A", 0, action.History{})
	r.Xid(xid79, t0, mono(t0))
	in := RepairInput{Now: t0, Health: verdict(ReasonDBE), Vals: vals(uint64(reading.HDBEVolatile), 1)} // the health readings, as the monitor gives them: the DBE gone is read gone
	cur := r.Judge(in)
	if cur.Action != action.Reboot {
		t.Fatalf("before: %v", cur.Action)
	}
	ack := r.Ack(cur, t0.Add(time.Minute), "root", "reseated")
	if ack.Action != action.Reboot || !slices.Equal(ack.Classes, []string{"ecc_dbe", "xid79"}) {
		t.Fatalf("ack %+v", ack)
	}
	in.Now = t0.Add(2 * time.Minute)
	if cur = r.Judge(in); cur.Action != action.Watch || !strings.Contains(cur.Reason(), "acknowledged") {
		t.Fatalf("after the ack, with the DBE still counted: %v %q", cur.Action, cur.Reasons)
	}
	in.Health, in.Vals = HealthVerdict{}, vals(uint64(reading.HDBEVolatile), 0)
	if cur = r.Judge(in); cur.Action != action.None {
		t.Fatalf("after the ack, the DBE gone: %v %q", cur.Action, cur.Reasons)
	}
	// A restart of the logger in the same boot keeps the ack.
	h, dirty := r.History()
	if !dirty {
		t.Fatal("the ack did not mark the history to be written")
	}
	r2 := NewRepair("A", 0, h)
	if cur = r2.Judge(in); cur.Action != action.None {
		t.Fatalf("restarted in the same boot: %v %q", cur.Action, cur.Reasons)
	}
	// A new event is not covered.
	in.Health = verdict(ReasonDBE)
	in.Now = t0.Add(3 * time.Minute)
	if cur = r2.Judge(in); cur.Action != action.ResetGPU {
		t.Fatalf("the DBE again: %v %q", cur.Action, cur.Reasons)
	}
	r2.Xid(xid79, t0.Add(4*time.Minute), mono(t0.Add(4*time.Minute)))
	if cur = r2.Judge(in); cur.Action != action.Reboot {
		t.Fatalf("Xid 79 again: %v %q", cur.Action, cur.Reasons)
	}
}

// TestAckedBootsDoNotEscalate: boots before an acknowledgement of a class
// do not count towards its escalation.
func TestAckedBootsDoNotEscalate(t *testing.T) {
	var h action.History
	_, h = boot(t, h, "A", 0, RepairInput{Now: t0}, xid79)
	r := NewRepair("B", 0, h)
	r.Xid(xid79, t0.Add(time.Hour), mono(t0.Add(time.Hour)))
	cur := r.Judge(RepairInput{Now: t0.Add(time.Hour)})
	r.Ack(cur, t0.Add(time.Hour+time.Minute), "root", "")
	h, _ = r.History()
	if cur, _ = boot(t, h, "C", 0, RepairInput{Now: t0.Add(2 * time.Hour)}, xid79); cur.Action != action.Reboot {
		t.Fatalf("boot C after the ack: %v %q, want reboot", cur.Action, cur.Reasons)
	}
}

// TestALaterAckKeepsAnEarlierOne: an ack of one class does not bring back
// the boots before an earlier ack of another (docs/actions.md: the boots
// before the ack no longer count).
func TestALaterAckKeepsAnEarlierOne(t *testing.T) {
	var h action.History
	_, h = boot(t, h, "A", 0, RepairInput{Now: t0}, xid79)
	_, h = boot(t, h, "B", 0, RepairInput{Now: t0.Add(time.Hour)}, xid79)
	r := NewRepair("C", 0, h)
	r.Xid(xid79, t0.Add(2*time.Hour), mono(t0.Add(2*time.Hour)))
	cur := r.Judge(RepairInput{Now: t0.Add(2 * time.Hour)})
	if cur.Action != action.Inspect {
		t.Fatalf("boot C: %v %q", cur.Action, cur.Reasons)
	}
	r.Ack(cur, t0.Add(2*time.Hour+time.Minute), "root", "board swapped")
	h, _ = r.History()
	r = NewRepair("D", 0, h)
	in := RepairInput{Now: t0.Add(3 * time.Hour), Health: verdict(ReasonDBE)}
	cur = r.Judge(in)
	r.Ack(cur, t0.Add(3*time.Hour+time.Minute), "root", "")
	h, _ = r.History()
	if cur, _ = boot(t, h, "E", 0, RepairInput{Now: t0.Add(4 * time.Hour)}, xid79); cur.Action != action.Reboot {
		t.Fatalf("boot E, one Xid 79 after the board was swapped: %v %q, want reboot", cur.Action, cur.Reasons)
	}
}

// TestRestartInTheSameBoot: the logger restarted in the same boot keeps the
// boot's Xid causes and does not count them again.
func TestRestartInTheSameBoot(t *testing.T) {
	_, h := boot(t, action.History{}, "A", 0, RepairInput{Now: t0}, xid79)
	r := NewRepair("A", 0, h)
	cur := r.Judge(RepairInput{Now: t0.Add(time.Minute)})
	if cur.Action != action.Reboot {
		t.Fatalf("%v %q", cur.Action, cur.Reasons)
	}
	h2, _ := r.History()
	if n := h2.Boots[0].Classes["xid79"].Count; len(h2.Boots) != 1 || n != 1 {
		t.Errorf("boots %+v", h2.Boots)
	}
}

// TestWatchXidExpires: an Xid that asks only to be watched holds for an
// hour.
func TestWatchXidExpires(t *testing.T) {
	r := NewRepair("A", 0, action.History{})
	r.Xid(xid13, t0, mono(t0))
	if cur := r.Judge(RepairInput{Now: t0.Add(59 * time.Minute), Mono: 59 * time.Minute}); cur.Action != action.Watch {
		t.Fatalf("%v", cur.Action)
	}
	if cur := r.Judge(RepairInput{Now: t0.Add(61 * time.Minute), Mono: 61 * time.Minute}); cur.Action != action.None {
		t.Fatalf("%v", cur.Action)
	}
}

// TestXidAgeIsOnTheMonotonicClock: an application's Xid is watched for an
// hour on the monotonic clock since it last came. A step of the wall clock
// (chrony's makestep, date -s) between the Xid and a judgement neither ends
// the watch at once (forward) nor holds it past the hour (back); a second
// Xid of the class after a step back starts the hour again. An Xid taken up
// from the board's history (a restart of the logger in the same boot) has
// only its wall time, and ages on the wall clock.
func TestXidAgeIsOnTheMonotonicClock(t *testing.T) {
	type judgement struct {
		wall, mono time.Duration // from the first Xid, on either clock
		want       action.Action
	}
	for _, tc := range []struct {
		name    string
		history bool            // the Xid taken up from the history, not given
		again   []time.Duration // a second Xid 13, at wall and mono
		judge   []judgement
	}{
		{"forward past the hour", false, nil, []judgement{
			{2 * time.Hour, 5 * time.Second, action.Watch},
			{2*time.Hour + 59*time.Minute, 59 * time.Minute, action.Watch},
			{3*time.Hour + time.Minute, 61 * time.Minute, action.None},
		}},
		{"back", false, nil, []judgement{
			{-2*time.Hour + 5*time.Second, 5 * time.Second, action.Watch},
			{-2*time.Hour + 61*time.Minute, 61 * time.Minute, action.None},
		}},
		{"again after a step back", false, []time.Duration{-2*time.Hour + 50*time.Minute, 50 * time.Minute}, []judgement{
			{-2*time.Hour + 50*time.Minute, 50 * time.Minute, action.Watch},
			{-2*time.Hour + 109*time.Minute, 109 * time.Minute, action.Watch},
			{-2*time.Hour + 111*time.Minute, 111 * time.Minute, action.None},
		}},
		{"from the history", true, nil, []judgement{
			{59 * time.Minute, 2 * time.Hour, action.Watch},
			{61 * time.Minute, 5 * time.Second, action.None},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mono0 := 100 * time.Second
			var h action.History
			if tc.history {
				h.Count("A", "xid13", t0)
			}
			r := NewRepair("A", 0, h)
			if !tc.history {
				r.Xid(xid13, t0, mono0)
			}
			if cur := r.Judge(RepairInput{Now: t0, Mono: mono0}); cur.Action != action.Watch {
				t.Fatalf("at the Xid: %v %q", cur.Action, cur.Reasons)
			}
			if tc.again != nil {
				r.Xid(xid13, t0.Add(tc.again[0]), mono0+tc.again[1])
			}
			for i, j := range tc.judge {
				if cur := r.Judge(RepairInput{Now: t0.Add(j.wall), Mono: mono0 + j.mono}); cur.Action != j.want {
					t.Errorf("judgement %d (%v on the monotonic clock, %v on the wall clock): %v %q, want %v", i, j.mono, j.wall, cur.Action, cur.Reasons, j.want)
				}
			}
		})
	}
}

// TestHistoryKeepsMaxBoots: the history keeps the newest boots only.
func TestHistoryKeepsMaxBoots(t *testing.T) {
	var h action.History
	for i := range action.MaxBoots + 3 {
		_, h = boot(t, h, "boot"+bootName(i), 0, RepairInput{Now: t0.Add(time.Duration(i) * time.Hour)}, xid79)
	}
	if len(h.Boots) != action.MaxBoots || h.Boots[len(h.Boots)-1].BootID != "boot"+bootName(action.MaxBoots+2) {
		t.Errorf("%d boots, last %q", len(h.Boots), h.Boots[len(h.Boots)-1].BootID)
	}
}

func bootName(i int) string { return string(rune('a'+i/26)) + string(rune('a'+i%26)) }

// TestWarmRebootLooksAtThePreviousBootOnly: a boot in which the board
// answered after the one with Xid 79 means a warm reboot did bring it
// back; failing two boots later is not a power cycle.
func TestWarmRebootLooksAtThePreviousBootOnly(t *testing.T) {
	_, h := boot(t, action.History{}, "A", 0, RepairInput{Now: t0}, xid79)
	_, h = boot(t, h, "B", 0, RepairInput{Now: t0.Add(time.Hour)})
	cur, _ := boot(t, h, "C", 0, RepairInput{Now: t0.Add(2 * time.Hour), Failing: true})
	if cur.Action != action.ResetGPU {
		t.Errorf("%v %q, want reset_gpu (failing), not a power cycle", cur.Action, cur.Reasons)
	}
}

// TestWarmRebootThatWorked: a board that answered in this boot after an
// Xid 79 in the one before came back from the warm reboot; a new Xid 79
// and a failure later in the boot are judged as themselves (a reboot),
// also after a restart of the logger in the same boot.
func TestWarmRebootThatWorked(t *testing.T) {
	_, h := boot(t, action.History{}, "A", 0, RepairInput{Now: t0}, xid79)
	r := NewRepair("B", 0, h)
	if cur := r.Judge(RepairInput{Now: t0.Add(time.Hour), Answered: true}); cur.Action != action.None {
		t.Fatalf("answering: %v %q", cur.Action, cur.Reasons)
	}
	r.Xid(xid79, t0.Add(2*time.Hour), mono(t0.Add(2*time.Hour)))
	in := RepairInput{Now: t0.Add(2 * time.Hour), Lost: true}
	if cur := r.Judge(in); cur.Action != action.Reboot || strings.Contains(cur.Reason(), "warm reboot") {
		t.Fatalf("Xid 79 later in the boot: %v %q, want reboot", cur.Action, cur.Reasons)
	}
	h, _ = r.History()
	if cur := NewRepair("B", 0, h).Judge(in); cur.Action != action.Reboot || strings.Contains(cur.Reason(), "warm reboot") {
		t.Fatalf("restarted in the same boot: %v %q, want reboot", cur.Action, cur.Reasons)
	}
}

// TestReasonsStable: the reasons keep their order from one Judge to the
// next (no change without an event): the Xids in the order they happened.
func TestReasonsStable(t *testing.T) {
	r := NewRepair("A", 0, action.History{})
	for i, code := range []int{119, 62, 79, 48} {
		at := t0.Add(time.Duration(i) * time.Second)
		r.Xid(xid.ExplainDetail(code, reading.XidDetail{}), at, mono(at))
	}
	first := r.Judge(RepairInput{Now: t0.Add(time.Minute)})
	for i := range 20 {
		if cur := r.Judge(RepairInput{Now: t0.Add(time.Minute + time.Duration(i)*time.Second)}); !cur.Equal(first) {
			t.Fatalf("judge %d: %q, then %q", i, first.Reasons, cur.Reasons)
		}
	}
	if !strings.HasPrefix(first.Reasons[0], "Xid 79") || !strings.HasPrefix(first.Reasons[1], "Xid 119") || !strings.HasPrefix(first.Reasons[2], "Xid 62") {
		t.Errorf("reasons %q: the deciding first, then in the order they happened", first.Reasons)
	}
}

// TestAbsorbAckOfAHangAtWatch: an ack made by index of a hang at watch
// (a GPU stuck at start) covers that hang in its board's judge once the
// UUID reads: while the same hang goes on it is watch, acknowledged, as
// early showed it; the reboot it asks for after HungReboot is still not
// covered, and a hang that began after early's last judgement is a new
// one, not covered either.
func TestAbsorbAckOfAHangAtWatch(t *testing.T) {
	start := t0.Add(10 * time.Second) // the ack's judgement
	for _, tc := range []struct {
		name  string
		in    RepairInput // the board's first judgement, its UUID read
		want  action.Action
		acked bool   // the hang's reason says "(acknowledged)"
		count uint64 // hung in this boot's history
	}{
		{"the same hang goes on", hung(start.Add(5*time.Second), t0), action.Watch, true, 0},
		{"the same hang past HungReboot", hung(t0.Add(HungReboot), t0), action.Reboot, false, 1},
		{"a new hang", hung(start.Add(5*time.Second), start.Add(2*time.Second)), action.Watch, false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			early := NewRepair("A", 0, action.History{})
			early.Judge(hung(t0.Add(5*time.Second), t0))
			cur := early.Judge(hung(start, t0))
			if cur.Action != action.Watch {
				t.Fatalf("early, hung briefly: %v %q", cur.Action, cur.Reasons)
			}
			early.Ack(cur, start, "root", "slow driver, known")

			r := NewRepair("A", 0, action.History{UUID: "GPU-b"})
			if esc := r.Absorb(early); len(esc) > 0 {
				t.Errorf("Absorb left %q out of the ack of watch", esc)
			}
			cur = r.Judge(tc.in)
			if cur.Action != tc.want || strings.Contains(cur.Reason(), "(acknowledged)") != tc.acked {
				t.Errorf("the board, its UUID read: %v %q, want %v, acknowledged %v", cur.Action, cur.Reasons, tc.want, tc.acked)
			}
			h, _ := r.History()
			if c := h.Boot("A").Classes["hung"]; c.Count != tc.count || c.Count > 0 && h.IsAcked("hung", c.Last) {
				t.Errorf("hung in the board's history %+v, acknowledged %v: want %d, not acknowledged", c, h.IsAcked("hung", c.Last), tc.count)
			}
		})
	}
}

// TestAckAtWatchOfAHangThisBootCounted: this boot's history already holds
// hung (an earlier run of the logger counted a hang at reboot), so the
// hang this run finds goes on from it; an ack given while it is watch, by
// UUID or by index before the UUID read, covers watch: the reboot the
// same hang asks for after HungReboot is a new occurrence, counted and not
// acknowledged.
func TestAckAtWatchOfAHangThisBootCounted(t *testing.T) {
	var h action.History
	h.Count("A", "hung", t0) // an earlier run in this boot
	start := t0.Add(10 * time.Minute)
	for _, tc := range []struct {
		name  string
		board func() *Repair // the board's judge after the ack at watch
	}{
		{"acked by UUID", func() *Repair {
			r := NewRepair("A", 0, h)
			cur := r.Judge(hung(start.Add(5*time.Second), start))
			if cur.Action != action.Watch || strings.Contains(cur.Reason(), "acknowledged") {
				t.Fatalf("hung briefly: %v %q, want watch", cur.Action, cur.Reasons)
			}
			r.Ack(cur, start.Add(10*time.Second), "root", "slow driver, known")
			return r
		}},
		{"acked by index", func() *Repair {
			early := NewRepair("A", 0, action.History{})
			cur := early.Judge(hung(start.Add(5*time.Second), start))
			early.Ack(cur, start.Add(10*time.Second), "root", "slow driver, known")
			r := NewRepair("A", 0, h)
			if esc := r.Absorb(early); len(esc) > 0 {
				t.Errorf("Absorb left %q out of the ack of watch", esc)
			}
			return r
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.board()
			if cur := r.Judge(hung(start.Add(20*time.Second), start)); cur.Action != action.Watch || !strings.Contains(cur.Reason(), "acknowledged") {
				t.Errorf("after the ack of watch: %v %q, want watch (acknowledged)", cur.Action, cur.Reasons)
			}
			reboot := start.Add(HungReboot)
			if cur := r.Judge(hung(reboot, start)); cur.Action != action.Reboot || strings.Contains(cur.Reason(), "acknowledged") {
				t.Errorf("hung a minute after an ack of watch: %v %q, want reboot", cur.Action, cur.Reasons)
			}
			got, _ := r.History()
			if c := got.Boot("A").Classes["hung"]; c.Count != 2 || !c.Last.Equal(reboot) || got.IsAcked("hung", c.Last) {
				t.Errorf("hung counted %+v, acknowledged %v: want twice, the reboot as of when it asked, not acknowledged", c, got.IsAcked("hung", c.Last))
			}
		})
	}
}

// TestAbsorbHangBegunAfterTheIndexAck: this boot's history already holds
// hung (an earlier run of the logger); the GPU's judge while its UUID did
// not read saw a hang, acknowledged at watch by index, end and another
// begin. Once the UUID reads, the board's judge takes the second from when
// early saw it begin: the ack, given before it, does not cover it, and its
// reboot is counted as of then.
func TestAbsorbHangBegunAfterTheIndexAck(t *testing.T) {
	var h action.History
	h.Count("A", "hung", t0) // an earlier run in this boot
	first := t0.Add(10 * time.Minute)
	early := NewRepair("A", 0, action.History{})
	cur := early.Judge(hung(first.Add(5*time.Second), first))
	early.Ack(cur, first.Add(10*time.Second), "root", "slow driver, known")
	early.Judge(RepairInput{Now: first.Add(20 * time.Second), Answered: true}) // the first hang ended
	second := first.Add(30 * time.Second)
	began := second.Add(time.Second) // early's judgement that saw it
	if cur = early.Judge(hung(began, second)); cur.Action != action.Watch || strings.Contains(cur.Reason(), "acknowledged") {
		t.Fatalf("early, the second hang: %v %q, want watch, not acknowledged", cur.Action, cur.Reasons)
	}

	r := NewRepair("A", 0, h)
	r.Absorb(early)
	if cur = r.Judge(hung(second.Add(5*time.Second), second)); cur.Action != action.Watch || strings.Contains(cur.Reason(), "acknowledged") {
		t.Errorf("the board, its UUID read, the second hang: %v %q, want watch, not acknowledged", cur.Action, cur.Reasons)
	}
	if cur = r.Judge(hung(second.Add(HungReboot), second)); cur.Action != action.Reboot || strings.Contains(cur.Reason(), "acknowledged") {
		t.Errorf("the second hang a minute on: %v %q, want reboot", cur.Action, cur.Reasons)
	}
	got, _ := r.History()
	if c := got.Boot("A").Classes["hung"]; c.Count != 2 || !c.Last.Equal(began) || got.IsAcked("hung", c.Last) {
		t.Errorf("hung counted %+v, acknowledged %v: want twice, the second as of when early saw it begin, not acknowledged", c, got.IsAcked("hung", c.Last))
	}
}

// TestRebootAfterAnAckAtWatchJudgedAtTheAckTime: the judgement right after
// an ack, and every one while the wall clock is behind the ack (monitor's
// judge never lets Now go below its last judgement), is at the ack's own
// time. A hang acknowledged at watch that passes HungReboot then is a
// reboot that the ack does not cover, counted once however many
// judgements follow at that time.
func TestRebootAfterAnAckAtWatchJudgedAtTheAckTime(t *testing.T) {
	for _, tc := range []struct {
		name string
		h    func() action.History // the board's history before this run
	}{
		{"no hang counted this boot", func() action.History { return action.History{} }},
		{"a hang counted this boot", func() action.History {
			var h action.History
			h.Count("A", "hung", t0.Add(-time.Hour)) // an earlier run in this boot
			return h
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := tc.h()
			before := h.Boot("A").Classes["hung"].Count
			r := NewRepair("A", 0, h)
			acked := t0.Add(50 * time.Second)
			cur := r.Judge(hung(acked, t0))
			if cur.Action != action.Watch {
				t.Fatalf("hung briefly: %v %q", cur.Action, cur.Reasons)
			}
			r.Ack(cur, acked, "root", "slow driver, known")
			for i := range 4 { // the wall clock is stuck at (or stepped back behind) the ack's time
				in := RepairInput{Now: acked, HungSince: t0, HungFor: HungReboot + time.Duration(i)*time.Second}
				if cur = r.Judge(in); cur.Action != action.Reboot || strings.Contains(cur.Reason(), "acknowledged") {
					t.Errorf("judgement %d at the ack's time, hung a minute: %v %q, want reboot", i, cur.Action, cur.Reasons)
				}
				if i == 0 {
					r.History() // the reboot counted: written
				}
			}
			got, dirty := r.History()
			if c := got.Boot("A").Classes["hung"]; c.Count != before+1 || !c.Last.After(acked) || got.IsAcked("hung", c.Last) {
				t.Errorf("hung counted %+v, acknowledged %v: want %d, after the ack, not acknowledged", c, got.IsAcked("hung", c.Last), before+1)
			}
			if dirty {
				t.Error("the judgements after the reboot was counted changed the history again")
			}
		})
	}
}

// TestAckAtWatchAcrossARestart: the state file keeps what an ack covered:
// an earlier run in this boot counted a hang and an operator acknowledged
// a later one at watch; the logger restarted with the driver still stuck.
// The hang goes on from the history's start, which the ack covers, but
// the reboot it asks for a minute on is not covered: it is counted,
// unacknowledged, from the restart's first judgement when the restart
// finds it past the minute. An ack of the reboot itself still covers it
// after the restart.
func TestAckAtWatchAcrossARestart(t *testing.T) {
	start := t0.Add(10 * time.Minute) // the later hang
	for _, tc := range []struct {
		name    string
		ackedAt time.Duration // the hang's age at the ack
		restart time.Duration // the hang's age at the restart's first judgement
		first   action.Action // what that judgement asks
		want    action.Action
		count   uint64
	}{
		{"acked at watch", 5 * time.Second, 15 * time.Second, action.Watch, action.Reboot, 2},
		{"acked at watch, restarted past the minute", 5 * time.Second, HungReboot + 10*time.Second, action.Reboot, action.Reboot, 2},
		{"acked at reboot", HungReboot + 5*time.Second, HungReboot + 15*time.Second, action.Watch, action.Watch, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var h action.History
			h.Count("A", "hung", t0) // the earlier run counted a hang
			r := NewRepair("A", 0, h)
			cur := r.Judge(hung(start.Add(tc.ackedAt), start))
			r.Ack(cur, start.Add(tc.ackedAt), "root", "slow driver, known")
			h, _ = r.History()
			b, err := json.Marshal(h) // the state file
			if err != nil {
				t.Fatal(err)
			}
			var read action.History
			if err := json.Unmarshal(b, &read); err != nil {
				t.Fatal(err)
			}

			r = NewRepair("A", 0, read) // restarted, still stuck
			if cur = r.Judge(hung(start.Add(tc.restart), start)); cur.Action != tc.first || strings.Contains(cur.Reason(), "acknowledged") == (tc.first == action.Reboot) {
				t.Errorf("restarted: %v %q, want %v", cur.Action, cur.Reasons, tc.first)
			}
			at := start.Add(max(tc.ackedAt, HungReboot) + 20*time.Second)
			if cur = r.Judge(hung(at, start)); cur.Action != tc.want || strings.Contains(cur.Reason(), "acknowledged") == (tc.want == action.Reboot) {
				t.Errorf("restarted, hung past a minute: %v %q, want %v", cur.Action, cur.Reasons, tc.want)
			}
			got, _ := r.History()
			if c := got.Boot("A").Classes["hung"]; c.Count != tc.count {
				t.Errorf("hung counted %+v, want %d", c, tc.count)
			}
		})
	}
}

// TestAckOfAStateFileWithoutWhatItCovered: a state file written before it
// kept what each ack covered (no acked_as) has an ack of the hang a
// restart finds going on. Its last ack, when it is the one that cleared
// the hang, bounds what it covered: the action acknowledged then (the
// GPU's). A hang acknowledged at watch asks for a reboot a minute on,
// counted, also when the logger was stopped before the minute and the
// restart finds it past it (then from the restart's first judgement);
// one whose reboot was acknowledged stays covered (not counted again
// after an upgrade). An ack the file does not bound (its last ack
// cleared other classes) covers what the hang asks at the first
// judgement that finds it covered.
func TestAckOfAStateFileWithoutWhatItCovered(t *testing.T) {
	start := t0.Add(10 * time.Minute) // the hang
	rfc := func(t time.Time) string { return `"` + t.Format(time.RFC3339Nano) + `"` }
	for _, tc := range []struct {
		name    string
		ackedAt time.Duration // the hang's age at its ack
		last    string        // the file's last ack: its action and the classes it cleared, 30 s after the hang's if not the hang's
		first   time.Duration // the hang's age at the restart's first judgement
		want    action.Action
		count   uint64
	}{
		{"acked at watch, restarted at watch", 5 * time.Second, `"watch", "classes": ["hung"]`, 20 * time.Second, action.Reboot, 2},
		{"acked at watch, restarted past the minute", 5 * time.Second, `"watch", "classes": ["hung"]`, HungReboot + 20*time.Second, action.Reboot, 2},
		{"acked at reboot, restarted past the minute", HungReboot + 5*time.Second, `"reboot", "classes": ["hung"]`, HungReboot + 20*time.Second, action.Watch, 1},
		{"the last ack of another class", 5 * time.Second, `"watch", "classes": ["xid13"]`, HungReboot + 40*time.Second, action.Watch, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			acked, last := start.Add(tc.ackedAt), start.Add(tc.ackedAt)
			if !strings.Contains(tc.last, `"hung"`) {
				last = last.Add(30 * time.Second)
			}
			file := `{"uuid": "GPU-1", "boots": [{"boot_id": "A", "classes": {"hung": {"count": 1, "last": ` + rfc(t0) + `}}}],
				"ack": {"time": ` + rfc(last) + `, "note": "", "by": "root", "action": ` + tc.last + `},
				"acked": {"hung": ` + rfc(acked) + `, "xid13": ` + rfc(last) + `}}`
			var h action.History
			if err := json.Unmarshal([]byte(file), &h); err != nil {
				t.Fatal(err)
			}
			r := NewRepair("A", 0, h)
			first := action.Watch // acknowledged
			if tc.first >= HungReboot {
				first = tc.want
			}
			if cur := r.Judge(hung(start.Add(tc.first), start)); cur.Action != first || strings.Contains(cur.Reason(), "acknowledged") == (first == action.Reboot) {
				t.Errorf("restarted: %v %q, want %v", cur.Action, cur.Reasons, first)
			}
			cur := r.Judge(hung(start.Add(max(tc.first, HungReboot)+10*time.Second), start))
			if cur.Action != tc.want || strings.Contains(cur.Reason(), "acknowledged") == (tc.want == action.Reboot) {
				t.Errorf("restarted, hung past a minute: %v %q, want %v", cur.Action, cur.Reasons, tc.want)
			}
			got, _ := r.History()
			if c := got.Boot("A").Classes["hung"]; c.Count != tc.count {
				t.Errorf("hung counted %+v, want %d", c, tc.count)
			}
		})
	}
}

// TestOldStateFileAckOfAHangBegunBehindIt: in a state file written before
// acked_as was kept, the hang's ack is later than a hang that begins after
// the restart while the wall clock is behind it, so that hang counts as
// covered; what it covers is recorded when it begins (watch), and its
// reboot a minute on is asked for, not taken as covered too. The file's
// last ack is another class's, so nothing else bounds it.
func TestOldStateFileAckOfAHangBegunBehindIt(t *testing.T) {
	now := t0.Add(time.Hour)
	acked := now.Add(time.Hour) // the wall clock is behind the hang's ack
	rfc := func(t time.Time) string { return `"` + t.Format(time.RFC3339Nano) + `"` }
	file := `{"uuid": "GPU-1", "boots": [{"boot_id": "A", "classes": {}}],
		"ack": {"time": ` + rfc(acked) + `, "note": "", "by": "root", "action": "watch", "classes": ["xid13"]},
		"acked": {"hung": ` + rfc(acked) + `, "xid13": ` + rfc(acked) + `}}`
	var h action.History
	if err := json.Unmarshal([]byte(file), &h); err != nil {
		t.Fatal(err)
	}
	r := NewRepair("A", 0, h)
	if cur := r.Judge(hung(now, now)); cur.Action != action.Watch {
		t.Fatalf("the hang begins: %v %q, want watch", cur.Action, cur.Reasons)
	}
	cur := r.Judge(hung(now.Add(HungReboot+10*time.Second), now))
	if cur.Action != action.Reboot || strings.Contains(cur.Reason(), "acknowledged") {
		t.Errorf("hung past a minute: %v %q, want reboot, not acknowledged", cur.Action, cur.Reasons)
	}
}

// TestOldStateFileAckAtWatchOfAnAcknowledgedClass: an ack cleared every
// class the GPU held, one acknowledged earlier too, which counts only as
// watch in the GPU's action: a state file written before acked_as was
// kept has as its last ack {watch, [that class, xid13]} when an operator
// acknowledged an Xid 13 while an acknowledged condition that asks for
// more still held. After the restart that condition stays acknowledged,
// not counted again: the file's last ack bounds only a hang, the one
// class whose action grows during one occurrence. Files with and without
// each class's ack time (acked).
func TestOldStateFileAckAtWatchOfAnAcknowledgedClass(t *testing.T) {
	began := t0.Add(10 * time.Minute)
	acked := began.Add(time.Hour) // the ack of the Xid 13
	rfc := func(t time.Time) string { return `"` + t.Format(time.RFC3339Nano) + `"` }
	for _, tc := range []struct {
		name, class string
		in          RepairInput
	}{
		{"failing", "failing", RepairInput{Failing: true}},
		{"retired pages pending", "retired_pending", RepairInput{Vals: vals(uint64(reading.HRetiredPending), 1)}},
		{"lost", "lost", RepairInput{Lost: true}},
		{"missing", missingClass, RepairInput{Missing: true}},
	} {
		for _, perClass := range []bool{true, false} {
			t.Run(tc.name+map[bool]string{true: ", acked kept", false: ", only the last ack"}[perClass], func(t *testing.T) {
				file := `{"uuid": "GPU-1", "boots": [{"boot_id": "A", "classes": {"` + tc.class + `": {"count": 1, "last": ` + rfc(began) + `}}}],
					"ack": {"time": ` + rfc(acked) + `, "note": "", "by": "root", "action": "watch", "classes": ["` + tc.class + `", "xid13"]}`
				if perClass {
					file += `, "acked": {"` + tc.class + `": ` + rfc(acked) + `, "xid13": ` + rfc(acked) + `}`
				}
				var h action.History
				if err := json.Unmarshal([]byte(file+"}"), &h); err != nil {
					t.Fatal(err)
				}
				r := NewRepair("A", 0, h)
				for i := range 3 {
					in := tc.in
					in.Now = acked.Add(time.Duration(i+1) * time.Minute)
					if cur := r.Judge(in); cur.Action != action.Watch || !strings.Contains(cur.Reason(), "acknowledged") {
						t.Errorf("restarted, judgement %d: %v %q, want watch (acknowledged)", i, cur.Action, cur.Reasons)
					}
				}
				got, _ := r.History()
				if c := got.Boot("A").Classes[tc.class]; c.Count != 1 || !got.IsAcked(tc.class, c.Last) {
					t.Errorf("%s counted %+v, acknowledged %v: want once, acknowledged", tc.class, c, got.IsAcked(tc.class, c.Last))
				}
			})
		}
	}
}

// TestAckOfTheRebootAtTheHeldTime: while the wall clock is behind the last
// judgement, every judgement and ack is at the same held time; the reboot
// a hang acknowledged at watch asks for then begins just after that ack.
// The operator who then acknowledges the reboot, at the same held time,
// covers what they saw: the reboot is acknowledged, also once the clock
// catches up, and not counted again.
func TestAckOfTheRebootAtTheHeldTime(t *testing.T) {
	r := NewRepair("A", 0, action.History{})
	held := t0.Add(50 * time.Second)
	cur := r.Judge(hung(held, t0))
	r.Ack(cur, held, "root", "slow driver, known")
	in := RepairInput{Now: held, HungSince: t0, HungFor: HungReboot}
	if cur = r.Judge(in); cur.Action != action.Reboot {
		t.Fatalf("hung a minute at the held time: %v %q, want reboot", cur.Action, cur.Reasons)
	}
	rec := r.Ack(cur, held, "root", "reboot planned")
	if rec.Action != action.Reboot {
		t.Fatalf("ack: %+v", rec)
	}
	for _, in := range []RepairInput{in, hung(t0.Add(2*time.Minute), t0)} { // still held, then caught up
		if cur = r.Judge(in); cur.Action != action.Watch || !strings.Contains(cur.Reason(), "acknowledged") {
			t.Errorf("after the ack of the reboot, at %v: %v %q, want watch (acknowledged)", in.Now.Sub(t0), cur.Action, cur.Reasons)
		}
	}
	h, _ := r.History()
	if c := h.Boot("A").Classes["hung"]; c.Count != 1 || !h.IsAcked("hung", c.Last) {
		t.Errorf("hung counted %+v, acknowledged %v: want once, acknowledged", c, h.IsAcked("hung", c.Last))
	}
}
