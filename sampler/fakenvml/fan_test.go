package fakenvml

import (
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// TestFanSetters: the fake's fan calls answer as NVML's do (see
// test/simnvml's TestFanSetters), and each is counted.
func TestFanSetters(t *testing.T) {
	d := NewDev()
	if r := d.SetFanSpeed_v2(1, 78); r != nvml.SUCCESS {
		t.Fatalf("set: %v", r)
	}
	if v := d.FanSpeed[1]; v != 78 {
		t.Fatalf("commanded fan runs at %d, want 78", v)
	}
	if v := d.FanTarget[1]; v != 31 {
		t.Fatalf("firmware target %d, want 31", v)
	}
	if p, _ := d.GetFanControlPolicy_v2(1); p != nvml.FAN_POLICY_MANUAL {
		t.Fatalf("policy %d, want manual", p)
	}
	for _, c := range []struct {
		name       string
		fan, speed int
		want       nvml.Return
	}{
		{"fan past count", 2, 50, nvml.ERROR_INVALID_ARGUMENT},
		{"under min", 0, 29, nvml.ERROR_INVALID_ARGUMENT},
		{"over max", 0, 101, nvml.ERROR_INVALID_ARGUMENT},
	} {
		if r := d.SetFanSpeed_v2(c.fan, c.speed); r != c.want {
			t.Errorf("%s: %v, want %v", c.name, r, c.want)
		}
	}
	if r := d.SetDefaultFanSpeed_v2(1); r != nvml.SUCCESS || d.FanCmd[1] != -1 || d.FanSpeed[1] != 31 {
		t.Fatalf("default: %v, cmd %d speed %d", r, d.FanCmd[1], d.FanSpeed[1])
	}
	if mn, mx, r := d.GetMinMaxFanSpeed(); mn != 30 || mx != 100 || r != nvml.SUCCESS {
		t.Fatalf("min/max %d %d %v", mn, mx, r)
	}
	if d.Count("SetFanSpeed_v2") != 4 || d.Count("SetDefaultFanSpeed_v2") != 1 {
		t.Fatalf("counts %v", d.Calls())
	}

	d.Set("SetFanSpeed_v2", nvml.ERROR_NO_PERMISSION)
	if r := d.SetFanSpeed_v2(0, 80); r != nvml.ERROR_NO_PERMISSION || d.FanSpeed[0] != 30 {
		t.Fatalf("refused set: %v, speed %d", r, d.FanSpeed[0])
	}
	fanless := NewDev()
	fanless.Fans = 0
	if r := fanless.SetFanSpeed_v2(0, 80); r != nvml.ERROR_NOT_SUPPORTED {
		t.Fatalf("fanless: %v", r)
	}
	if _, _, r := fanless.GetMinMaxFanSpeed(); r != nvml.ERROR_NOT_SUPPORTED {
		t.Fatalf("fanless min/max: %v", r)
	}
}
