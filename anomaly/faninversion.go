package anomaly

import "github.com/gpu-telemetry/gpu-telemetry/reading"

// fanInversion flags TEMP_FAN_INV(<T>C@<F>%): the GPU is hot while its fastest
// fan stays slow, which means the fan controller (run by the GSP firmware) has
// stopped reacting to temperature.
type fanInversion struct {
	tempC  uint32 // Config.InversionTempC
	fanPct uint32 // Config.InversionFanPct
	warmup int    // Config.Warmup
}

// check returns the flag for cur and whether it applies. seen is how many good
// samples came before cur since start or the last outage. A GPU without fans
// (datacenter parts cooled by the chassis) never has an inversion, and neither
// does a sample whose temperature or every fan speed is absent.
func (d fanInversion) check(seen int, cur *reading.Sample) (reading.Flag, bool) {
	if seen <= d.warmup || cur.NumFans == 0 {
		return reading.Flag{}, false
	}
	temp, ok := cur.TempC.Get()
	if !ok {
		return reading.Flag{}, false
	}
	fan, ok := cur.MaxFanSpeed().Get()
	if !ok {
		return reading.Flag{}, false
	}
	if temp < d.tempC || fan > d.fanPct {
		return reading.Flag{}, false
	}
	return reading.Flag{Kind: reading.FlagTempFanInv, A: int64(temp), B: int64(fan)}, true
}
