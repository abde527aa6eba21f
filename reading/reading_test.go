package reading

import (
	"testing"

	"github.com/gpu-telemetry/gpu-telemetry/internal/testutil"
)

func TestThrottleNames(t *testing.T) {
	testutil.Check(t, "ThrottleNames", ThrottleNames, []testutil.Case[uint64, string]{
		{Name: "none", In: 0, Want: "None"},
		{Name: "idle", In: 0x1, Want: "GpuIdle"},
		{Name: "sw power cap", In: 0x4, Want: "SwPowerCap"},
		{Name: "hw slowdown, thermal and power brake", In: 0x8 | 0x40 | 0x80, Want: "HwSlowdown|HwThermalSlowdown|HwPowerBrakeSlowdown"},
		{Name: "every named bit", In: 0x7ff, Want: "GpuIdle|AppClocks|SwPowerCap|HwSlowdown|SyncBoost|SwThermalSlowdown|HwThermalSlowdown|HwPowerBrakeSlowdown|DisplayClocks|BoardLimit|Reliability"},
		{Name: "0x200 is BoardLimit, not the seed's UserDefinedClocks", In: 0x200, Want: "BoardLimit"},
		{Name: "unknown bits alone", In: 0x1000, Want: "Unknown(0x1000)"},
		{Name: "known and unknown", In: 0x4 | 0xf000, Want: "SwPowerCap|Unknown(0xf000)"},
	})
}

func TestFlagText(t *testing.T) {
	cases := []struct {
		name string
		f    Flag
		want string
	}{
		{"spike", Flag{Kind: FlagFanSpike}, "FAN_SPIKE"},
		{"inversion", Flag{Kind: FlagTempFanInv, A: 87, B: 30}, "TEMP_FAN_INV(87C@30%)"},
		{"spurious", Flag{Kind: FlagSpurThrot, A: 12}, "SPUR_THROT(12%ofLim)"},
		{"power", Flag{Kind: FlagPowerOver, A: 62}, "PWR+62W"},
		{"tdp reduced", Flag{Kind: FlagTDPReduced, A: 450}, "TDP_REDUCED(450W)"},
		{"tdp restored", Flag{Kind: FlagTDPRestored, A: 600}, "TDP_RESTORED(600W)"},
		{"xid", Flag{Kind: FlagXid, A: 79}, "XID(79)"},
		{"hung", Flag{Kind: FlagNVMLHung, S: "nvmlDeviceGetPowerUsage", A: 2300}, "NVML_HUNG(nvmlDeviceGetPowerUsage,2300ms)"},
		{"failed", Flag{Kind: FlagNVMLFailed, S: "Unknown Error"}, "NVML_FAILED:Unknown Error"},
		{"lost", Flag{Kind: FlagGPULost}, "GPU_LOST"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := string(c.f.AppendText(nil)); got != c.want {
				t.Errorf("got %q, want %q", got, c.want)
			}
		})
	}
}

func TestFlagsCapacity(t *testing.T) {
	var fs Flags
	for i := range MaxFlags + 3 {
		fs.Add(Flag{Kind: FlagXid, A: int64(i)})
	}
	if fs.Len() != MaxFlags || fs.Dropped != 3 {
		t.Errorf("len %d dropped %d", fs.Len(), fs.Dropped)
	}
	if !fs.Has(FlagXid) || fs.Has(FlagGPULost) {
		t.Errorf("Has wrong")
	}
	fs.Reset()
	if fs.Len() != 0 || fs.String() != "" {
		t.Errorf("reset left %q", fs.String())
	}
}

func TestMaxFanSpeed(t *testing.T) {
	var s Sample
	if s.MaxFanSpeed().OK {
		t.Errorf("no fans: want absent")
	}
	s.NumFans = 3
	s.Fans[0].Speed = Some[uint32](30)
	s.Fans[2].Speed = Some[uint32](55)
	if v, ok := s.MaxFanSpeed().Get(); !ok || v != 55 {
		t.Errorf("max = %d %v, want 55", v, ok)
	}
	s.Fans[0].Speed, s.Fans[2].Speed = Opt[uint32]{}, Opt[uint32]{}
	if s.MaxFanSpeed().OK {
		t.Errorf("fans present but unread: want absent, never 0")
	}
}
