package anomaly

import (
	"testing"

	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

func TestSpurThrottle(t *testing.T) {
	d := spurThrottle{fraction: 0.25, warmup: 10}
	capped := throttleAt(mask(reading.ThrottleSwPowerCap))
	tests := []warmCase{
		{"warm-up: 10 samples seen", 10, mk(capped, powerAt(watts(100)), limitAt(watts(1000))), ""},
		{"after warm-up: 11 samples seen", 11, mk(capped, powerAt(watts(100)), limitAt(watts(1000))), "SPUR_THROT(10%ofLim)"},
		{"just under 25 %", 11, mk(capped, powerAt(mw(249_999)), limitAt(watts(1000))), "SPUR_THROT(25%ofLim)"},
		{"at 25 %", 11, mk(capped, powerAt(watts(250)), limitAt(watts(1000))), ""},
		{"rounds the percentage", 11, mk(capped, powerAt(mw(124_999)), limitAt(watts(1000))), "SPUR_THROT(12%ofLim)"},
		{"other bits too", 11, mk(throttleAt(mask(reading.ThrottleSwPowerCap|reading.ThrottleGpuIdle)),
			powerAt(watts(100)), limitAt(watts(1000))), "SPUR_THROT(10%ofLim)"},
		{"SwPowerCap not set", 11, mk(throttleAt(mask(reading.ThrottleHwSlowdown)), powerAt(watts(100)), limitAt(watts(1000))), ""},
		{"zero power", 11, mk(capped, powerAt(mw(0)), limitAt(watts(1000))), ""},
		{"power absent", 11, mk(capped, powerAt(absent32), limitAt(watts(1000))), ""},
		{"limit absent", 11, mk(capped, powerAt(watts(100)), limitAt(absent32)), ""},
		{"limit zero", 11, mk(capped, powerAt(watts(100)), limitAt(mw(0))), ""},
		{"mask absent", 11, mk(throttleAt(absent64), powerAt(watts(100)), limitAt(watts(1000))), ""},
	}
	checkWarm(t, &spurThrottleDef, d, tests)
}
