package anomaly

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

// hs returns a sample holding health counters (the rest as mk).
func hs(vals map[reading.ID]uint64) *reading.Sample {
	s := mk()
	for id, v := range vals {
		s.Values[id] = reading.Some(v)
	}
	return s
}

// b200 is a healthy B200's counters.
func b200(over map[reading.ID]uint64) map[reading.ID]uint64 {
	m := map[reading.ID]uint64{
		reading.HECCMode: 1, reading.HSBEVolatile: 0, reading.HDBEVolatile: 0, reading.HRemapPending: 0,
		reading.HRemapFailure: 0, reading.HRemapUncorrectable: 0, reading.HNVLinkCount: 18, reading.HNVLinkUp: 18,
		reading.HNVLinkErrors: 0, reading.HNVLinkRecovery: 0, reading.HNVLinkRecoveryFailed: 0, reading.HRecoveryAction: 0,
		reading.HClkHWThermal: 0, reading.HClkHWPowerBrake: 0, reading.HSRAMThreshold: 0, reading.HChannelRepairPending: 0,
		reading.HTPCRepairPending: 0, reading.HMemoryUnrepairable: 0,
	}
	for k, v := range over {
		m[k] = v
	}
	return m
}

// fabricOK is a fabric health mask with every field reported healthy.
const fabricOK = 2 | 2<<2 | 2<<4 | 2<<6 | 1<<8 | 1<<12 | 1<<14

