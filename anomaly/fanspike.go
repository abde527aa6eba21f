package anomaly

import "github.com/gpu-telemetry/gpu-telemetry/reading"

// fanSpikeDef flags FAN_SPIKE: some fan's speed moved by at least the
// threshold, in percentage points, between two consecutive good samples. A
// sudden fan jump with no load change was the most common precursor of a GSP
// crash in the Python logger's logs. It writes no notice: a flagged spike
// asks for a spike snapshot instead.
var fanSpikeDef = Def{
	Name:          "fan_spike",
	Flags:         []reading.FlagDef{{Name: "fan_spike", Text: "FAN_SPIKE", Anomaly: true}},
	Counter:       CounterDef{Name: "spikes", Short: "spikes", Snapshot: "spikes", Help: "fan spikes (FAN_SPIKE)"},
	SpikeSnapshot: true,
	Knobs: []Knob{
		// The Python logger's DEFAULT_SPIKE_THRESHOLD and --spike-threshold.
		{Name: "SpikeThresholdPct", Flag: "spike-threshold", Default: 15, Int: true, Min: 1, Max: 100, Want: "between 1 and 100",
			Help: "Fan speed change in percentage points per sample that counts as a spike (1-100)."},
		// The Python logger's _total_samples > 2: fans settling after start
		// or after an outage are not spikes.
		{Name: "SpikeWarmup", Default: 2, Int: true, Min: 0, Max: noLimit, Want: ">= 0",
			Help: "Good samples seen before a spike can be flagged."},
	},
	New: func(k Knobs) Detector {
		return fanSpike{thresholdPct: uint32(k["SpikeThresholdPct"]), warmup: int(k["SpikeWarmup"])}
	},
}

func init() { register(&fanSpikeDef) }

// Spikes returns the fan spike count in c, for the spike snapshot's log line.
func (c Counts) Spikes() uint64 { return c[fanSpikeDef.counter] }

type fanSpike struct {
	thresholdPct uint32 // SpikeThresholdPct
	warmup       int    // SpikeWarmup
}

// Check flags a spike against the previous sample. Only fans whose speed is
// present in both samples are compared: an absent speed is not a stopped fan.
func (d fanSpike) Check(in Input) Finding {
	if in.Prev == nil || in.Seen <= d.warmup {
		return Finding{}
	}
	prev, cur := in.Prev, in.Cur
	n := min(prev.NumFans, cur.NumFans, reading.MaxFans)
	for i := 0; i < n; i++ {
		a, okA := prev.Fans[i].Speed.Get()
		b, okB := cur.Fans[i].Speed.Get()
		if !okA || !okB {
			continue
		}
		diff := b - a
		if a > b {
			diff = a - b
		}
		if diff >= d.thresholdPct {
			return Finding{Count: true, Flag: 1}
		}
	}
	return Finding{}
}
