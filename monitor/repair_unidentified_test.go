package monitor

import (
	"os"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/action"
	"github.com/gpu-telemetry/gpu-telemetry/action/board"
	"github.com/gpu-telemetry/gpu-telemetry/kmsg"
)

// A GPU stuck at start (a restart during a GSP fault: its UUID unknown)
// has a repair action judged from its state and events: hung, then reboot
// after a minute hung; an Xid 79 the kernel log reports for it is in its
// action at once. No state file is written while its UUID is unknown
// (evidence is kept by UUID, never under an index); once the GPU answers,
// its board's history has this boot's Xid 79 (the next boot's
// power-cycle check reads it), and its action still has the Xid.
func TestRepairActionOfAGPUStuckAtStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, answer := rigGPU1StuckAtStart(t)
		const uuid = "GPU-b"
		var atXid, hung, answered action.Current
		var files []string
		r.run(5*time.Second, func() {
			time.Sleep(2 * time.Second)
			r.m.onKernelRecord(kmsg.Record{Time: 3202 * time.Second, Message: "NVRM: Xid (PCI:0000:02:00): 79, pid=1, name=x, GPU has fallen off the bus."}, time.Now())
			time.Sleep(2 * time.Second)
			atXid = r.m.gpus[1].slot.Get().Action
			time.Sleep(70 * time.Second)
			hung = r.m.gpus[1].slot.Get().Action
			ents, _ := os.ReadDir(r.dir)
			for _, e := range ents {
				if strings.HasPrefix(e.Name(), "action-") {
					files = append(files, e.Name())
				}
			}
			answer()
			time.Sleep(5 * time.Second)
			answered = r.m.gpus[1].slot.Get().Action
		})
		if !strings.Contains(r.logs.String(), "its static facts are known now") {
			t.Fatalf("GPU 1 did not answer within the run:\n%s", r.logs)
		}
		if !atXid.Action.Drains() || !strings.Contains(atXid.Reason(), "Xid 79") {
			t.Errorf("GPU 1, stuck at start, after its Xid 79: action %v", atXid)
		}
		if !strings.Contains(hung.Reason(), "NVML call stuck for") {
			t.Errorf("GPU 1, stuck at start for a minute: action %v, want a reason for the hang", hung)
		}
		for _, f := range files {
			if f != "action-GPU-a.json" {
				t.Errorf("a state file %s written while GPU 1's UUID was not known", f)
			}
		}
		if !answered.Action.Drains() || !strings.Contains(answered.Reason(), "Xid 79") {
			t.Errorf("GPU 1, once it answered: action %v, want its Xid 79 still", answered)
		}
		h, err := board.Read(r.dir, uuid)
		if err != nil {
			t.Fatal(err)
		}
		b := h.Boot(r.m.repairBoot())
		if b.Classes["xid79"].Count != 1 || !b.Answered {
			t.Errorf("GPU 1's board history of this boot %+v, want xid79 once, answered", *b)
		}
	})
}

// Without the kernel's boot id, repair_boots_unknown counts the boards'
// histories started in this run's boot of its own: once a board. A GPU
// stuck at start is judged without a history until its UUID is known, and
// its board's is counted then, once, as the other GPU's is.
func TestBootsUnknownCountedOncePerBoard(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, answer := rigGPU1StuckAtStart(t)
		if r.m.ident.BootID != "" {
			t.Fatalf("the rig has a boot id %q", r.m.ident.BootID)
		}
		r.run(5*time.Second, func() {
			time.Sleep(3 * time.Second)
			answer()
		})
		if !strings.Contains(r.logs.String(), "its static facts are known now") {
			t.Fatalf("GPU 1 did not answer within the run:\n%s", r.logs)
		}
		if n := r.counted("repair_boots_unknown"); n != 2 {
			t.Errorf("repair_boots_unknown %d, want 2: one for each board", n)
		}
	})
}

// A GPU stuck at start (its UUID unknown) is acknowledged by its index, as
// status shows it: the ack holds in its action at once, and once the GPU
// answers it is its board's (the Xid 79 it acknowledged stays
// acknowledged, and the board's state file has the ack).
func TestAckOfAGPUWhoseUUIDIsNotKnownYet(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, answer := rigGPU1StuckAtStart(t)
		var ackErr error
		var acked, answered action.Current
		r.run(5*time.Second, func() {
			time.Sleep(2 * time.Second)
			r.m.onKernelRecord(kmsg.Record{Time: 3202 * time.Second, Message: "NVRM: Xid (PCI:0000:02:00): 79, pid=1, name=x, GPU has fallen off the bus."}, time.Now())
			time.Sleep(2 * time.Second)
			var res AckResult
			res, ackErr = r.m.Ack("1", action.Reboot, "seen, left for the reboot", "root")
			acked = res.Now
			answer()
			time.Sleep(5 * time.Second)
			answered = r.m.gpus[1].slot.Get().Action
		})
		if ackErr != nil {
			t.Fatalf("ack of GPU 1 by its index, its UUID not known: %v", ackErr)
		}
		if acked.Action.Drains() {
			t.Errorf("GPU 1 after the ack: %v", acked)
		}
		if !strings.Contains(r.logs.String(), "its static facts are known now") {
			t.Fatalf("GPU 1 did not answer within the run:\n%s", r.logs)
		}
		if answered.Action.Drains() {
			t.Errorf("GPU 1, once it answered: action %v, want its Xid 79 still acknowledged", answered)
		}
		if ev := r.eventsLog(); !slices.ContainsFunc(strings.Split(ev, "\n"), func(l string) bool {
			return strings.Contains(l, " gpu=1 ") && strings.Contains(l, "type=ACK action=reboot")
		}) {
			t.Errorf("no ACK line of GPU 1:\n%s", ev)
		}
		h, err := board.Read(r.dir, "GPU-b")
		if err != nil {
			t.Fatal(err)
		}
		if c := h.Boot(r.m.repairBoot()).Classes["xid79"]; c.Count != 1 || !h.IsAcked("xid79", c.Last) || h.Ack == nil {
			t.Errorf("GPU 1's board history: xid79 %+v, ack %+v: want xid79 once, acknowledged", c, h.Ack)
		}
	})
}