func TestHealthVerdict(t *testing.T) {
	type step struct {
		at   time.Duration
		vals map[reading.ID]uint64
	}
	for _, tc := range []struct {
		name  string
		steps []step
		want  []string // the verdict's reasons after the last step
		level string
	}{
		{"healthy B200", []step{{0, b200(nil)}, {time.Second, b200(nil)}}, nil, "ok"},
		{"fabric in progress is no verdict (its alert says it)", []step{{0, b200(map[reading.ID]uint64{reading.HFabricState: reading.FabricInProgress, reading.HFabricStatus: 3, reading.HFabricHealth: 0})}}, nil, "ok"},
		{"fabric completed with an error status", []step{{0, b200(map[reading.ID]uint64{reading.HFabricState: reading.FabricCompleted, reading.HFabricStatus: 3})}}, []string{"fabric_error"}, "critical"},
		{"fabric completed fine", []step{{0, b200(map[reading.ID]uint64{reading.HFabricState: reading.FabricCompleted, reading.HFabricStatus: 0, reading.HFabricHealth: fabricOK})}}, nil, "ok"},
		{"fabric route unhealthy", []step{{0, b200(nil)}, {time.Second, b200(map[reading.ID]uint64{reading.HFabricState: reading.FabricCompleted, reading.HFabricStatus: 0, reading.HFabricHealth: fabricOK&^(3<<4) | 1<<4})}}, []string{"fabric_route_unhealthy"}, "critical"},
		{"fabric misconfigured (wrong SysGUID)", []step{{0, b200(map[reading.ID]uint64{reading.HFabricState: reading.FabricCompleted, reading.HFabricHealth: fabricOK&^(0xf<<8) | 2<<8})}}, []string{"fabric_config"}, "critical"},
		{"RTX 5090 supports none of it", []step{{0, map[reading.ID]uint64{reading.HPCIeBadTLP: 0}}, {time.Second, map[reading.ID]uint64{reading.HPCIeBadTLP: 0}}}, nil, "ok"},
		{"volatile DBE", []step{{0, b200(nil)}, {time.Second, b200(map[reading.ID]uint64{reading.HDBEVolatile: 1})}}, []string{"ecc_dbe"}, "critical"},
		{"remap failure", []step{{0, b200(map[reading.ID]uint64{reading.HRemapFailure: 1})}}, []string{"remap_failure"}, "critical"},
		{"remap pending", []step{{0, b200(map[reading.ID]uint64{reading.HRemapPending: 1})}}, []string{"remap_pending"}, "warning"},
		{"remaps near the bank limit (DCGM 512)", []step{{0, b200(map[reading.ID]uint64{reading.HRemapUncorrectable: 512})}}, []string{"remap_near_limit"}, "warning"},
		{"511 remaps", []step{{0, b200(map[reading.ID]uint64{reading.HRemapUncorrectable: 511})}}, nil, "ok"},
		{"link went down", []step{{0, b200(nil)}, {time.Second, b200(map[reading.ID]uint64{reading.HNVLinkUp: 17})}}, []string{"nvlink_down"}, "critical"},
		{"every link inactive from the start (gpud 1085)", []step{{0, b200(map[reading.ID]uint64{reading.HNVLinkUp: 0})}}, []string{"nvlink_down"}, "critical"},
		{"failed recovery", []step{{0, b200(nil)}, {time.Second, b200(map[reading.ID]uint64{reading.HNVLinkRecoveryFailed: 1})}}, []string{"nvlink_recovery_failed"}, "critical"},
		{"failed recovery held 10 min", []step{{0, b200(nil)}, {time.Second, b200(map[reading.ID]uint64{reading.HNVLinkRecoveryFailed: 1})}, {9 * time.Minute, b200(map[reading.ID]uint64{reading.HNVLinkRecoveryFailed: 1})}}, []string{"nvlink_recovery_failed"}, "critical"},
		{"failed recovery forgotten after 10 min", []step{{0, b200(nil)}, {time.Second, b200(map[reading.ID]uint64{reading.HNVLinkRecoveryFailed: 1})}, {11 * time.Minute, b200(map[reading.ID]uint64{reading.HNVLinkRecoveryFailed: 1})}}, nil, "ok"},
		{"NVLink errors rising", []step{{0, b200(nil)}, {time.Second, b200(map[reading.ID]uint64{reading.HNVLinkErrors: 5})}}, []string{"nvlink_errors"}, "warning"},
		{"recovered link", []step{{0, b200(nil)}, {time.Second, b200(map[reading.ID]uint64{reading.HNVLinkRecovery: 1})}}, []string{"nvlink_recovered"}, "warning"},
		{"HW power brake time grows", []step{{0, b200(nil)}, {time.Second, b200(map[reading.ID]uint64{reading.HClkHWPowerBrake: 5e8})}}, []string{"hw_slowdown"}, "warning"},
		{"recovery action reset", []step{{0, b200(map[reading.ID]uint64{reading.HRecoveryAction: 1})}}, []string{"recovery_action"}, "critical"},
		{"recovery action unknown to us", []step{{0, b200(map[reading.ID]uint64{reading.HRecoveryAction: 9})}}, []string{"recovery_action"}, "critical"},
		{"recovery action drain P2P", []step{{0, b200(map[reading.ID]uint64{reading.HRecoveryAction: 3})}}, []string{"recovery_drain_p2p"}, "warning"},
		{"SBE rate", []step{{0, b200(nil)}, {10 * time.Second, b200(map[reading.ID]uint64{reading.HSBEVolatile: 10})}}, []string{"ecc_sbe_rate"}, "warning"},
		{"SBE slow", []step{{0, b200(nil)}, {10 * time.Second, b200(map[reading.ID]uint64{reading.HSBEVolatile: 9})}}, nil, "ok"},
		{"C2C errors", []step{{0, map[reading.ID]uint64{reading.HC2CErrors: 0}}, {time.Second, map[reading.ID]uint64{reading.HC2CErrors: 2}}}, []string{"c2c_errors"}, "critical"},
		{"unrepairable memory", []step{{0, b200(nil)}, {time.Second, b200(map[reading.ID]uint64{reading.HMemoryUnrepairable: 1})}}, []string{"memory_unrepairable"}, "critical"},
		{"channel repair pending", []step{{0, b200(map[reading.ID]uint64{reading.HChannelRepairPending: 1})}}, []string{"repair_pending"}, "warning"},
		{"TPC repair pending", []step{{0, b200(map[reading.ID]uint64{reading.HTPCRepairPending: 1})}}, []string{"repair_pending"}, "warning"},
		{"SRAM threshold exceeded", []step{{0, b200(map[reading.ID]uint64{reading.HSRAMThreshold: 1})}}, []string{"sram_threshold"}, "warning"},
		{"absent is not zero: unrepairable flag absent", []step{{0, map[reading.ID]uint64{reading.HECCMode: 1}}}, nil, "ok"},
		{"absent is not zero: DBE turns absent", []step{{0, b200(map[reading.ID]uint64{reading.HDBEVolatile: 0})}, {time.Second, map[reading.ID]uint64{}}}, nil, "ok"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var w healthWatch
			var v HealthVerdict
			for _, st := range tc.steps {
				v = w.check(hs(st.vals), t0.Add(st.at))
			}
			if got := v.Names(); !slices.Equal(got, tc.want) || v.Level() != tc.level {
				t.Errorf("verdict %v (%s), want %v (%s)", got, v.Level(), tc.want, tc.level)
			}
		})
	}
}

func TestPCIeReplayLimit(t *testing.T) {
	for _, tc := range []struct {
		gen, width uint32
		want       uint64
	}{
		{5, 16, 31}, {4, 16, 16}, {3, 8, 5}, {6, 16, 62}, {1, 1, 1},
	} {
		if got, _ := PCIeReplayLimit(tc.gen, tc.width); got != tc.want {
			t.Errorf("Gen%d x%d: %d, want %d", tc.gen, tc.width, got, tc.want)
		}
	}
	if _, ok := PCIeReplayLimit(0, 16); ok {
		t.Errorf("unknown generation has a limit")
	}
}

