package reading

import (
	"slices"
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
		{Name: "0x200 is BoardLimit, not gpu-telemetry-deep.py's UserDefinedClocks", In: 0x200, Want: "BoardLimit"},
		{Name: "unknown bits alone", In: 0x1000, Want: "Unknown(0x1000)"},
		{Name: "known and unknown", In: 0x4 | 0xf000, Want: "SwPowerCap|Unknown(0xf000)"},
	})
}

// Kinds registered as a detector's are (package anomaly declares the real ones).
var (
	testKinds = RegisterFlagKinds([]FlagDef{
		{Name: "test_spike", Text: "FAN_SPIKE", Anomaly: true},
		{Name: "test_inv", Text: "TEMP_FAN_INV({A}C@{B}%)", Anomaly: true},
		{Name: "test_brace", Text: "{X}{A({A})"},
	})
	testSpike, testInv, testBrace = testKinds[0], testKinds[1], testKinds[2]
)

// TestFlagKinds: registered kinds come first in FlagKinds, then reading's
// own; names find their kinds.
func TestFlagKinds(t *testing.T) {
	got := FlagKinds()
	want := []FlagKind{testSpike, testInv, testBrace, FlagXid, FlagNVMLHung, FlagNVMLFailed, FlagGPULost, FlagHealthWarn, FlagHealthCrit, FlagFanGuard}
	if !slices.Equal(got, want) {
		t.Errorf("FlagKinds() = %v, want %v", got, want)
	}
	if k, ok := FlagKindNamed("test_inv"); !ok || k != testInv || !k.Def().Anomaly {
		t.Errorf("FlagKindNamed(test_inv) = %v, %v", k, ok)
	}
	if _, ok := FlagKindNamed("nope"); ok {
		t.Error("FlagKindNamed(nope) found a kind")
	}
}

func TestFlagText(t *testing.T) {
	cases := []struct {
		name string
		f    Flag
		want string
	}{
		{"registered, no arguments", Flag{Kind: testSpike}, "FAN_SPIKE"},
		{"registered, two arguments", Flag{Kind: testInv, A: 87, B: -30}, "TEMP_FAN_INV(87C@-30%)"},
		{"registered, brace not a placeholder", Flag{Kind: testBrace, A: 1}, "{X}{A(1)"},
		{"unknown kind", Flag{Kind: NumFlagKinds - 1}, "FLAG(23)"},
		{"xid", Flag{Kind: FlagXid, A: 79}, "XID(79)"},
		{"hung", Flag{Kind: FlagNVMLHung, S: "nvmlDeviceGetPowerUsage", A: 2300}, "NVML_HUNG(nvmlDeviceGetPowerUsage,2300ms)"},
		{"failed", Flag{Kind: FlagNVMLFailed, S: "Unknown Error"}, "NVML_FAILED:Unknown Error"},
		{"lost", Flag{Kind: FlagGPULost}, "GPU_LOST"},
		{"health warning", Flag{Kind: FlagHealthWarn, S: "row_remap_pending"}, "HEALTH_WARN(row_remap_pending)"},
		{"health critical", Flag{Kind: FlagHealthCrit, S: "gpu_lost"}, "HEALTH_CRIT(gpu_lost)"},
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
