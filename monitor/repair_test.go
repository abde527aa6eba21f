package monitor

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpu-telemetry/gpu-telemetry/action"
	"github.com/gpu-telemetry/gpu-telemetry/action/board"
	"github.com/gpu-telemetry/gpu-telemetry/anomaly"
	"github.com/gpu-telemetry/gpu-telemetry/internal/events"
	"github.com/gpu-telemetry/gpu-telemetry/internal/testutil"
	"github.com/gpu-telemetry/gpu-telemetry/kmsg"
	"github.com/gpu-telemetry/gpu-telemetry/live"
	"github.com/gpu-telemetry/gpu-telemetry/reading"
	"github.com/gpu-telemetry/gpu-telemetry/sampler/fakenvml"
	"github.com/gpu-telemetry/gpu-telemetry/sink"
	"github.com/gpu-telemetry/gpu-telemetry/xid"
)

// A GPU lost gets the action reboot: shown in its live view, one ACTION
// line in events.log, the class counted in the board's state file; an ack
// of it (the action named) clears it to watch while the GPU is still lost
// (to none once it is not) with an ACK line, and a wrong --action is
// refused.
func TestRepairActionLostAndAck(t *testing.T) {
	r := newRig(t, 1, nil)
	gs, _, sample := stepper(r, 3)
	loseGPU(r.devs[0])
	sample(3)
	g := gs.slot.Get()
	if g.Action.Action != action.Reboot || !strings.Contains(g.Action.Reason(), "lost") {
		t.Fatalf("action %v %q, want reboot for the GPU lost", g.Action.Action, g.Action.Reasons)
	}
	log := r.eventsLog()
	if n := strings.Count(log, "type=ACTION action=reboot from=none"); n != 1 {
		t.Errorf("%d ACTION lines, want 1:\n%s", n, log)
	}
	uuid := gs.g.Info().UUID
	h, err := board.Read(r.dir, uuid)
	if err != nil || len(h.Boots) != 1 || h.Boots[0].Classes["lost"].Count != 1 {
		t.Fatalf("state file: %+v, %v", h, err)
	}
	if _, err := r.m.Ack("0", action.Inspect, "", "root"); err == nil {
		t.Error("an ack of another action than the GPU's was taken")
	}
	if _, err := r.m.Ack("GPU-nope", action.Reboot, "", "root"); err == nil {
		t.Error("an ack of no GPU was taken")
	}
	res, err := r.m.Ack(uuid, action.Reboot, "power cycled it", "root")
	if err != nil {
		t.Fatal(err)
	}
	if res.Acked != action.Reboot || res.Now.Action != action.Watch {
		t.Errorf("ack: %+v", res)
	}
	log = r.eventsLog()
	if !strings.Contains(log, `type=ACK action=reboot by=root note="power cycled it" classes=lost`) ||
		!strings.Contains(log, "type=ACTION action=watch from=reboot") {
		t.Errorf("events.log after the ack:\n%s", log)
	}
	if h, _ = board.Read(r.dir, uuid); h.Ack == nil || h.Ack.Note != "power cycled it" {
		t.Errorf("state file after the ack: %+v", h.Ack)
	}
	if g = gs.slot.Get(); g.Ack.By != "root" || g.Action.Action != action.Watch || !strings.Contains(g.Action.Reason(), "acknowledged") {
		t.Errorf("live view after the ack: %+v %+v", g.Action, g.Ack)
	}
	// The crash snapshot of the loss names the action it asks for then.
	r.runSide()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r.m.snaps.Close(ctx)
	snap := snapshotField(log, "type=GPU_LOST")
	if b, err := os.ReadFile(snap); err != nil || !strings.Contains(string(b), "\nAction: reboot: the driver reports the GPU lost\n") {
		t.Errorf("the crash snapshot's header lacks the action (%v):\n%.600s", err, b)
	}
}

