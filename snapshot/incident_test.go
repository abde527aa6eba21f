package snapshot

import (
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/action"
	"github.com/gpu-telemetry/gpu-telemetry/internal/testutil"
	"github.com/gpu-telemetry/gpu-telemetry/xid"
)

// TestEscalationInsideCooldown plays the Blackwell GSP crash story on one
// GPU within seconds: the cooldown holds back the flood of one stage, never
// the next, worse stage. Snapshots: Xid 62 (the start), 119 (GSP timeout)
// and 79 (fallen off the bus); not 45, a second 119, 154 (asking for a reset,
// which 62 already asked for), or the GPU lost after 79.
func TestEscalationInsideCooldown(t *testing.T) {
	m, clk := newTestManager(t, nil)
	xidEv := func(code int, text string) Event {
		e := xid.ExplainDetail(code, xid.Detail(code, text))
		return XidEvent(clk.Now(), e, e.Reason("kmsg"))
	}
	steps := []struct {
		ev     Event
		accept bool
	}{
		{xidEv(62, ""), true},
		{xidEv(45, ""), false},
		{xidEv(119, ""), true},
		{xidEv(119, ""), false},
		{xidEv(154, "GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset Required)"), false},
		{RecoveryEvent(clk.Now(), 1, "GPU recovery action 1: GPU reset (kmsg)"), false},
		{xidEv(79, ""), true},
		{Event{What: "GPU lost", Reason: "GPU lost: NVML_ERROR_GPU_IS_LOST", Stage: StageLost}, false},
		{RecoveryEvent(clk.Now(), 2, "GPU recovery action 2: node reboot (nvml)"), false},
	}
	if id, snap := m.Incident(0); id != "" || snap != "" {
		t.Errorf("Incident(0) = %q, %q before any", id, snap)
	}
	var last Decision
	// Every event names the incident by its first snapshot, and the
	// snapshot holding its evidence: its own, else the newest one before it.
	dir := filepath.Join(m.cfg.Dir, "crashes")
	const first = "crash-20260314-092653.589-gpu0"
	newest := ""
	for i, s := range steps {
		s.ev.Time = clk.Now()
		last = crash(m, 0, s.ev, testCrashRequest)
		if last.Accepted != s.accept {
			t.Errorf("step %d (%s): accepted %v, want %v", i, s.ev.what(), last.Accepted, s.accept)
		}
		if s.accept {
			newest = filepath.Join(dir, baseName("crash", clk.Now(), 0)+".log")
		}
		if last.Incident != first || last.Snapshot != newest {
			t.Errorf("step %d: incident %q, snapshot %q; want %q, %q", i, last.Incident, last.Snapshot, first, newest)
		}
		if id, snap := m.Incident(0); id != first || snap != newest {
			t.Errorf("step %d: Incident(0) = %q, %q; want %q, %q", i, id, snap, first, newest)
		}
		if last.Accepted && last.Escalation != (i > 0) {
			t.Errorf("step %d: escalation %v", i, last.Escalation)
		}
		clk.Advance(time.Second)
	}
	wantHeadline := "GSP RPC Timeout (Xid 119), then GPU has fallen off the bus (Xid 79); started with Internal micro-controller halt (Xid 62)"
	if last.Headline != wantHeadline {
		t.Errorf("headline %q, want %q", last.Headline, wantHeadline)
	}
	// After the cooldown, a new incident with an id of its own.
	clk.Advance(DefaultCrashCooldown)
	if d := crash(m, 0, xidEv(62, ""), testCrashRequest); !d.Accepted || d.Incident != baseName("crash", clk.Now(), 0) || d.Incident == first {
		t.Errorf("the next incident: %+v", d)
	}
	closeManager(t, m)
	if c := counted(m); c["crash_incidents"] != 2 || c["crash_escalations"] != 2 || c["crash_snapshots"] != 4 || c["crash_snapshots_suppressed"] != 6 {
		t.Errorf("counters %v", c)
	}
	names := files(t, dir, "crash-*")
	want := []string{"crash-20260314-092653.589-gpu0.log", "crash-20260314-092655.589-gpu0.log", "crash-20260314-092659.589-gpu0.log", "crash-20260314-092802.589-gpu0.log"}
	if !slices.Equal(names, want) {
		t.Fatalf("snapshots %v, want %v", names, want)
	}
	b, err := os.ReadFile(filepath.Join(dir, want[2]))
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	testutil.Contains(t, "the Xid 79 snapshot", s,
		"Headline: GPU 0: "+wantHeadline+"\n",
		"=== Critical events of this GPU in this incident (",
		"2026-03-14T09:26:53.589Z +0.000s Xid 62: Internal micro-controller halt (kmsg)",
		"[snapshot crash-20260314-092653.589-gpu0.log]\n",
		"2026-03-14T09:26:54.589Z +1.000s Xid 45: ",
		"2026-03-14T09:26:59.589Z +6.000s Xid 79: GPU has fallen off the bus (kmsg)",
		"(kmsg). Reboot the node (cold if needed); check PCIe, power, cooling and the system event log. [NVIDIA: RESTART_BM] [this snapshot]\n",
	)
	if h, ok := ParseHeader(s); !ok || h.Headline != "GPU 0: "+wantHeadline {
		t.Errorf("ParseHeader: %+v", h)
	}

	// After the cooldown a new incident begins, with the least of events.
	m2, clk2 := newTestManager(t, nil)
	crash(m2, 1, XidEvent(clk2.Now(), xid.ExplainDetail(79, xid.Detail(79, "")), "Xid 79"), testCrashRequest)
	clk2.Advance(DefaultCrashCooldown)
	if d := crash(m2, 1, XidEvent(clk2.Now(), xid.ExplainDetail(45, xid.Detail(45, "")), "Xid 45"), testCrashRequest); !d.Accepted || d.Escalation {
		t.Errorf("after the cooldown: %+v", d)
	}
	closeManager(t, m2)
	if c := counted(m2); c["crash_incidents"] != 2 || c["crash_escalations"] != 0 {
		t.Errorf("second manager: %v", c)
	}
}

