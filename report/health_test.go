package report

import (
	"testing"

	"github.com/gpu-telemetry/gpu-telemetry/sink"
)

// Health counter changes read as what changed in the timeline.
func TestHealthEventsInTimeline(t *testing.T) {
	for _, tc := range []struct{ line, want string }{
		{"type=HEALTH counter=ecc_sbe_volatile from=3 to=5 delta=+2", "health ecc_sbe_volatile 3 -> 5 (+2)"},
		{"type=HEALTH counter=nvlink_state link=3 from=active to=inactive", "health nvlink_state link 3 active -> inactive"},
		{"type=HEALTH counter=recovery_action from=0 to=1 action=gpu_reset", "health recovery_action 0 -> 1 gpu_reset"},
		{`type=HEALTH_CRITICAL reason=ecc_dbe detail="double-bit ECC errors since the driver loaded"`, "health CRITICAL ecc_dbe: double-bit ECC errors since the driver loaded"},
		{`type=HEALTH_WARNING reason=remap_pending detail="a row remap waits for a GPU reset"`, "health warning remap_pending: a row remap waits for a GPU reset"},
	} {
		l, ok := sink.ParseEventLine("2026-11-30T19:08:17.623Z gpu=0 " + tc.line)
		if !ok {
			t.Fatalf("%q did not parse", tc.line)
		}
		e := Event{Time: l.Time, Type: l.Type(), KV: l.KV}
		if got := e.describe(); got != tc.want {
			t.Errorf("%q: %q, want %q", tc.line, got, tc.want)
		}
	}
	e := Event{Type: sink.TypeHealthCritical, KV: map[string]string{"type": sink.TypeHealthCritical}}
	if !e.critical() {
		t.Errorf("HEALTH_CRITICAL is not an incident")
	}
}