// The board's state file is written outside the repair lock, by whichever
// goroutine judged: a judgement written after a later one leaves the later
// copy on disk, and a copy whose write failed is written again at the next
// judgement, with nothing new to change it. (The version guard itself,
// a save that read its copy before a newer one was written, is
// action/board's TestSaveNeverWritesAnOlderCopy.)
func TestBoardStateWritesInOrder(t *testing.T) {
	r := newRig(t, 1, nil)
	gs, _, _ := stepper(r, 3)
	uuid := gs.g.Info().UUID
	now := time.Now()
	older := gs.judge(now, true, func(rp repairEvents) { rp.Xid(xid.ExplainDetail(79, reading.XidDetail{}), now, gs.m.cfg.mono()) })
	newer := gs.judge(now.Add(time.Second), true, func(rp repairEvents) {
		rp.Xid(xid.ExplainDetail(48, reading.XidDetail{}), now.Add(time.Second), gs.m.cfg.mono())
	})
	newer.write(gs)
	older.write(gs)
	h, err := board.Read(r.dir, uuid)
	if err != nil || h.Boots[len(h.Boots)-1].Classes["xid48"].Count != 1 {
		t.Fatalf("the older copy landed over the newer: %+v, %v", h, err)
	}

	// A write that fails (the file's name taken by a directory) is retried.
	p, _ := board.Path(r.dir, uuid)
	os.Remove(p)
	if err := os.MkdirAll(filepath.Join(p, "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	gs.judgeAction(now.Add(2*time.Second), true, func(rp repairEvents) {
		rp.Xid(xid.ExplainDetail(95, reading.XidDetail{}), now.Add(2*time.Second), gs.m.cfg.mono())
	})
	if err := os.RemoveAll(p); err != nil {
		t.Fatal(err)
	}
	gs.judgeAction(now.Add(3*time.Second), true, nil)
	if h, err = board.Read(r.dir, uuid); err != nil || h.Boots[len(h.Boots)-1].Classes["xid95"].Count != 1 {
		t.Fatalf("the copy whose write failed was not written again: %+v, %v", h, err)
	}
}

// A state file that does not read is set aside as evidence (and counted)
// before a new history is written in its place.
func TestCorruptBoardStateSetAside(t *testing.T) {
	dir := t.TempDir()
	p, _ := board.Path(dir, "GPU-a")
	if err := os.WriteFile(p, []byte(`{"uuid":`), 0o644); err != nil {
		t.Fatal(err)
	}
	r := newRig(t, 1, func(c *Config) { c.LogDir = dir })
	gs, _, _ := stepper(r, 3) // the first sample reads the history
	if h, err := board.Read(dir, "GPU-a"); err != nil || len(h.Boots) != 1 {
		t.Fatalf("the new history: %+v, %v", h, err)
	}
	aside, _ := filepath.Glob(p + ".corrupt-*")
	if len(aside) != 1 {
		t.Fatalf("set aside: %q", aside)
	}
	if b, _ := os.ReadFile(aside[0]); string(b) != `{"uuid":` {
		t.Errorf("the evidence: %q", b)
	}
	if n := r.counted("board_states_set_aside"); n != 1 || gs.g.Info().UUID != "GPU-a" {
		t.Errorf("board_states_set_aside %d", n)
	}
}

// Without the kernel's boot id, each run of the logger is a boot of its
// own (counted): runs are never merged into one boot, which would stop the
// escalation across boots.
func TestRepairWithoutABootID(t *testing.T) {
	dir := t.TempDir()
	var boots []string
	for range 2 {
		r := newRig(t, 1, func(c *Config) { c.LogDir = dir })
		if r.m.ident.BootID != "" {
			t.Skip("the rig has a boot id")
		}
		gs, _, _ := stepper(r, 3) // the first sample records the boot
		h, err := board.Read(dir, gs.g.Info().UUID)
		if err != nil {
			t.Fatal(err)
		}
		boots = append(boots, h.Boots[len(h.Boots)-1].BootID)
		if len(h.Boots) != len(boots) || !strings.HasPrefix(boots[len(boots)-1], "unknown-") {
			t.Fatalf("boots %+v", h.Boots)
		}
		if n := r.counted("repair_boots_unknown"); n != 1 {
			t.Errorf("repair_boots_unknown %d", n)
		}
	}
	if boots[0] == boots[1] {
		t.Errorf("two runs without a boot id merged into one boot %q", boots[0])
	}
}