func TestPCIeReplaysAboveDCGMRate(t *testing.T) {
	var w healthWatch
	s := func(replay uint64) *reading.Sample {
		x := mk()
		x.Values[reading.PCIeReplay], x.Values[reading.PCIeGen], x.Values[reading.PCIeWidth] = reading.Some(replay), reading.Some[uint64](5), reading.Some[uint64](16)
		return x
	}
	w.check(s(100), t0)
	if v := w.check(s(131), t0.Add(30*time.Second)); v.Has(ReasonPCIeReplays) {
		t.Errorf("31 replays in 30 s on Gen5 x16 flagged (the limit is 31 a minute)")
	}
	if v := w.check(s(132), t0.Add(40*time.Second)); !v.Has(ReasonPCIeReplays) {
		t.Errorf("32 replays within a minute not flagged")
	}
}

func TestTrackerHealthFlagsAndCounts(t *testing.T) {
	tr := NewTracker(0, DefaultConfig())
	r := tr.Observe(hs(b200(nil)), t0)
	if !r.HealthBaseline || r.NumHealthChanges() != 0 {
		t.Fatalf("first reading: baseline %v, changes %d", r.HealthBaseline, r.NumHealthChanges())
	}
	s := hs(b200(map[reading.ID]uint64{reading.HDBEVolatile: 1, reading.HRemapPending: 1}))
	r = tr.Observe(s, t0.Add(time.Second))
	if got := s.Flags.String(); got != "HEALTH_CRIT(ecc_dbe)|HEALTH_WARN(remap_pending)" {
		t.Errorf("flags %q", got)
	}
	if rs, ok := r.HealthCritical.Get(); !ok || rs != ReasonDBE {
		t.Errorf("critical %+v", r.HealthCritical)
	}
	if r.NumHealthChanges() != 2 {
		t.Errorf("changes %d, want 2", r.NumHealthChanges())
	}
	// still critical: no new flag, no new incident
	s = hs(b200(map[reading.ID]uint64{reading.HDBEVolatile: 1, reading.HRemapPending: 1}))
	r = tr.Observe(s, t0.Add(2*time.Second))
	if s.Flags.Len() != 0 || r.HealthCritical.OK || r.NumHealthChanges() != 0 {
		t.Errorf("repeated: flags %q critical %+v changes %d", s.Flags.String(), r.HealthCritical, r.NumHealthChanges())
	}
	c := tr.Counters().Total
	if c[countHealthCritical] != 1 || c[countHealthWarnings] != 1 {
		t.Errorf("counts %v", c)
	}
	if v := tr.Verdict(); v.Level() != "critical" {
		t.Errorf("verdict %v", v.Names())
	}
}

func TestHealthChangesCoalesceClockTime(t *testing.T) {
	var d healthChanges
	var out [reading.NumReadings]HealthChange
	d.check(hs(map[reading.ID]uint64{reading.HClkSWPowerCap: 0}), t0, &out)
	for i := 1; i < 60; i++ {
		if n, _ := d.check(hs(map[reading.ID]uint64{reading.HClkSWPowerCap: uint64(i) * 1e9}), t0.Add(time.Duration(i)*time.Second), &out); n != 0 {
			t.Fatalf("clock time reported after %d s", i)
		}
	}
	n, _ := d.check(hs(map[reading.ID]uint64{reading.HClkSWPowerCap: 60e9}), t0.Add(time.Minute), &out)
	if n != 1 || out[0] != (HealthChange{ID: reading.HClkSWPowerCap, From: 0, To: 60e9}) {
		t.Errorf("after a minute: %d %+v", n, out[0])
	}
	// a count is reported on every change
	d.check(hs(map[reading.ID]uint64{reading.HSBEVolatile: 1}), t0.Add(61*time.Second), &out)
	if n, _ := d.check(hs(map[reading.ID]uint64{reading.HSBEVolatile: 2}), t0.Add(62*time.Second), &out); n != 1 || out[0].From != 1 || out[0].To != 2 {
		t.Errorf("SBE change: %d %+v", n, out[0])
	}
}

func TestLinkWatch(t *testing.T) {
	var w LinkWatch
	links := func(at time.Duration, state uint32, rx uint64) *reading.NVLinks {
		l := &reading.NVLinks{At: t0.Add(at), N: 2}
		for i := range 2 {
			l.L[i].State = reading.Some[uint32](1)
			l.L[i].C[reading.LRxErrors] = reading.Some[uint64](0)
		}
		l.L[1].State = reading.Some(state)
		l.L[1].C[reading.LRxErrors] = reading.Some(rx)
		return l
	}
	if ch := w.Check(links(0, 1, 0), t0); len(ch) != 0 {
		t.Fatalf("baseline: %+v", ch)
	}
	cur := links(time.Second, 0, 4)
	ch := w.Check(cur, t0.Add(time.Second))
	want := []LinkChange{{Link: 1, Counter: "state", State: true, From: 1, To: 0}, {Link: 1, Counter: "rx_errors", From: 0, To: 4}}
	if !slices.Equal(ch, want) {
		t.Errorf("changes %+v, want %+v", ch, want)
	}
	if ch := w.Check(cur, t0.Add(2*time.Second)); ch != nil {
		t.Errorf("same reading again: %+v", ch)
	}
}

