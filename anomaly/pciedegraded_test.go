package anomaly

import (
	"strings"
	"testing"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

// link sets the current and maximum PCIe width and generation, the
// P-state and the utilization; a negative value is an absent reading.
func link(w, maxW, g, maxG, pstate, util int) mod {
	return func(s *reading.Sample) {
		for id, v := range map[reading.ID]int{reading.PCIeWidth: w, reading.PCIeMaxWidth: maxW, reading.PCIeGen: g,
			reading.PCIeMaxGen: maxG, reading.PState: pstate, reading.GPUUtil: util} {
			s.Values[id] = reading.Opt[uint64]{}
			if v >= 0 {
				s.Set(id, uint64(v))
			}
		}
	}
}

func TestPCIeDegraded(t *testing.T) {
	busyX8 := link(8, 16, 5, 5, 0, 90)
	tests := []struct {
		name  string
		steps []mod // one sample a second
		want  []bool
	}{
		{"x8 of x16 while busy: flagged after the grace time", []mod{busyX8, busyX8, busyX8, busyX8}, []bool{false, false, true, true}},
		{"gen 4 of 5 while busy", []mod{link(16, 16, 4, 5, 0, 80), link(16, 16, 4, 5, 0, 80), link(16, 16, 4, 5, 0, 80)}, []bool{false, false, true}},
		{"busy in P2 at the threshold", []mod{link(16, 16, 3, 5, 2, 50), link(16, 16, 3, 5, 2, 50), link(16, 16, 3, 5, 2, 50)}, []bool{false, false, true}},
		{"idle in P0 (persistence mode) at gen 1 is not degraded", []mod{link(16, 16, 1, 5, 0, 0), link(16, 16, 1, 5, 0, 0), link(16, 16, 1, 5, 0, 0)}, []bool{false, false, false}},
		{"idle GPU at a low generation is not degraded", []mod{link(16, 16, 1, 5, 8, 0), link(16, 16, 1, 5, 8, 49), link(16, 16, 1, 5, 8, 0)}, []bool{false, false, false}},
		{"an idle sample restarts the wait", []mod{busyX8, busyX8, link(8, 16, 1, 5, 8, 0), busyX8, busyX8, busyX8}, []bool{false, false, false, false, false, true}},
		{"back at full speed restarts the wait", []mod{busyX8, busyX8, link(16, 16, 5, 5, 0, 90), busyX8, busyX8}, []bool{false, false, false, false, false}},
		{"full link while busy", []mod{link(16, 16, 5, 5, 0, 100), link(16, 16, 5, 5, 0, 100), link(16, 16, 5, 5, 0, 100)}, []bool{false, false, false}},
		{"maximum absent: no evidence", []mod{link(8, -1, 5, 5, 0, 90), link(8, -1, 5, 5, 0, 90), link(8, -1, 5, 5, 0, 90)}, []bool{false, false, false}},
		{"current width absent: no evidence", []mod{link(-1, 16, 5, 5, 0, 90), link(-1, 16, 5, 5, 0, 90), link(-1, 16, 5, 5, 0, 90)}, []bool{false, false, false}},
		{"utilization absent: not known busy", []mod{link(8, 16, 5, 5, 0, -1), link(8, 16, 5, 5, 0, -1), link(8, 16, 5, 5, 0, -1)}, []bool{false, false, false}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := pcieDegradedDef.New(Knobs{"PCIeDegradedAfterS": 2, "PCIeBusyUtilPct": 50})
			for i, m := range tt.steps {
				f := d.Check(Input{Cur: mk(m), Seen: i + 1, Now: t0.Add(time.Duration(i) * time.Second)})
				if got := f.Flag == 1; got != tt.want[i] {
					t.Fatalf("sample %d: flagged %v, want %v", i, got, tt.want[i])
				}
				if f.Flag == 1 && !f.Count {
					t.Fatalf("sample %d: flagged but not counted", i)
				}
			}
		})
	}
}

// TestPCIeDegradedStartsOverAfterAnOutage: the first good sample after an
// outage (Seen 0) is compared with nothing, so the grace time starts again.
func TestPCIeDegradedStartsOverAfterAnOutage(t *testing.T) {
	d := pcieDegradedDef.New(Knobs{"PCIeDegradedAfterS": 2, "PCIeBusyUtilPct": 50})
	s := mk(link(8, 16, 4, 5, 0, 90))
	for i, seen := range []int{1, 2, 0, 1, 2} {
		f := d.Check(Input{Cur: s, Seen: seen, Now: t0.Add(time.Duration(i) * 2 * time.Second)})
		if want := i == 1 || i == 4; (f.Flag == 1) != want {
			t.Fatalf("sample %d (seen %d): flagged %v, want %v", i, seen, f.Flag == 1, want)
		}
	}
}

