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
	h.Ack = &AckRecord{Time: t0.Add(30 * time.Minute), Classes: []string{"xid79"}}
	if !h.Acked("xid79", t0.Add(time.Minute)) || h.Acked("xid79", t0.Add(time.Hour)) || h.Acked("ecc_dbe", t0) {
		t.Error("Acked")
	}
}