// TestReasonNamed: every reason is found by its name, and nothing else is.
func TestReasonNamed(t *testing.T) {
	for r := range NumHealthReasons {
		if got, ok := ReasonNamed(HealthReasonDefs[r].Name); !ok || got != r {
			t.Errorf("%s: %v %v, want %v", HealthReasonDefs[r].Name, got, ok, r)
		}
	}
	if _, ok := ReasonNamed("nope"); ok {
		t.Error("an unknown name is a reason")
	}
}

// The verdict's per-minute windows and its 10-minute hold run on the
// samples' monotonic clock (KernelTime), not their wall time: a wall clock
// stepped an hour back or forward between two samples (chrony's makestep,
// date -s) neither keeps a window open (a slow rate adding up to a burst)
// nor closes it early (a burst split in two and hidden), nor stretches or
// cuts the hold. Each run is compared, sample by sample, with the same
// counters on a wall clock that does not step; the fast rates must trip.
// The daemon was immune already: its s.Time comes from time.Now() and
// carries Go's monotonic reading, which Time.Sub uses. This matters for
// report's replay, whose rows' timestamps carry none, as t0 here does not.
func TestHealthWindowsOnTheMonotonicClock(t *testing.T) {
	const (
		every  = 10 * time.Second
		grows  = 3 * time.Minute  // the counter grows this long, then stops
		length = 15 * time.Minute // past the hold after the last growth
		boot   = 1000 * time.Second
	)
	for _, rate := range []struct {
		name string
		id   reading.ID
		step uint64 // growth per sample (every 10 s)
		want bool   // trips (the threshold: SBE 10 a minute, Gen5 x16 replays 31)
		r    HealthReason
	}{
		{"SBE 6 a minute", reading.HSBEVolatile, 1, false, ReasonSBERate},
		{"SBE 18 a minute", reading.HSBEVolatile, 3, true, ReasonSBERate},
		{"PCIe replays 12 a minute", reading.PCIeReplay, 2, false, ReasonPCIeReplays},
		{"PCIe replays 48 a minute", reading.PCIeReplay, 8, true, ReasonPCIeReplays},
	} {
		run := func(wallStep func(at time.Duration) time.Duration) []bool {
			tr := NewTracker(0, DefaultConfig())
			var held []bool
			for at := time.Duration(0); at <= length; at += every {
				s := hs(b200(map[reading.ID]uint64{reading.PCIeGen: 5, reading.PCIeWidth: 16}))
				s.Values[rate.id] = reading.Some(100 + rate.step*uint64(min(at, grows)/every))
				s.Time, s.KernelTime = t0.Add(at+wallStep(at)), boot+at
				held = append(held, tr.Observe(s, s.Time).Verdict.Has(rate.r)) // wall times without a Go monotonic reading, as a replayed row's
			}
			return held
		}
		want := run(func(time.Duration) time.Duration { return 0 })
		if slices.Contains(want, true) != rate.want {
			t.Fatalf("%s: tripped %v without a step, want %v", rate.name, slices.Contains(want, true), rate.want)
		}
		for _, st := range []struct {
			name string
			at   time.Duration // the wall clock steps between the sample before at and the one at at
			by   time.Duration
		}{
			{"back an hour mid-window", 35 * time.Second, -time.Hour},
			{"forward an hour mid-window", 35 * time.Second, time.Hour},
			{"back an hour in the hold", 5 * time.Minute, -time.Hour},
			{"forward an hour in the hold", 5 * time.Minute, time.Hour},
		} {
			got := run(func(at time.Duration) time.Duration {
				if at >= st.at {
					return st.by
				}
				return 0
			})
			if !slices.Equal(got, want) {
				t.Errorf("%s, wall clock stepped %s: %s held at samples %s, want %s", rate.name, st.name,
					HealthReasonDefs[rate.r].Name, heldAt(got), heldAt(want))
			}
		}
	}
}

// heldAt says at which samples the verdict held the reason: "4-77", "none".
func heldAt(held []bool) string {
	var out []string
	for i := 0; i < len(held); i++ {
		if !held[i] {
			continue
		}
		j := i
		for j+1 < len(held) && held[j+1] {
			j++
		}
		out = append(out, fmt.Sprintf("%d-%d", i, j))
		i = j
	}
	if out == nil {
		return "none"
	}
	return strings.Join(out, ",")
}