// TestFloodStaysOneSnapshot: a flood of one stage inside the cooldown is one
// snapshot, and the incident's list is bounded.
func TestFloodStaysOneSnapshot(t *testing.T) {
	m, clk := newTestManager(t, nil)
	for i := 0; i < maxIncidentEvents+50; i++ {
		e := xid.ExplainDetail(13, xid.Detail(13, ""))
		crash(m, 2, XidEvent(clk.Now(), e, e.Reason("nvml")), testCrashRequest)
		clk.Advance(10 * time.Millisecond)
	}
	closeManager(t, m)
	if c := counted(m); c["crash_snapshots"] != 1 || c["crash_escalations"] != 0 || c["crash_snapshots_suppressed"] != maxIncidentEvents+49 {
		t.Errorf("counters %v", c)
	}
	m.mu.Lock()
	sec := m.gpus[2].inc.eventsSection(-1)
	m.mu.Unlock()
	if n := strings.Count(sec.Body, "\n"); n != maxIncidentEvents+1 || !strings.Contains(sec.Body, "(50 later events not listed)") {
		t.Errorf("%d lines; title %q; tail %q", n, sec.Title, sec.Body[len(sec.Body)-60:])
	}
}

// TestApplicationXidDoesNotHideAHardwareFault: an application's Xid (13:
// the workload faulted, NVIDIA's bucket RESTART_APP) asks only to be watched,
// no repair, and is a stage below a hardware fault, so a double-bit ECC
// error (Xid 48) a second later takes its own snapshot inside the
// cooldown. RESTART_BM and RESTART_VM still ask for the node's reboot.
func TestApplicationXidDoesNotHideAHardwareFault(t *testing.T) {
	for _, tc := range []struct {
		code  int
		stage Stage
		asks  action.Action
	}{
		{13, StageApplication, action.Watch},
		{31, StageApplication, action.Watch},
		{94, StageFault, action.Watch},   // contained ECC error: restart the application
		{79, StageLost, action.Reboot},   // RESTART_BM
		{151, StageFault, action.Reboot}, // RESTART_VM
	} {
		ev := XidEvent(time.Time{}, xid.ExplainDetail(tc.code, xid.Detail(tc.code, "")), "")
		if ev.Stage != tc.stage || ev.Asks != tc.asks {
			t.Errorf("Xid %d: stage %d asks %d, want %d and %d", tc.code, ev.Stage, ev.Asks, tc.stage, tc.asks)
		}
	}
	m, clk := newTestManager(t, nil)
	for i, step := range []struct {
		code   int
		accept bool
	}{{13, true}, {13, false}, {48, true}, {48, false}} {
		e := xid.ExplainDetail(step.code, xid.Detail(step.code, ""))
		if d := crash(m, 0, XidEvent(clk.Now(), e, e.Reason("kmsg")), testCrashRequest); d.Accepted != step.accept {
			t.Errorf("step %d (Xid %d): accepted %v, want %v", i, step.code, d.Accepted, step.accept)
		}
		clk.Advance(time.Second)
	}
}

