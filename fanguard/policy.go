package fanguard

import (
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

// Input is what Policy.Step needs of one answered sample.
type Input struct {
	Now       time.Duration // a monotonic reading: the wall clock can step
	TempC     reading.Opt[uint32]
	Inversion bool // the fan inversion detector flagged this sample
	Fans      int  // fans of the GPU (at most reading.MaxFans)
	// Targets are the speeds the firmware's controller asks for, per fan
	// (absent: not read).
	Targets [reading.MaxFans]reading.Opt[uint32]
	// Speeds are the fans' measured speeds (absent: not read): the floor
	// where the target is absent.
	Speeds [reading.MaxFans]reading.Opt[uint32]
}

// Limits are the speeds a GPU's fans accept (nvmlDeviceGetMinMaxFanSpeed).
type Limits struct{ Min, Max int }

// Decision is what one Step decided: take the fans, change some, or hand
// them back; the zero Decision changes nothing.
type Decision struct {
	Engage, Release bool
	Set             uint32 // bit i: fan i's speed changes to Speed[i]
	// NoFloor, at a take-over: bit i, neither fan i's target nor its speed
	// was read, so its floor is the curve's top (the caller logs it).
	NoFloor uint32
}

// Policy is one GPU's fan decisions: a pure state machine over samples,
// with time arriving in the input. It holds the fans from the sample that
// reaches EngageC (or shows an inversion) until the die has stayed below
// ReleaseC for ReleaseAfter; meanwhile each fan follows the curve, never
// below the firmware's target when the guard took over nor below the
// GPU's minimum, never above 100 % or the GPU's maximum, changed at most
// once per MinChange, and slowed only past the hysteresis.
type Policy struct {
	cfg     Config
	lim     Limits
	holding bool
	fans    int
	Speed   [reading.MaxFans]int                 // the speed commanded (while holding)
	Floor   [reading.MaxFans]int                 // max(firmware target at takeover, GPU minimum); see floor
	Target0 [reading.MaxFans]reading.Opt[uint32] // the firmware's target when the guard took over
	changed [reading.MaxFans]time.Duration       // when each fan last changed
	touched [reading.MaxFans]bool                // changed at least once
	below   time.Duration                        // since when the die has been below ReleaseC
	isBelow bool
}

// NewPolicy returns a policy that holds nothing, for fans that accept lim.
func NewPolicy(cfg Config, lim Limits) *Policy {
	return &Policy{cfg: cfg, lim: lim}
}

// Holding reports whether the policy holds the fans, and how many.
func (p *Policy) Holding() (bool, int) { return p.holding, p.fans }

// max is the highest speed the policy commands.
func (p *Policy) max() int {
	if p.lim.Max > 0 && p.lim.Max < 100 {
		return p.lim.Max
	}
	return 100
}

// may reports whether fan i may change at now.
func (p *Policy) may(i int, now time.Duration) bool {
	return !p.touched[i] || now-p.changed[i] >= p.cfg.MinChange
}

// set commands speed v on fan i at now.
func (p *Policy) set(d *Decision, i, v int, now time.Duration) {
	p.Speed[i], p.changed[i], p.touched[i] = v, now, true
	d.Set |= 1 << i
}

// want is the speed fan i should run at for temp, within its bounds.
func (p *Policy) want(i, curve int) int {
	return min(max(curve, p.Floor[i], 0), p.max())
}

// floor is fan i's floor at a take-over: the firmware's target; absent
// (not zero: absent is not a stopped fan), the speed measured; both absent,
// the curve's top (ok false), since nothing says how fast the firmware
// wanted the fan and the safe direction is up.
func (p *Policy) floor(in Input, i int) (int, bool) {
	if v, ok := in.Targets[i].Get(); ok {
		return int(v), true
	}
	if v, ok := in.Speeds[i].Get(); ok {
		return int(v), true
	}
	return p.cfg.Curve.At(1 << 10), false
}

// Step takes one answered sample and decides.
func (p *Policy) Step(in Input) Decision {
	var d Decision
	temp, tok := in.TempC.Get()
	t := int(temp)
	if !p.holding {
		n := min(in.Fans, reading.MaxFans)
		if n <= 0 || !(tok && t >= p.cfg.EngageC || in.Inversion) {
			return d
		}
		for i := range n {
			if !p.may(i, in.Now) {
				return d // a fan changed less than MinChange ago (a release): next sample
			}
		}
		p.holding, p.fans, p.isBelow, d.Engage = true, n, false, true
		curve := p.cfg.Curve.At(t)
		if !tok { // an inversion always has a temperature; without one, the safe end
			curve = 100
		}
		for i := range n {
			p.Target0[i] = in.Targets[i]
			fw, ok := p.floor(in, i)
			if !ok {
				d.NoFloor |= 1 << i
			}
			p.Floor[i] = max(fw, p.lim.Min)
			p.set(&d, i, p.want(i, curve), in.Now)
		}
		return d
	}
	if !tok {
		p.isBelow = false // nothing known: keep holding as is
		return d
	}
	if t < p.cfg.ReleaseC {
		if !p.isBelow {
			p.below, p.isBelow = in.Now, true
		}
		if in.Now-p.below >= p.cfg.ReleaseAfter {
			p.holding, p.isBelow, d.Release = false, false, true
			for i := range p.fans {
				p.changed[i], p.touched[i] = in.Now, true
			}
			return d
		}
	} else {
		p.isBelow = false
	}
	up, down := p.cfg.Curve.At(t), p.cfg.Curve.At(t+p.cfg.HysteresisC)
	for i := range p.fans {
		v := p.Speed[i]
		switch {
		case p.want(i, up) > v:
			v = p.want(i, up)
		case p.want(i, down) < v:
			v = p.want(i, down)
		}
		if v != p.Speed[i] && p.may(i, in.Now) {
			p.set(&d, i, v, in.Now)
		}
	}
	return d
}
