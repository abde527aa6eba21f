package anomaly

import (
	"log/slog"

	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

// fanInversionDef flags TEMP_FAN_INV(<T>C@<F>%): the GPU is hot while its
// fastest fan stays slow, which means the fan controller (run by the GSP
// firmware) has stopped reacting to temperature.
var fanInversionDef = Def{
	Name:    "fan_inversion",
	Flags:   []reading.FlagDef{{Name: "temp_fan_inv", Text: "TEMP_FAN_INV({A}C@{B}%)", Anomaly: true}},
	Counter: CounterDef{Name: "fan_inversions", Short: "inv", Snapshot: "fan_inv", Help: "fan inversions (TEMP_FAN_INV)", Window: WindowRate},
	Notice: NoticeDef{Msg: "anomaly: GPU hot but fans slow", Level: slog.LevelWarn, Attrs: func(v [2]uint64) []slog.Attr {
		return []slog.Attr{slog.Int64("temp_c", int64(v[0])), slog.Int64("fan_pct", int64(v[1]))}
	}},
	Knobs: []Knob{
		// The Python logger's FAN_TEMP_INVERSION_TEMP. A GPU below 30 C is
		// idle, so a threshold there would flag every idle GPU; above 120 C
		// every GPU has long shut down (shutdown thresholds are around
		// 90-110 C).
		{Name: "InversionTempC", Default: 85, Int: true, Min: 30, Max: 120, Want: "between 30 and 120",
			Help: "Temperature, in C, at or above which slow fans are an inversion."},
		// The Python logger's FAN_TEMP_INVERSION_FAN. 100 % or more would
		// call every hot GPU's fans slow.
		{Name: "InversionFanPct", Default: 55, Int: true, Min: 0, Max: 99, Want: "between 0 and 99",
			Help: "Fastest fan's speed, in %, at or below which a hot GPU's fans count as slow."},
		warmupKnob,
	},
	New: func(k Knobs) Detector {
		return fanInversion{tempC: uint32(k["InversionTempC"]), fanPct: uint32(k["InversionFanPct"]), warmup: int(k["Warmup"])}
	},
}

func init() { register(&fanInversionDef) }

// warmupKnob is how many good samples must have been seen before a fan
// inversion or a spurious throttle can be flagged: the Python logger's
// _total_samples > 10, which let readings settle after start.
var warmupKnob = Knob{Name: "Warmup", Default: 10, Int: true, Min: 0, Max: noLimit, Want: ">= 0",
	Help: "Good samples seen before a fan inversion or a spurious throttle can be flagged."}

type fanInversion struct {
	tempC  uint32 // InversionTempC
	fanPct uint32 // InversionFanPct
	warmup int    // Warmup
}

// Check flags a hot GPU with slow fans. A GPU without fans (datacenter parts
// cooled by the chassis) never has an inversion, and neither does a sample
// whose temperature or every fan speed is absent.
func (d fanInversion) Check(in Input) Finding {
	cur := in.Cur
	if in.Seen <= d.warmup || cur.NumFans == 0 {
		return Finding{}
	}
	temp, ok := cur.U32(reading.TempC).Get()
	if !ok {
		return Finding{}
	}
	fan, ok := cur.MaxFanSpeed().Get()
	if !ok || temp < d.tempC || fan > d.fanPct {
		return Finding{}
	}
	return Finding{Count: true, Flag: 1, A: int64(temp), B: int64(fan), Notice: true, V: [2]uint64{uint64(temp), uint64(fan)}}
}