// Every change of a GPU's action is an ACTION line, none and watch too,
// once it has held for a judging round (judgeEvery); a change to or from
// a repair at once; a change that does not hold (gone by the next round)
// is no line, and the same line is never written twice in a row.
func TestActionLines(t *testing.T) {
	r, gs, mono := monoRig(t)
	t0 := time.Now()
	// at is d into the test on both clocks: an application's Xid's hour
	// (its watch) runs on the monotonic one.
	at := func(d time.Duration) time.Time { mono.Store(int64(d)); return t0.Add(d) }
	count := func(s string) int { return strings.Count(r.eventsLog(), "type=ACTION "+s) }
	xidAt := func(code int, d time.Duration) {
		e := xid.ExplainDetail(code, reading.XidDetail{})
		gs.judgeAction(at(d), true, func(rp repairEvents) { rp.Xid(e, at(d), d) })
	}

	xidAt(13, 0) // an application's fault: watch
	if n := count("action=watch from=none"); n != 0 {
		t.Errorf("a watch written before it held for a round (%d lines):\n%s", n, r.eventsLog())
	}
	gs.judgeAction(at(judgeEvery), false, nil)
	gs.judgeAction(at(2*judgeEvery), false, nil)
	if n := count(`action=watch from=none reason="Xid 13 `); n != 1 {
		t.Errorf("%d ACTION lines for the watch, want 1 once it held:\n%s", n, r.eventsLog())
	}
	xidAt(79, 3*time.Second) // a repair: at once
	if n := count("action=reboot from=watch"); n != 1 {
		t.Errorf("%d ACTION lines for the reboot, want 1 at once:\n%s", n, r.eventsLog())
	}
	// The watch's Xid expires an hour later while the reboot holds: the
	// reasons change, a line once it held.
	before := count("")
	gs.judgeAction(at(time.Hour+time.Second), false, nil)
	gs.judgeAction(at(time.Hour+3*time.Second), false, nil)
	gs.judgeAction(at(time.Hour+5*time.Second), false, nil)
	if n := count("action=reboot from=reboot"); n != 1 || count("") != before+1 {
		t.Errorf("%d lines for the reasons' change (%d in all, was %d), want 1:\n%s", n, count(""), before, r.eventsLog())
	}
}

// An application's Xid is watched for an hour on the monotonic clock
// since it last came (anomaly's TestXidAgeIsOnTheMonotonicClock), here
// through the GPU's report (wake) and the once-a-second round
// (judgeActions). The wall clock stepped back between two Xids 13 a second
// apart: the second is judged at the last judgement's time (the action's
// times go forward), when on the wall clock it was two hours old; stepped
// forward after an Xid, the next round found it two hours old. Neither
// ends the watch before the hour.
func TestXidAgeIsOnTheMonotonicClock(t *testing.T) {
	for _, tc := range []struct {
		name  string
		step  time.Duration // of the wall clock, within a second of the first Xid
		again bool          // a second Xid 13 a second after the first, after the step
	}{
		{"back between two Xids", -2 * time.Hour, true},
		{"forward after an Xid", 2 * time.Hour, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, gs, mono := monoRig(t)
			xid13 := func(at time.Time) {
				gs.wake(events.Record{Kind: reading.EventXid, Code: 13, At: at, Seen: at}, reading.XidDetail{}).write(gs)
			}
			wall0, mono0 := time.Now(), 3*time.Hour // the daemon has run for three hours
			mono.Store(int64(mono0))
			xid13(wall0)
			mono.Store(int64(mono0 + time.Second))
			wall := wall0.Add(time.Second + tc.step)
			if tc.again {
				xid13(wall)
			}
			r.m.judgeActions(wall)
			if cur := gs.slot.Get().Action; cur.Action != action.Watch {
				t.Errorf("a second after the Xid, the wall clock stepped %v: %v %q, want watch", tc.step, cur.Action, cur.Reasons)
			}
			mono.Store(int64(mono0 + time.Hour + 2*time.Second))
			r.m.judgeActions(wall.Add(time.Hour + time.Second))
			if cur := gs.slot.Get().Action; cur.Action != action.None {
				t.Errorf("an hour after the last Xid: %v %q, want none", cur.Action, cur.Reasons)
			}
		})
	}
}