// A GPU stuck at start whose hang an operator acknowledged at watch by its
// index, and whose UUID reads while the same sample is still stuck (its
// static facts answer, a reading of its sample does not): the ack goes on
// covering that hang in its board's action: acknowledged watch, its
// ACTION line after the ack's; the reboot the hang asks for after a
// minute is not covered.
func TestAckAtWatchHoldsWhenTheUUIDReadsMidHang(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, answer := rigGPU1StuckAtStart(t)
		stuck := r.devs[1].Block("GetTemperature", nil) // the sample after its static facts
		t.Cleanup(stuck)
		var ackErr error
		var uuidRead, reboot action.Current
		var uuid string
		r.run(5*time.Second, func() {
			time.Sleep(3 * time.Second)
			_, ackErr = r.m.Ack("1", action.Watch, "slow driver, known", "root")
			answer()
			time.Sleep(5 * time.Second)
			uuid = r.m.gpus[1].g.Info().UUID
			uuidRead = r.m.gpus[1].slot.Get().Action
			time.Sleep(time.Minute)
			reboot = r.m.gpus[1].slot.Get().Action
			stuck()
		})
		if ackErr != nil {
			t.Fatalf("ack of GPU 1 at watch by its index: %v", ackErr)
		}
		if uuid != "GPU-b" {
			t.Fatalf("GPU 1's UUID %q did not read while its sample was stuck", uuid)
		}
		if uuidRead.Action != action.Watch || !strings.Contains(uuidRead.Reason(), "stuck past the deadline (acknowledged)") {
			t.Errorf("GPU 1, still hung once its UUID read: %v, want its hang at watch still acknowledged", uuidRead)
		}
		if reboot.Action != action.Reboot || strings.Contains(reboot.Reason(), "acknowledged") {
			t.Errorf("GPU 1, hung over a minute: %v, want reboot, not covered by the ack of watch", reboot)
		}
		var lines []string
		for l := range strings.Lines(r.eventsLog()) {
			if strings.Contains(l, " gpu=1 ") && (strings.Contains(l, "type=ACK ") || strings.Contains(l, "type=ACTION ")) {
				lines = append(lines, strings.TrimSpace(l[strings.Index(l, "type="):]))
			}
		}
		want := []string{
			`type=ACTION action=watch from=none reason="an NVML call stuck past the deadline"`,
			`type=ACK action=watch by=root note="slow driver, known" classes=hung`,
			`type=ACTION action=watch from=watch reason="an NVML call stuck past the deadline (acknowledged)"`,
		}
		if len(lines) < 4 || !slices.Equal(lines[:3], want) || !strings.HasPrefix(lines[3], "type=ACTION action=reboot from=watch") {
			t.Errorf("GPU 1's ACK and ACTION lines:\n%s\nwant the ack of watch, its hang acknowledged, then the reboot", strings.Join(lines, "\n"))
		}
		h, err := board.Read(r.dir, "GPU-b")
		if err != nil {
			t.Fatal(err)
		}
		if c := h.Boot(r.m.repairBoot()).Classes["hung"]; c.Count != 1 || h.IsAcked("hung", c.Last) || h.Ack == nil || h.Ack.Action != action.Watch {
			t.Errorf("GPU 1's board history: hung %+v, ack %+v: want the reboot counted once, not acknowledged, the ack of watch kept", c, h.Ack)
		}
	})
}

// rigGPU1StuckAtStart is a rig of two GPUs on a host root with the NVIDIA
// driver's files and no boot id, GPU 1 stuck at start (its name, so its
// UUID, not read) until answer is called.
func rigGPU1StuckAtStart(t *testing.T) (r *rig, answer func()) {
	hostRoot := t.TempDir()
	fakeNvidiaDriver(t, hostRoot)
	lib := fakeLib(2)
	answer = lib.Devs[1].Block("GetName", nil)
	t.Cleanup(answer)
	return newRigOn(t, lib, func(c *Config) { c.HostRoot = hostRoot }), answer
}
