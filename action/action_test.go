package action

import (
	"encoding/json"
	"testing"
	"time"
)

func TestNamesRoundTrip(t *testing.T) {
	for a := range NumActions {
		b, err := json.Marshal(a)
		if err != nil {
			t.Fatal(err)
		}
		var back Action
		if err := json.Unmarshal(b, &back); err != nil || back != a {
			t.Errorf("%v: %s back as %v, %v", a, b, back, err)
		}
		if p, err := Parse(a.String()); err != nil || p != a {
			t.Errorf("Parse(%q) = %v, %v", a.String(), p, err)
		}
	}
	if _, err := Parse("reset"); err == nil {
		t.Error("Parse took an unknown name")
	}
	if _, err := json.Marshal(NumActions); err == nil {
		t.Error("an action out of range was encoded")
	}
}

// TestOrder: the actions are least first, and only watch and none leave the
// GPU in service.
func TestOrder(t *testing.T) {
	order := []Action{None, Watch, RecoverFabric, ResetGPU, DrainAndReset, Reboot, PowerCycle, Inspect}
	for i, a := range order {
		if int(a) != i {
			t.Errorf("%v is at %d, want %d", a, a, i)
		}
		if a.Drains() != (a > Watch) {
			t.Errorf("%v: Drains %v", a, a.Drains())
		}
	}
}

func TestHistoryBootsAndAcks(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC)
	var h History
	h.Count("A", "xid79", t0)
	h.Count("A", "xid79", t0.Add(time.Minute))
	h.Count("B", "xid79", t0.Add(time.Hour))
	if c := h.Boot("A").Classes["xid79"]; c.Count != 2 || !c.Last.Equal(t0.Add(time.Minute)) {
		t.Errorf("boot A: %+v", c)
	}
	if e := h.Earlier("B"); len(e) != 1 || e[0].BootID != "A" {
		t.Errorf("earlier than B: %+v", e)
	}
	h.Acknowledge(AckRecord{Time: t0.Add(30 * time.Minute), Classes: []string{"xid79"}})
	if !h.IsAcked("xid79", t0.Add(time.Minute)) || h.IsAcked("xid79", t0.Add(time.Hour)) || h.IsAcked("ecc_dbe", t0) {
		t.Error("IsAcked")
	}
	// A later ack of another class does not undo the first.
	h.Acknowledge(AckRecord{Time: t0.Add(2 * time.Hour), Classes: []string{"ecc_dbe"}})
	if !h.IsAcked("xid79", t0.Add(time.Minute)) || !h.IsAcked("ecc_dbe", t0) || h.Ack.Classes[0] != "ecc_dbe" {
		t.Errorf("after a second ack: %+v", h.Acked)
	}
}

// TestHistoryAckOfAnOlderFile: a state file written before Acked was kept
// has its one ack, which a new ack keeps.
func TestHistoryAckOfAnOlderFile(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC)
	h := History{Ack: &AckRecord{Time: t0, Classes: []string{"xid79"}}}
	if !h.IsAcked("xid79", t0) || h.IsAcked("xid79", t0.Add(time.Second)) {
		t.Error("the older file's ack")
	}
	h.Acknowledge(AckRecord{Time: t0.Add(time.Hour), Classes: []string{"ecc_dbe"}})
	if !h.IsAcked("xid79", t0) || h.IsAcked("xid79", t0.Add(time.Second)) || !h.IsAcked("ecc_dbe", t0.Add(time.Hour)) {
		t.Errorf("after a new ack: %+v", h.Acked)
	}
}

// An action name of a newer version decodes (a document is not refused for
// it), keeps its name both ways, drains and sorts above every action this
// version knows; Parse, what an operator types, still refuses it.
func TestNewerActionName(t *testing.T) {
	var a Action
	if err := json.Unmarshal([]byte(`"quarantine_board"`), &a); err != nil {
		t.Fatal(err)
	}
	if a.Known() || a.String() != "quarantine_board" || !a.Drains() || a <= Inspect {
		t.Errorf("newer action: %v known %v drains %v (%d)", a, a.Known(), a.Drains(), a)
	}
	var again Action
	if err := json.Unmarshal([]byte(`"quarantine_board"`), &again); err != nil || again != a {
		t.Errorf("the same name decoded again: %v, %v", again, err)
	}
	if b, err := json.Marshal(a); err != nil || string(b) != `"quarantine_board"` {
		t.Errorf("encoded as %s, %v", b, err)
	}
	if _, err := Parse("quarantine_board"); err == nil {
		t.Error("Parse took a name this version does not know")
	}
	for _, bad := range []string{`""`, `"Reboot now"`, `"x;rm"`} {
		if err := json.Unmarshal([]byte(bad), &a); err == nil {
			t.Errorf("%s decoded as an action", bad)
		}
	}
}