// TestPCIeDegradedFlagAndNotice: the row's text and the log notice say the
// link against its maximum.
func TestPCIeDegradedFlagAndNotice(t *testing.T) {
	d := pcieDegradedDef.New(Knobs{"PCIeDegradedAfterS": 1, "PCIeBusyUtilPct": 50})
	s := mk(link(8, 16, 4, 5, 0, 90))
	d.Check(Input{Cur: s, Seen: 1, Now: t0})
	f := d.Check(Input{Cur: s, Seen: 2, Now: t0.Add(time.Second)})
	if f.Flag != 1 || !f.Notice {
		t.Fatalf("finding %+v, want a flag and a notice", f)
	}
	kind := pcieDegradedDef.kinds[0]
	if got := string(reading.Flag{Kind: kind, A: f.A, B: f.B}.AppendText(nil)); got != "PCIE_DEGRADED(x8,gen4)" {
		t.Errorf("flag text %q", got)
	}
	attrs := pcieDegradedDef.Notice.Attrs(f.V)
	if len(attrs) != 1 || !strings.Contains(attrs[0].Value.String(), "x8 of x16, gen 4 of 5") {
		t.Errorf("notice attrs %v", attrs)
	}
}

// TestPCIeDegradedIsAHealthReason: the detector's flag begins the
// pcie_degraded health reason (a warning with its own HEALTH_WARN flag on
// the row it began, asking for an inspection); it is held for the hold
// time after the last flagged sample, so an idle spell does not clear a
// link that trained down, and then it clears.
func TestPCIeDegradedIsAHealthReason(t *testing.T) {
	tr := NewTracker(0, DefaultConfig()) // PCIeDegradedAfterS 60
	busy := mk(link(8, 16, 4, 5, 0, 90))
	busy.Values[reading.HECCMode] = reading.Some[uint64](1) // a health reading: the verdict is judged
	idle := mk(link(8, 16, 1, 5, 0, 0))
	idle.Values[reading.HECCMode] = reading.Some[uint64](1)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	observe := func(s *reading.Sample, d time.Duration) (Result, string) {
		c := *s
		r := tr.Observe(&c, at(d))
		return r, c.Flags.String()
	}
	for i := range 61 { // the first sample is compared with nothing: the wait starts at the second
		if r, flags := observe(busy, time.Duration(i)*time.Second); r.Verdict.Has(ReasonPCIeDegraded) || flags != "" {
			t.Fatalf("%ds: %v %q before the grace time", i, r.Verdict.Names(), flags)
		}
	}
	r, flags := observe(busy, 61*time.Second)
	if !r.Verdict.Has(ReasonPCIeDegraded) || r.Verdict.Level() != "warning" {
		t.Fatalf("after a minute busy at x8 gen 4 (since the second sample): %v %s", r.Verdict.Names(), r.Verdict.Level())
	}
	if !strings.Contains(flags, "PCIE_DEGRADED(x8,gen4)") || !strings.Contains(flags, "HEALTH_WARN(pcie_degraded)") {
		t.Errorf("flags %q", flags)
	}
	if _, flags := observe(busy, 62*time.Second); strings.Contains(flags, "HEALTH_WARN") {
		t.Errorf("the reason began again: %q", flags)
	}
	if r, _ := observe(idle, 62*time.Second+healthHold-time.Second); !r.Verdict.Has(ReasonPCIeDegraded) {
		t.Errorf("idle within the hold: reason cleared")
	}
	if r, _ := observe(idle, 62*time.Second+healthHold); r.Verdict.Has(ReasonPCIeDegraded) {
		t.Errorf("idle past the hold: reason still held")
	}
	causes := Causes(RepairInput{Now: at(70 * time.Second), Health: HealthVerdict{Reasons: 1 << ReasonPCIeDegraded}})
	if len(causes) != 1 || causes[0].Action.String() != "inspect" {
		t.Errorf("causes %+v, want one inspect", causes)
	}
	if got, ok := SampleLinkText(busy); !ok || got != "x8 of x16, gen 4 of 5" {
		t.Errorf("SampleLinkText %q %v", got, ok)
	}
	if rs, ok := FlagReason("PCIE_DEGRADED"); !ok || rs != ReasonPCIeDegraded {
		t.Errorf("FlagReason(PCIE_DEGRADED) = %v %v", rs, ok)
	}
	if _, ok := FlagReason("FAN_SPIKE"); ok {
		t.Errorf("FlagReason(FAN_SPIKE) is a reason")
	}
}
