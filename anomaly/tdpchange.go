package anomaly

import "github.com/gpu-telemetry/gpu-telemetry/reading"

// TDPChange is a change of the power management limit, for the caller to write
// to events.log (type=TDP_CHANGE from=..W to=..W delta=..W).
type TDPChange struct {
	FromMW uint32 // the last present limit before the change
	ToMW   uint32 // the new limit
}

// FromW returns the old limit in watts, rounded.
func (c TDPChange) FromW() int64 { return roundW(c.FromMW) }

// ToW returns the new limit in watts, rounded.
func (c TDPChange) ToW() int64 { return roundW(c.ToMW) }

// DeltaW returns the change in watts, rounded; negative when the limit went down.
func (c TDPChange) DeltaW() int64 { return roundDeltaW(int64(c.ToMW) - int64(c.FromMW)) }

// tdpChange finds changes of the power limit such as those made by
// nvidia-smi -pl or a dynamic-TDP fan controller, flagged TDP_REDUCED(<W>W) or
// TDP_RESTORED(<W>W) with the new limit.
type tdpChange struct {
	epsilonMW uint32 // Config.TDPEpsilonW in mW
}

// check compares cur's power limit with last, the last present limit since
// start or the last outage. It reports a change when both are present and
// non-zero and differ by at least the epsilon, and returns the flag too. A
// zero limit is treated as absent: no GPU runs with one.
func (d tdpChange) check(last reading.Opt[uint32], cur *reading.Sample) (TDPChange, reading.Flag, bool) {
	from, okF := last.Get()
	to, okT := cur.PowerLimitMW.Get()
	if !okF || !okT || from == 0 || to == 0 {
		return TDPChange{}, reading.Flag{}, false
	}
	diff := to - from
	kind := reading.FlagTDPRestored
	if from > to {
		diff = from - to
		kind = reading.FlagTDPReduced
	}
	if diff < d.epsilonMW {
		return TDPChange{}, reading.Flag{}, false
	}
	c := TDPChange{FromMW: from, ToMW: to}
	return c, reading.Flag{Kind: kind, A: c.ToW()}, true
}
