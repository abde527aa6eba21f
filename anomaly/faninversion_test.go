package anomaly

import "testing"

func TestFanInversion(t *testing.T) {
	d := fanInversion{tempC: 85, fanPct: 55, warmup: 10}
	tests := []warmCase{
		{"warm-up: 10 samples seen", 10, mk(tempAt(pct(90)), fansAt(pct(30))), ""},
		{"after warm-up: 11 samples seen", 11, mk(tempAt(pct(90)), fansAt(pct(30))), "TEMP_FAN_INV(90C@30%)"},
		{"at both boundaries", 11, mk(tempAt(pct(85)), fansAt(pct(55))), "TEMP_FAN_INV(85C@55%)"},
		{"1 C below", 11, mk(tempAt(pct(84)), fansAt(pct(55))), ""},
		{"fan 1 % above", 11, mk(tempAt(pct(85)), fansAt(pct(56))), ""},
		{"fastest fan decides", 11, mk(tempAt(pct(90)), fansAt(pct(30), pct(60))), ""},
		{"stopped fans", 11, mk(tempAt(pct(90)), fansAt(pct(0), pct(0))), "TEMP_FAN_INV(90C@0%)"},
		{"fanless GPU at 95 C", 11, mk(tempAt(pct(95)), fansAt()), ""},
		{"no fan speed read", 11, mk(tempAt(pct(95)), fansAt(absent32, absent32)), ""},
		{"one fan speed read", 11, mk(tempAt(pct(95)), fansAt(absent32, pct(40))), "TEMP_FAN_INV(95C@40%)"},
		{"temperature absent", 11, mk(tempAt(absent32), fansAt(pct(30))), ""},
	}
	checkWarm(t, &fanInversionDef, d, tests)
}