// An Xid the kernel logged before it was read (the backlog after a
// restart of the logger) is watched for the rest of its hour from when it
// came, as the kernel's clock places it (events.Record.At before Seen).
func TestXidReadAfterTheFactAgesFromWhenItCame(t *testing.T) {
	r, gs, mono := monoRig(t)
	seen, mono0 := time.Now(), 3*time.Hour
	mono.Store(int64(mono0))
	gs.wake(events.Record{Kind: reading.EventXid, Code: 13, At: seen.Add(-59 * time.Minute), Seen: seen}, reading.XidDetail{}).write(gs)
	if cur := gs.slot.Get().Action; cur.Action != action.Watch {
		t.Errorf("an Xid 13 logged 59 minutes before it was read: %v %q, want watch", cur.Action, cur.Reasons)
	}
	mono.Store(int64(mono0 + 2*time.Minute))
	r.m.judgeActions(seen.Add(2 * time.Minute))
	if cur := gs.slot.Get().Action; cur.Action != action.None {
		t.Errorf("61 minutes after it was logged: %v %q, want none", cur.Action, cur.Reasons)
	}
}

// A GPU's Xids taken in while its UUID was not known (earlyEvents) keep
// their monotonic reading for its board's judge: an application's Xid's
// hour runs from when it last came, the wall clock stepped back between
// two of them or not.
func TestEarlyXidKeepsItsMonotonicReading(t *testing.T) {
	var ee earlyEvents
	e := xid.ExplainDetail(13, reading.XidDetail{})
	wall0, mono0 := time.Now(), 3*time.Hour
	ee.Xid(e, wall0, mono0)
	ee.Xid(e, wall0.Add(-2*time.Hour+30*time.Minute), mono0+30*time.Minute) // the wall clock stepped back
	r := anomaly.NewRepair("boot", 0, action.History{UUID: "GPU-b"})
	ee.replay(r)
	for _, j := range []struct {
		mono time.Duration // from the first Xid; the wall clock two hours behind
		want action.Action
	}{{59 * time.Minute, action.Watch}, {61 * time.Minute, action.Watch}, {91 * time.Minute, action.None}} {
		in := anomaly.RepairInput{Now: wall0.Add(-2*time.Hour + j.mono), Mono: mono0 + j.mono}
		if cur := r.Judge(in); cur.Action != j.want {
			t.Errorf("%v after the first Xid: %v %q, want %v", j.mono, cur.Action, cur.Reasons, j.want)
		}
	}
}

// monoRig is a rig of one GPU, sampled once, whose monotonic clock
// (Config.mono) the test sets.
func monoRig(t *testing.T) (*rig, *gpuState, *atomic.Int64) {
	mono := new(atomic.Int64)
	r := newRig(t, 1, func(c *Config) { c.mono = func() time.Duration { return time.Duration(mono.Load()) } })
	gs, _, _ := stepper(r, 1)
	return r, gs, mono
}

// A board of the previous run that is not enumerated now, whose previous
// boot ended in Xid 79, is power_cycle in the host view; ack names it by
// the start of its UUID and clears it as it does a GPU's: the ACK and
// ACTION lines by its UUID and prev_gpu=, its state file, the host view.
func TestAckMissingBoard(t *testing.T) {
	r := newRig(t, 1, nil)
	const uuid = "GPU-dead0001-0000-0000-0000-000000000000"
	h := action.History{UUID: uuid}
	h.Count("an-earlier-boot", "xid79", time.Now().Add(-time.Hour))
	if err := board.Write(r.dir, h); err != nil {
		t.Fatal(err)
	}
	r.m.missingBoard(sink.Board{Index: 1, UUID: uuid})
	if got := r.m.states.missing; len(got) != 1 || got[0].Action.Action != action.PowerCycle {
		t.Fatalf("missing boards %+v, want one to power cycle", got)
	}
	if _, err := r.m.Ack(uuid, action.Reboot, "", "root"); err == nil {
		t.Error("an ack of another action than the missing board's was taken")
	}
	if _, err := r.m.Ack("GPU-", action.PowerCycle, "", "root"); err == nil {
		t.Error("an ack of too short a UUID prefix was taken")
	}
	res, err := r.m.Ack("gpu-dead0001", action.PowerCycle, "reseated", "root")
	if err != nil {
		t.Fatal(err)
	}
	if !res.Missing || res.GPU != 1 || res.UUID != uuid || res.Acked != action.PowerCycle || res.Now.Action.Drains() {
		t.Errorf("ack: %+v", res)
	}
	log := r.eventsLog()
	testutil.Contains(t, "events.log", log, "uuid="+uuid,
		`type=ACK prev_gpu=1 action=power_cycle by=root note=reseated classes=`,
		"type=ACTION prev_gpu=1 action=watch from=power_cycle")
	if h, _ = board.Read(r.dir, uuid); h.Ack == nil || h.Ack.Note != "reseated" {
		t.Errorf("state file after the ack: %+v", h.Ack)
	}
	if len(h.Ack.Classes) == 0 || h.Acked[h.Ack.Classes[0]] != h.Ack.Time {
		t.Errorf("the ack's classes are not kept per class: %+v %+v", h.Ack, h.Acked)
	}
	if got := r.m.states.missing; got[0].Action.Action != action.Watch {
		t.Errorf("host view after the ack: %+v", got[0].Action)
	}
}

