package board

import (
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/action"
	"github.com/gpu-telemetry/gpu-telemetry/anomaly"
	"github.com/gpu-telemetry/gpu-telemetry/reading"
	"github.com/gpu-telemetry/gpu-telemetry/sink"
	"github.com/gpu-telemetry/gpu-telemetry/xid"
)

// xidAt tells b of Xid code at t and judges it, under mu (the owner's lock).
func xidAt(mu *sync.Mutex, b *Board, code int, t time.Time) action.Current {
	mu.Lock()
	defer mu.Unlock()
	b.Repair().Xid(xid.ExplainDetail(code, reading.XidDetail{}), t, 0) // no judge here ages an Xid
	return b.Judge(anomaly.RepairInput{Now: t})
}

// Saves run outside the owner's lock, by whichever goroutine judged: the
// file ends with the newest history whatever order they run in, a save
// with nothing new writes nothing, and a copy whose write failed is
// written again by the next save, with nothing new to change it.
func TestSavesInOrder(t *testing.T) {
	dir := t.TempDir()
	const uuid = "GPU-a"
	b := New(dir, "boot-a", action.DefaultInspectAfter, action.History{UUID: uuid})
	var mu sync.Mutex
	t0 := time.Now()
	var wg sync.WaitGroup
	for i := range 20 {
		xidAt(&mu, b, 79, t0.Add(time.Duration(i)*time.Second))
		wg.Go(func() {
			if err := b.Save(); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if err := b.Save(); err != nil {
		t.Fatal(err)
	}
	h, err := Read(dir, uuid)
	if err != nil || h.Boots[0].Classes["xid79"].Count != 20 {
		t.Fatalf("the newest copy is not on disk: %+v, %v", h, err)
	}

	p, _ := Path(dir, uuid)
	os.Remove(p)
	if err := b.Save(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(p); !os.IsNotExist(err) {
		t.Fatalf("a save with nothing new wrote: %v", err)
	}

	// A write that fails (the file's name taken by a directory) is retried.
	if err := os.MkdirAll(filepath.Join(p, "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	xidAt(&mu, b, 95, t0.Add(time.Minute))
	if err := b.Save(); err == nil {
		t.Fatal("a write over a directory did not fail")
	}
	if err := os.RemoveAll(p); err != nil {
		t.Fatal(err)
	}
	if err := b.Save(); err != nil {
		t.Fatalf("the retry: %v", err)
	}
	if h, err = Read(dir, uuid); err != nil || h.Boots[0].Classes["xid95"].Count != 1 {
		t.Fatalf("the copy whose write failed was not written again: %+v, %v", h, err)
	}
}

// A save that read its copy before another save wrote a newer one writes
// nothing (an older copy never lands over a newer one), and a save with
// nothing new returns without waiting for a write in progress (the sample
// worker and the kernel reader judge and save: a state file stuck in
// fsync must not hold them up).
func TestSaveNeverWritesAnOlderCopy(t *testing.T) {
	dir := t.TempDir()
	const uuid = "GPU-a"
	b := New(dir, "boot-a", action.DefaultInspectAfter, action.History{UUID: uuid})
	var mu sync.Mutex
	t0 := time.Now()
	xidAt(&mu, b, 79, t0)
	older, olderGen := b.newest() // a save paused after reading its copy
	xidAt(&mu, b, 79, t0.Add(time.Second))
	if err := b.Save(); err != nil {
		t.Fatal(err)
	}
	if err := b.save(older, olderGen); err != nil {
		t.Fatal(err)
	}
	if h, err := Read(dir, uuid); err != nil || h.Boots[0].Classes["xid79"].Count != 2 {
		t.Fatalf("the older copy landed over the newer: %+v, %v", h, err)
	}

	b.write.Lock() // another save's write, stuck
	done := make(chan error, 1)
	go func() { done <- b.Save() }()
	select {
	case err := <-done:
		if err != nil {
			t.Error(err)
		}
	case <-time.After(10 * time.Second):
		t.Error("a save with nothing new waited for another save's write")
	}
	b.write.Unlock()
}

// An ack names the action it clears: another action, or none, is refused
// with the board named; the ack goes into the history the next Judge
// stages.
func TestAck(t *testing.T) {
	dir := t.TempDir()
	b := New(dir, "boot-a", action.DefaultInspectAfter, action.History{UUID: "GPU-a"})
	var mu sync.Mutex
	t0 := time.Now()
	if _, err := b.Ack("GPU 0", action.Current{}, action.None, t0, "root", ""); err == nil || err.Error() != "GPU 0 has no action to acknowledge" {
		t.Errorf("ack of none: %v", err)
	}
	cur := xidAt(&mu, b, 79, t0)
	if _, err := b.Ack("GPU 0", cur, action.Inspect, t0, "root", ""); err == nil || err.Error() != "GPU 0's action is "+cur.Action.String()+", not inspect" {
		t.Errorf("ack of another action: %v", err)
	}
	rec, err := b.Ack("GPU 0", cur, cur.Action, t0, "root", "reseated")
	if err != nil || rec.Action != cur.Action || rec.By != "root" || rec.Note != "reseated" || len(rec.Classes) == 0 {
		t.Fatalf("ack: %+v, %v", rec, err)
	}
	if after := b.Judge(anomaly.RepairInput{Now: t0}); after.Action.Drains() {
		t.Errorf("after the ack: %v %q", after.Action, after.Reasons)
	}
	if err := b.Save(); err != nil {
		t.Fatal(err)
	}
	if h, err := Read(dir, "GPU-a"); err != nil || h.Ack == nil || h.Ack.Note != "reseated" {
		t.Errorf("state file after the ack: %+v, %v", h.Ack, err)
	}
}

func TestPick(t *testing.T) {
	uuids := []string{"GPU-dead0001-0000", "GPU-dead0002-0000", "GPU-beef0001-0000"}
	for _, c := range []struct{ name, sel, want string }{
		{"whole", "GPU-dead0002-0000", "GPU-dead0002-0000"},
		{"whole, case aside", "gpu-DEAD0002-0000", "GPU-dead0002-0000"},
		{"the start of one", "gpu-beef", "GPU-beef0001-0000"},
		{"the start of two", "GPU-dead", ""},
		{"too short a start", "GPU-", ""},
		{"none", "GPU-nope", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := Pick(uuids, c.sel)
			if got != c.want || (err == nil) != (c.want != "") {
				t.Errorf("Pick(%q) = %q, %v; want %q", c.sel, got, err, c.want)
			}
		})
	}
}

// A board missing since a boot that ended in Xid 79 is power_cycle; its
// line at start names its index in the run that last saw it (empty when
// unknown); an ack of another action is refused, and the ack of its own
// is an ACK line and the ACTION line of what it is now.
func TestMissing(t *testing.T) {
	const uuid = "GPU-dead0001"
	h := action.History{UUID: uuid}
	h.Count("an-earlier-boot", "xid79", time.Now().Add(-time.Hour))
	now := time.Now()
	for _, index := range []int{1, -1} {
		m := NewMissing(New(t.TempDir(), "this-boot", action.DefaultInspectAfter, h), index, now)
		if m.Action.Action != action.PowerCycle || m.UUID() != uuid {
			t.Fatalf("missing board %s: %v %q", m.UUID(), m.Action.Action, m.Action.Reasons)
		}
		l := m.Line(now)
		if want := map[int]string{1: "1", -1: ""}[index]; l.UUID != uuid || l.GPU != -1 || l.Type != sink.TypeAction ||
			l.Get("prev_gpu") != want || l.Get("action") != "power_cycle" || l.Get("from") != "none" {
			t.Errorf("index %d: the line at start %+v", index, l)
		}
	}
	m := NewMissing(New(t.TempDir(), "this-boot", action.DefaultInspectAfter, h), 1, now)
	if _, _, err := m.Ack(action.Reboot, now, "root", ""); err == nil || err.Error() != "the missing board "+uuid+"'s action is power_cycle, not reboot" {
		t.Errorf("an ack of another action: %v", err)
	}
	rec, lines, err := m.Ack(action.PowerCycle, now, "root", "reseated")
	if err != nil || rec.Action != action.PowerCycle || m.Action.Action.Drains() || len(lines) != 2 {
		t.Fatalf("ack: %+v, now %v, %d lines, %v", rec, m.Action, len(lines), err)
	}
	if l := lines[0]; l.Type != sink.TypeAck || l.Get("prev_gpu") != "1" || l.Get("action") != "power_cycle" || l.Get("note") != "reseated" {
		t.Errorf("the ACK line %+v", l)
	}
	if l := lines[1]; l.Type != sink.TypeAction || l.Get("action") != "watch" || l.Get("from") != "power_cycle" {
		t.Errorf("the ACTION line %+v", l)
	}
	// An index the earlier run did not know is empty on the ACK and ACTION
	// lines alike (absent, not -1).
	m = NewMissing(New(t.TempDir(), "this-boot", action.DefaultInspectAfter, h), -1, now)
	if _, lines, err = m.Ack(action.PowerCycle, now, "root", ""); err != nil || len(lines) != 2 {
		t.Fatalf("ack of an unknown index: %d lines, %v", len(lines), err)
	}
	for _, l := range lines {
		if !slices.Contains(l.Fields, sink.Field{Key: "prev_gpu", Value: ""}) {
			t.Errorf("%s line %+v: want prev_gpu present and empty", l.Type, l.Fields)
		}
	}
}

// A save with a new copy while another save's write is stuck (fsync on a
// stalled disk) returns at once, leaving its copy pending (the sample
// worker, the kernel reader and the acks save: they must not wait on the
// disk); the next save once that write returned writes it.
func TestSaveWithANewCopyNeverWaitsForAnotherWrite(t *testing.T) {
	dir := t.TempDir()
	const uuid = "GPU-a"
	b := New(dir, "boot-a", action.DefaultInspectAfter, action.History{UUID: uuid})
	var mu sync.Mutex
	t0 := time.Now()
	xidAt(&mu, b, 79, t0)
	if !b.Pending() {
		t.Fatal("a copy never saved is not pending")
	}
	b.write.Lock() // another save's write, stuck
	xidAt(&mu, b, 79, t0.Add(time.Second))
	done := make(chan error, 1)
	go func() { done <- b.Save() }()
	select {
	case err := <-done:
		if err != nil {
			t.Error(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a save with a new copy waited for another save's write")
	}
	if !b.Pending() {
		t.Error("the copy left to a later save is not pending")
	}
	b.write.Unlock() // the stuck write returned
	if err := b.Save(); err != nil {
		t.Fatal(err)
	}
	if h, err := Read(dir, uuid); err != nil || h.Boots[0].Classes["xid79"].Count != 2 || b.Pending() {
		t.Fatalf("the later save did not write the newest copy: %+v, %v (pending %v)", h, err, b.Pending())
	}
}

// A board whose UUID is not known yet (a GPU stuck at start) is judged
// like any other, but has no file to write: Save writes nothing under any
// other name and fails nothing, and nothing is pending.
func TestUnidentifiedBoardWritesNoFile(t *testing.T) {
	dir := t.TempDir()
	b := New(dir, "boot-a", action.DefaultInspectAfter, action.History{})
	var mu sync.Mutex
	if cur := xidAt(&mu, b, 79, time.Now()); !cur.Action.Drains() {
		t.Errorf("Xid 79 on an unidentified board: %v", cur)
	}
	if err := b.Save(); err != nil || b.Pending() {
		t.Errorf("save: %v, pending %v", err, b.Pending())
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("an unidentified board wrote %v", ents)
	}
}
