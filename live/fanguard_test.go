package live_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/gpu-telemetry/gpu-telemetry/live"
	"github.com/gpu-telemetry/gpu-telemetry/live/livetest"
)

// The fan guard's state reaches the status document and the status
// screen; without --fan-guard (nil) neither says anything of it.
func TestFanGuardInTheStatus(t *testing.T) {
	v := livetest.View()
	sp, fw, temp := 78, uint32(53), uint32(73)
	v.GPUs[0].FanGuard = &live.FanGuard{State: "holding", Why: "temperature", Fans: []int{0, 1}, SpeedPct: &sp, FirmwarePct: &fw, TempC: &temp,
		Text: "holding fans 0,1 at 78 % (firmware wanted 53 %), 73 °C"}
	doc := live.NewDoc(v)
	lines := strings.Join(live.GPULines(doc.GPUs[0], v.Host.Now), "\n")
	if !strings.Contains(lines, "  fan guard: holding fans 0,1 at 78 % (firmware wanted 53 %), 73 °C") {
		t.Errorf("status lines:\n%s", lines)
	}
	if other := strings.Join(live.GPULines(doc.GPUs[1], v.Host.Now), "\n"); strings.Contains(other, "fan guard") {
		t.Errorf("a GPU without the guard mentions it:\n%s", other)
	}
	b, err := json.Marshal(doc.GPUs[0])
	if err != nil {
		t.Fatal(err)
	}
	var back struct {
		FanGuard *live.FanGuard `json:"fan_guard"`
	}
	if err := json.Unmarshal(b, &back); err != nil || back.FanGuard == nil || *back.FanGuard.SpeedPct != 78 || !slices.Equal(back.FanGuard.Fans, []int{0, 1}) {
		t.Errorf("fan_guard in the document: %+v, %v\n%s", back.FanGuard, err, b)
	}
	if b, _ := json.Marshal(doc.GPUs[1]); strings.Contains(string(b), "fan_guard") {
		t.Errorf("the document has fan_guard without the guard")
	}
}