// A missing board's state file is written as a GPU's is: an ack whose
// write fails (the file's name taken by a directory) is written again at
// the next round (judgeActions), not lost.
func TestAckMissingBoardWriteRetried(t *testing.T) {
	r := newRig(t, 1, nil)
	const uuid = "GPU-dead0002-0000-0000-0000-000000000000"
	h := action.History{UUID: uuid}
	h.Count("an-earlier-boot", "xid79", time.Now().Add(-time.Hour))
	if err := board.Write(r.dir, h); err != nil {
		t.Fatal(err)
	}
	r.m.missingBoard(sink.Board{Index: 1, UUID: uuid})
	p, _ := board.Path(r.dir, uuid)
	os.Remove(p)
	if err := os.MkdirAll(filepath.Join(p, "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := r.m.Ack(uuid, action.PowerCycle, "reseated", "root"); err != nil {
		t.Fatal(err)
	}
	if n := r.counted("board_state_write_failures"); n != 1 {
		t.Errorf("board_state_write_failures %d, want 1", n)
	}
	if err := os.RemoveAll(p); err != nil {
		t.Fatal(err)
	}
	r.m.judgeActions(time.Now())
	if h, err := board.Read(r.dir, uuid); err != nil || h.Ack == nil || h.Ack.Note != "reseated" {
		t.Fatalf("the ack whose write failed was not written again: %+v, %v", h, err)
	}
}

// A board the previous run already missed (a restart in the same boot, a
// power cycle that did not bring it back) is not in that run's inventory:
// its state file raises it again while its action takes it out of service,
// and not once that is acknowledged; a board enumerated now is not missing.
func TestMissingFromStateFiles(t *testing.T) {
	r := newRig(t, 1, nil)
	const gone, acked = "GPU-dead0002-0000-0000-0000-000000000000", "GPU-dead0003-0000-0000-0000-000000000000"
	earlier := time.Now().Add(-time.Hour)
	for _, uuid := range []string{gone, acked, r.m.gpus[0].g.Info().UUID} {
		h := action.History{UUID: uuid}
		h.Count("an-earlier-boot", "xid79", earlier)
		if uuid == acked {
			h.Acked = map[string]time.Time{"missing": time.Now(), "xid79": time.Now()}
		}
		if err := board.Write(r.dir, h); err != nil {
			t.Fatal(err)
		}
	}
	r.m.missingFromState()
	got := r.m.states.missing
	if len(got) != 1 || got[0].UUID() != gone || !got[0].Action.Action.Drains() || got[0].Index != -1 {
		t.Fatalf("missing boards %+v, want %s alone, taken out of service, its index unknown", got, gone)
	}
	testutil.Contains(t, "events.log", r.eventsLog(), "uuid="+gone, "type=ACTION action=power_cycle",
		"type=GPU_MISSING detail=\""+gone+" missing since an earlier run")
	if n := r.m.hostView().GPUsMissing; n != 1 {
		t.Errorf("gpus_missing %d, want 1 (the board an earlier run missed)", n)
	}
	if strings.Contains(r.eventsLog(), acked) {
		t.Errorf("the acknowledged board is raised:\n%s", r.eventsLog())
	}
	r.m.missingFromState() // again: no second entry
	if n := len(r.m.states.missing); n != 1 {
		t.Errorf("%d missing boards after a second pass, want 1", n)
	}
	if n := r.m.hostView().GPUsMissing; n != 1 || strings.Count(r.eventsLog(), "type=GPU_MISSING") != 1 {
		t.Errorf("after a second pass: gpus_missing %d, GPU_MISSING lines:\n%s", n, r.eventsLog())
	}
}

// Without the kernel's boot id, repair_boots_unknown counts each board's
// history once, however often it is read: a board an earlier run missed
// whose action does not take it out of service is not among the host's
// missing boards, and each missingFromState (at start, then once every
// GPU is identified) reads it again, as it does a board missingBoard read
// before.
func TestBootsUnknownMissingBoardCountedOnce(t *testing.T) {
	r := newRig(t, 1, nil)
	r.m.ident.BootID = ""
	const acked, quiet = "GPU-dead0003-0000-0000-0000-000000000000", "GPU-dead0004-0000-0000-0000-000000000000"
	for _, uuid := range []string{acked, quiet} {
		h := action.History{UUID: uuid}
		h.Count("an-earlier-boot", "xid79", time.Now().Add(-time.Hour))
		h.Acked = map[string]time.Time{"missing": time.Now(), "xid79": time.Now()}
		if err := board.Write(r.dir, h); err != nil {
			t.Fatal(err)
		}
	}
	r.m.missingBoard(sink.Board{UUID: quiet, Index: 3})
	r.m.missingFromState()
	r.m.missingFromState()
	for _, b := range r.m.states.missing {
		if b.Action.Action.Drains() {
			t.Fatalf("missing board %s: %v, want it acknowledged", b.UUID(), b.Action)
		}
	}
	if n := r.counted("repair_boots_unknown"); n != 2 {
		t.Errorf("repair_boots_unknown %d, want 2: once for each board", n)
	}
}

// A fatal SXid on a GPU on the fabric: the next sample begins
// nvswitch_fatal (HEALTH_CRITICAL naming the SXid, an incident, the action
// reset_gpu); a second fatal SXid of the burst is no second incident; the
// ack of reset_gpu clears the reason with the next sample.
func TestFatalSXidIncidentAndAck(t *testing.T) {
	r := newRig(t, 1, nil)
	r.devs[0].Fabric = &nvml.GpuFabricInfo_v4{State: reading.FabricCompleted}
	gs, _, sample := stepper(r, 3)
	if !onFabric(reading.Values(gs.Health().Vals)) {
		t.Fatalf("the fake GPU with fabric info is not on the fabric: %v", gs.Health().Vals[reading.HFabricState])
	}
	kline := func(i int, code string) {
		r.m.onKernelLine(kmsg.Record{Time: time.Duration(3201+i) * time.Second,
			Message: "nvidia-nvswitch3: SXid (PCI:0000:05:00.0): " + code + ", Fatal, Link 12"}, time.Now())
	}
	kline(0, "15009")
	sample(3)
	kline(1, "15010")
	sample(4)
	sample(5)
	log := r.eventsLog()
	if n := strings.Count(log, "type=HEALTH_CRITICAL reason=nvswitch_fatal"); n != 1 ||
		!strings.Contains(log, "SXid 15009 (route GLT DBE) on nvidia-nvswitch3 at 0000:05:00.0") {
		t.Errorf("%d HEALTH_CRITICAL nvswitch_fatal lines (want 1, naming SXid 15009):\n%s", n, log)
	}
	if n := gs.slot.Get().Incidents; n != 1 {
		t.Errorf("incidents %d, want 1", n)
	}
	g := gs.slot.Get()
	if g.Action.Action != action.ResetGPU || !strings.Contains(g.Action.Reason(), "fatal SXid") {
		t.Fatalf("action %v %q, want reset_gpu for the fatal SXid", g.Action.Action, g.Action.Reasons)
	}
	if _, err := r.m.Ack("0", action.ResetGPU, "baseboard reset", "root"); err != nil {
		t.Fatal(err)
	}
	sample(6)
	gs.judgeAction(time.Now(), true, nil)
	if h := gs.Health(); h.Verdict.Has(anomaly.ReasonNVSwitchFatal) || h.Level != "ok" {
		t.Errorf("after the ack: health %s %v, want ok", h.Level, h.Reasons)
	}
	if g := gs.slot.Get(); g.Action.Action != action.None {
		t.Errorf("after the ack: action %v %q, want none", g.Action.Action, g.Action.Reasons)
	}
}

// A restart of the logger in the same boot does not reset the baseboard:
// the board's state file holds this boot's nvswitch_fatal, not
// acknowledged, so it holds again (reset_gpu) without a second incident;
// once acknowledged, it does not.
func TestFatalSXidSurvivesRestart(t *testing.T) {
	for _, acked := range []bool{false, true} {
		t.Run(map[bool]string{false: "unacknowledged", true: "acknowledged"}[acked], func(t *testing.T) {
			r := newRig(t, 1, nil)
			gs := r.m.gpus[0]
			began := time.Now().Add(-time.Hour)
			h := action.History{UUID: gs.g.Info().UUID}
			h.Count(r.m.repairBoot(), "nvswitch_fatal", began)
			if acked {
				h.Acknowledge(action.AckRecord{Time: began.Add(time.Minute), Action: action.ResetGPU, Classes: []string{"nvswitch_fatal"}})
			}
			if err := board.Write(r.dir, h); err != nil {
				t.Fatal(err)
			}
			_, _, sample := stepper(r, 3)
			sample(3)
			gs.judgeAction(time.Now(), true, nil)
			g := gs.slot.Get()
			if got := gs.Health().Verdict.Has(anomaly.ReasonNVSwitchFatal); got == acked {
				t.Errorf("nvswitch_fatal held %v after the restart", got)
			}
			if want := map[bool]action.Action{false: action.ResetGPU, true: action.None}[acked]; g.Action.Action != want {
				t.Errorf("action %v %q, want %v", g.Action.Action, g.Action.Reasons, want)
			}
			if g.Incidents != 0 {
				t.Errorf("incidents %d, want 0: the earlier run's was the incident", g.Incidents)
			}
		})
	}
}

// The ack clears only the event reasons it acknowledges: a fatal SXid
// raised after the action was judged (not yet sampled) holds on.
func TestAckKeepsUnjudgedFatalSXid(t *testing.T) {
	r := newRig(t, 1, nil)
	r.devs[0].Fabric = &nvml.GpuFabricInfo_v4{State: reading.FabricCompleted}
	gs, _, sample := stepper(r, 3)
	r.m.onEvent(reading.Event{Time: time.Now(), GPU: 0, Kind: reading.EventXid, Source: reading.SourceNVML, Data: 79})
	sample(3)
	gs.judgeAction(time.Now(), true, nil)
	cur := gs.slot.Get().Action.Action
	if cur == action.None {
		t.Fatal("Xid 79 gave no action")
	}
	r.m.onKernelLine(kmsg.Record{Time: 3201 * time.Second,
		Message: "nvidia-nvswitch3: SXid (PCI:0000:05:00.0): 15009, Fatal, Link 12 route GLT DBE"}, time.Now())
	if _, err := r.m.Ack("0", cur, "replaced", "root"); err != nil {
		t.Fatal(err)
	}
	sample(4)
	if !gs.Health().Verdict.Has(anomaly.ReasonNVSwitchFatal) {
		t.Errorf("the ack of %v cleared the fatal SXid raised after it was judged", cur)
	}
}

// A board an earlier run missed, acknowledged while missing (sent back),
// is not raised again at the next boot's start while it stays missing
// (docs/actions.md: "until it is acknowledged").
func TestEarlierMissingAckedStaysQuietAfterReboot(t *testing.T) {
	r := newRig(t, 1, nil)
	const gone = "GPU-dead0002-0000-0000-0000-000000000000"
	h := action.History{UUID: gone}
	h.Boot("B0")
	if err := board.Write(r.dir, h); err != nil {
		t.Fatal(err)
	}
	r.m.ident.BootID = "B1"
	r.m.missingFromState()
	if len(r.m.states.missing) != 1 {
		t.Fatalf("boot B1: %d missing boards, want 1", len(r.m.states.missing))
	}
	if _, err := r.m.Ack(gone, r.m.states.missing[0].Action.Action, "sent back", "root"); err != nil {
		t.Fatal(err)
	}
	r.m.ident.BootID = "B2" // the next boot's start
	r.m.states.missing = nil
	r.m.states.boardsMissing.Store(0)
	r.m.start = time.Now().Add(time.Minute)
	r.m.missingFromState()
	if n := len(r.m.states.missing); n != 0 {
		t.Errorf("boot B2: the acknowledged board is raised again: %v (gpus_missing %d)", r.m.states.missing[0].Action, r.m.hostView().GPUsMissing)
	}
}

// TestHangPublishedAsAckJudgesIsOneHang: a hang published while an ack's
// judgement runs (between its first read of the monotonic clock and its
// read of the slot) is judged at the clock read with the slot, under its
// lock: one hang from its start, which the ack covers while it goes on.
// Judged at the earlier read, it would seem younger than nothing, begun
// then, and begin again at the next judgement: not acknowledged.
func TestHangPublishedAsAckJudgesIsOneHang(t *testing.T) {
	var mono atomic.Int64
	var publish atomic.Pointer[func()]
	r := newRig(t, 1, func(c *Config) {
		c.mono = func() time.Duration {
			now := time.Duration(mono.Load())
			if f := publish.Swap(nil); f != nil {
				(*f)() // just after this read
			}
			return now
		}
	})
	gs, _, _ := stepper(r, 1)
	mono0 := 3 * time.Hour // the daemon has run for three hours
	mono.Store(int64(mono0))
	gs.judgeAction(time.Now(), true, nil)
	// The poll loop publishes the hang of a sample dispatched after the
	// ack's judgement first read the clock, past its deadline.
	since := mono0 + 500*time.Millisecond
	hang := func() {
		mono.Store(int64(since + 2*time.Second))
		gs.slot.Update(func(g *live.GPU) { g.Hung("nvmlDeviceGetPowerUsage", time.Now(), since) })
	}
	publish.Store(&hang)
	res, err := r.m.Ack(gs.g.Info().UUID, action.Watch, "slow driver, known", "root")
	if err != nil || publish.Load() != nil {
		t.Fatalf("ack at watch of the hang published as it judged: %+v, %v (published: %v)", res, err, publish.Load() == nil)
	}
	mono.Store(int64(since + 3*time.Second))
	gs.judgeAction(time.Now(), true, nil)
	if g := gs.slot.Get(); g.Action.Action != action.Watch || !strings.Contains(g.Action.Reason(), "acknowledged") {
		t.Errorf("the hang going on: %v %q, want watch (acknowledged)", g.Action.Action, g.Action.Reasons)
	}
}

// A recovery action an earlier run of the logger in this boot counted and
// acknowledged is judged twice before any health reading (the first
// sample slow), then the readings show it: it is the occurrence that run
// counted, found when the field is first read: acknowledged (watch), not
// counted again. Judged absent before its field was read, it was new:
// reboot, counted twice.
func TestAckedRecoveryActionFoundAtTheFirstReading(t *testing.T) {
	r := newRig(t, 1, nil)
	gs := r.m.gpus[0]
	writeAckedEarlier(t, r, gs, "recovery_2", action.Reboot)
	gs.judgeAction(time.Now(), true, nil)
	gs.judgeAction(time.Now(), true, nil)
	if !gs.Health().At.IsZero() {
		t.Fatal("a health reading before the first sample")
	}
	r.devs[0].Update(func(d *fakenvml.Dev) {
		if d.Fields == nil {
			d.Fields = map[uint32]uint64{}
		}
		d.Fields[nvml.FI_DEV_GET_GPU_RECOVERY_ACTION] = 2
	})
	_, _, sample := stepper(r, 3)
	sample(3)
	gs.judgeAction(time.Now(), true, nil)
	if v, ok := gs.Health().Vals[reading.HRecoveryAction].Get(); !ok || v != 2 {
		t.Fatalf("recovery action read %v %v, want 2", v, ok)
	}
	if g := gs.slot.Get(); g.Action.Action != action.Watch || !strings.Contains(g.Action.Reason(), "(acknowledged)") {
		t.Errorf("action %v %q, want watch: the earlier run's recovery action, acknowledged", g.Action.Action, g.Action.Reasons)
	}
	if c := countedThisBoot(t, r, gs, "recovery_2"); c.Count != 1 {
		t.Errorf("recovery_2 counted %+v, want 1", c)
	}
}
