package fanguard

import (
	"testing"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

// in is one sample for Policy.Step: at ms milliseconds, temp C (<0:
// absent), two fans whose firmware targets are fw.
func in(ms int, temp int, inversion bool, fw ...uint32) Input {
	i := Input{Now: time.Duration(ms) * time.Millisecond, Inversion: inversion, Fans: 2}
	if temp >= 0 {
		i.TempC = reading.Some(uint32(temp))
	}
	for f, v := range fw {
		i.Targets[f] = reading.Some(v)
	}
	return i
}

func speeds(p *Policy) [2]int { return [2]int{p.Speed[0], p.Speed[1]} }

func TestPolicyEngages(t *testing.T) {
	for _, tc := range []struct {
		name      string
		temp      int
		inversion bool
		fw        []uint32
		lim       Limits
		engage    bool
		want      [2]int
	}{
		{"below the engage temperature", 69, false, []uint32{30, 30}, Limits{}, false, [2]int{}},
		{"at the engage temperature: the curve", 70, false, []uint32{30, 30}, Limits{}, true, [2]int{64, 64}},
		{"inversion below it", 60, true, []uint32{30, 30}, Limits{}, true, [2]int{40, 40}},
		{"never below the firmware's target", 70, false, []uint32{80, 53}, Limits{}, true, [2]int{80, 64}},
		{"never below the GPU's minimum", 70, false, []uint32{30, 30}, Limits{Min: 70, Max: 100}, true, [2]int{70, 70}},
		{"never above the GPU's maximum", 90, false, nil, Limits{Min: 30, Max: 90}, true, [2]int{90, 90}},
		{"never above 100", 120, false, nil, Limits{}, true, [2]int{100, 100}},
		{"target and speed absent: the curve's top, not 0", 73, false, nil, Limits{}, true, [2]int{100, 100}},
		{"temperature absent: nothing", -1, false, []uint32{30, 30}, Limits{}, false, [2]int{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := NewPolicy(DefaultConfig(), tc.lim)
			d := p.Step(in(0, tc.temp, tc.inversion, tc.fw...))
			if d.Engage != tc.engage || speeds(p) != tc.want {
				t.Fatalf("Step = %+v, speeds %v; want engage %v, speeds %v", d, speeds(p), tc.engage, tc.want)
			}
			if tc.engage && d.Set != 3 {
				t.Errorf("Set = %b, want both fans", d.Set)
			}
		})
	}
}

// An absent target is not a target of 0: the floor is the speed measured,
// and with neither the curve's top, reported in NoFloor.
func TestPolicyFloorWhenTheTargetIsAbsent(t *testing.T) {
	p := NewPolicy(DefaultConfig(), Limits{Min: 30})
	i := in(0, 70, false)
	i.Targets[1] = reading.Some(uint32(50))
	i.Speeds[0] = reading.Some(uint32(80))
	d := p.Step(i)
	if speeds(p) != [2]int{80, 64} || d.NoFloor != 0 {
		t.Fatalf("speeds %v, NoFloor %b; want [80 64] (fan 0 floored at its measured 80 %%), 0", speeds(p), d.NoFloor)
	}
	p = NewPolicy(DefaultConfig(), Limits{Min: 30})
	i = in(0, 70, false)
	i.Targets[1] = reading.Some(uint32(50))
	d = p.Step(i)
	if speeds(p) != [2]int{100, 64} || d.NoFloor != 1 {
		t.Fatalf("speeds %v, NoFloor %b; want [100 64], 1", speeds(p), d.NoFloor)
	}
}

func TestPolicyFanless(t *testing.T) {
	p := NewPolicy(DefaultConfig(), Limits{})
	i := in(0, 95, true)
	i.Fans = 0
	if d := p.Step(i); d != (Decision{}) {
		t.Fatalf("fanless GPU: %+v", d)
	}
}

// While holding: up at once with the curve, down only past the hysteresis,
// each fan at most once a second, never below the floor.
func TestPolicyFollowsTheCurve(t *testing.T) {
	p := NewPolicy(DefaultConfig(), Limits{Min: 30, Max: 100})
	steps := []struct {
		name string
		ms   int
		temp int
		set  bool
		want int
	}{
		{"engage at 70", 0, 70, true, 64},
		{"hotter within the second: held back", 500, 75, false, 64},
		{"a second later: up to the curve", 1000, 75, true, 76},
		{"one degree cooler: within the hysteresis", 2000, 74, false, 76},
		{"back up a degree: no change", 3000, 75, false, 76},
		{"two degrees cooler: still within (At(73+2)=76)", 4000, 73, false, 76},
		{"three degrees cooler: down to At(72+2)", 5000, 72, true, 74},
		{"wavering 72-73: no hunting", 6000, 73, false, 74},
		{"", 7000, 72, false, 74},
		{"", 8000, 73, false, 74},
		{"cooler: down, to the floor at most", 9000, 66, true, 64},
		{"temperature absent: held", 10000, -1, false, 64},
	}
	for _, s := range steps {
		d := p.Step(in(s.ms, s.temp, false, 64, 50))
		got := speeds(p)
		if (d.Set != 0) != s.set || got[0] != s.want {
			t.Fatalf("%s (t=%dms %dC): set %b, speeds %v; want set %v, fan 0 at %d", s.name, s.ms, s.temp, d.Set, got, s.set, s.want)
		}
	}
	// Fan 1's firmware target was 50: its floor is 50, fan 0's 64.
	for ms := 11000; ms < 20000; ms += 1000 {
		p.Step(in(ms, 61, false))
	}
	if got := speeds(p); got != [2]int{64, 50} {
		t.Errorf("cooled to 61 C: speeds %v, want [64 50] (each fan's floor: the firmware's target at takeover)", got)
	}
}

// Hands back once the die has stayed below the release temperature for
// ReleaseAfter; a sample at or above it starts the wait again.
func TestPolicyReleases(t *testing.T) {
	p := NewPolicy(DefaultConfig(), Limits{})
	p.Step(in(0, 80, false))
	sec := func(s int) int { return s * 1000 }
	for _, s := range []struct {
		at, temp int
		release  bool
	}{
		{sec(10), 64, false},
		{sec(69), 64, false}, // 59 s below
		{sec(70), 65, false}, // not below: the wait starts again
		{sec(71), 60, false},
		{sec(130), 60, false}, // 59 s
		{sec(131), 60, true},  // 60 s
	} {
		d := p.Step(in(s.at, s.temp, false))
		if d.Release != s.release {
			t.Fatalf("t=%ds %dC: release %v, want %v", s.at/1000, s.temp, d.Release, s.release)
		}
	}
	if h, _ := p.Holding(); h {
		t.Fatal("still holding after the release")
	}
	// Not taken again within a second of the hand-back, then taken.
	if d := p.Step(in(sec(131)+500, 90, false)); d.Engage {
		t.Error("taken again 0.5 s after the hand-back")
	}
	if d := p.Step(in(sec(132), 90, false)); !d.Engage {
		t.Error("not taken again 1 s after the hand-back at 90 C")
	}
}