// TestDecideIsPure drives the crash decision alone (crashState.decide:
// state, event and time in, decision out; no Manager, clock or lock):
// the first event begins an incident, a repeat of its stage inside the
// cooldown is suppressed with the burst and the time left, a worse stage
// escalates, an escalation in the same millisecond gets "-2", and the
// first event after the cooldown begins a new incident.
func TestDecideIsPure(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	const cool = time.Minute
	fault := Event{Reason: "Xid 62", Stage: StageFault}
	firmware := Event{Reason: "Xid 119", Stage: StageFirmware}
	lost := Event{Reason: "Xid 79", Stage: StageLost}
	steps := []struct {
		name               string
		at                 time.Duration
		ev                 Event
		accepted, escalate bool
		burst, suppressed  uint64
		left               time.Duration
		incident, snapshot string // base names; "" when the decision names none
	}{
		{"the first begins an incident", 0, fault, true, false, 0, 0, 0, "crash-20260301-120000.000-gpu2", "crash-20260301-120000.000-gpu2"},
		{"a repeat is suppressed", time.Second, fault, false, false, 1, 1, 59 * time.Second, "crash-20260301-120000.000-gpu2", "crash-20260301-120000.000-gpu2"},
		{"a worse stage escalates", 2 * time.Second, firmware, true, true, 0, 1, 0, "crash-20260301-120000.000-gpu2", "crash-20260301-120002.000-gpu2"},
		{"same millisecond, worse again", 2 * time.Second, lost, true, true, 0, 1, 0, "crash-20260301-120000.000-gpu2", "crash-20260301-120002.000-gpu2-2"},
		// The burst counts the events the cooldown held back in its window
		// (the repeat and this one), not the escalations it let through.
		{"nothing worse than lost", 3 * time.Second, lost, false, false, 2, 2, 57 * time.Second, "crash-20260301-120000.000-gpu2", "crash-20260301-120002.000-gpu2-2"},
		{"after the cooldown, a new incident", 2 * time.Minute, fault, true, false, 0, 2, 0, "crash-20260301-120200.000-gpu2", "crash-20260301-120200.000-gpu2"},
	}
	var st crashState
	for _, s := range steps {
		ev := s.ev
		ev.Time = t0.Add(s.at)
		d := st.decide(2, ev, ev.Time, cool, "/crashes")
		wantSnap := ""
		if s.snapshot != "" {
			wantSnap = "/crashes/" + s.snapshot + ".log"
		}
		if d.Accepted != s.accepted || d.Escalation != s.escalate || d.Burst != s.burst || d.Suppressed != s.suppressed ||
			d.CooldownLeft != s.left || d.Incident != s.incident || d.Snapshot != wantSnap {
			t.Errorf("%s: accepted %v escalation %v burst %d suppressed %d left %s incident %q snapshot %q;\n"+
				"want %v %v %d %d %s %q %q", s.name, d.Accepted, d.Escalation, d.Burst, d.Suppressed, d.CooldownLeft, d.Incident, d.Snapshot,
				s.accepted, s.escalate, s.burst, s.suppressed, s.left, s.incident, wantSnap)
		}
	}
}

// Escalations accepted inside the cooldown are not suppressions: after an
// Xid 13, 62, 119, 79 story the next event held back is the first of the
// burst (Burst 1), logged, and so are the next ones up to the logged limit.
func TestEscalationsAreNotSuppressions(t *testing.T) {
	rec := &recorder{}
	m, clk := newTestManager(t, func(c *Config) { c.Logger = slog.New(rec) })
	for _, ev := range []Event{
		{Reason: "xid13", Stage: StageApplication},
		{Reason: "xid62", Stage: StageFault},
		{Reason: "xid119", Stage: StageFirmware},
		{Reason: "xid79", Stage: StageLost},
	} {
		if d := m.Decide(0, ev); !d.Accepted {
			t.Fatalf("%s not accepted", ev.Reason)
		}
		clk.Advance(time.Second)
	}
	for i := range loggedSuppressions + 1 {
		d := m.Decide(0, Event{Reason: "xid79 again", Stage: StageLost})
		if d.Accepted || d.Burst != uint64(i+1) || d.Suppressed != uint64(i+1) {
			t.Errorf("suppressed event %d: accepted %v, burst %d, suppressed %d; want a burst of %d", i, d.Accepted, d.Burst, d.Suppressed, i+1)
		}
		clk.Advance(time.Second)
	}
	logged := rec.messages(slog.LevelWarn, "crash snapshot suppressed by cooldown")
	if len(logged) != loggedSuppressions || logged[0]["count"] != uint64(1) {
		t.Errorf("suppressions logged %v, want %d, the first with count 1", logged, loggedSuppressions)
	}
	if c := counted(m); c["crash_snapshots_suppressed"] != loggedSuppressions+1 || c["crash_escalations"] != 3 {
		t.Errorf("counters %v", c)
	}
}
