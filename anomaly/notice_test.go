package anomaly

import (
	"log/slog"
	"strconv"
	"testing"

	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

func TestNoticeLogAttrs(t *testing.T) {
	tests := []struct {
		name      string
		n         Notice
		wantMsg   string
		wantAttrs string
		wantLevel slog.Level
		wantKind  string
	}{
		{"throttle change", Notice{Kind: NoticeThrottleChange, GPU: 3, V: [2]uint64{0, reading.ThrottleSwPowerCap | reading.ThrottleGpuIdle}},
			"throttle reasons changed", "gpu=3 from=None to=GpuIdle|SwPowerCap from_mask=0x0000 to_mask=0x0005", slog.LevelInfo, "throttle_change"},
		{"TDP change", Notice{Kind: NoticeTDPChange, GPU: 1, V: [2]uint64{600_000, 450_000}},
			"power limit changed", "gpu=1 from_w=600 to_w=450 delta_w=-150", slog.LevelInfo, "tdp_change"},
		{"fan inversion with suppressed", Notice{Kind: NoticeFanInversion, GPU: 0, V: [2]uint64{88, 40}, Suppressed: 599},
			"anomaly: GPU hot but fans slow", "gpu=0 temp_c=88 fan_pct=40 suppressed=599", slog.LevelWarn, "fan_inversion"},
		{"spurious throttle", Notice{Kind: NoticeSpuriousThrottle, GPU: 7, V: [2]uint64{100_400, 600_000}},
			"anomaly: SwPowerCap throttle at low power", "gpu=7 power_w=100 limit_w=600 pct_of_limit=17", slog.LevelWarn, "spurious_throttle"},
		{"power over", Notice{Kind: NoticePowerOver, GPU: 2, V: [2]uint64{660_600, 600_000}},
			"anomaly: power above limit", "gpu=2 power_w=661 limit_w=600 over_w=61", slog.LevelWarn, "power_over"},
		{"zero kind", Notice{GPU: 1}, "anomaly: unknown notice", "gpu=1 kind=0", slog.LevelWarn, "unknown"},
		{"kind out of range", Notice{Kind: NoticeKind(len(Detectors) + 1), GPU: 1, Suppressed: 2},
			"anomaly: unknown notice", "gpu=1 kind=" + strconv.Itoa(len(Detectors)+1) + " suppressed=2", slog.LevelWarn, "unknown"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msg, attrs := tt.n.LogAttrs()
			got := ""
			for i, a := range attrs {
				if i > 0 {
					got += " "
				}
				got += a.String()
			}
			if msg != tt.wantMsg || got != tt.wantAttrs {
				t.Errorf("LogAttrs = %q, %q; want %q, %q", msg, got, tt.wantMsg, tt.wantAttrs)
			}
			if l := tt.n.Level(); l != tt.wantLevel {
				t.Errorf("Level = %v, want %v", l, tt.wantLevel)
			}
			if k := tt.n.Kind.String(); k != tt.wantKind {
				t.Errorf("Kind.String = %q, want %q", k, tt.wantKind)
			}
		})
	}
}
