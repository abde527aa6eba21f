package report

import (
	"testing"

	"github.com/gpu-telemetry/gpu-telemetry/sink"
)

// GPU operational events read as what the driver said in the timeline; a
// fatal or uncontained one is an incident.
func TestOperationalEventsInTimeline(t *testing.T) {
	for _, tc := range []struct {
		line, want string
		critical   bool
	}{
		{"source=nvml-op type=OP_EVENT severity=corrected category=3 attributes=latent module=GSP module_event_code=17",
			"GPU operational event corrected (category 3, GSP code 17, attributes latent)", false},
		{"source=nvml-op type=OP_EVENT severity=fatal category=5 attributes=none module=FBHUB module_event_code=300 critical=fatal",
			"GPU operational event fatal (category 5, FBHUB code 300, attributes none) CRITICAL: fatal", true},
	} {
		l, ok := sink.ParseEventLine("2026-11-30T19:08:17.623Z gpu=0 " + tc.line)
		if !ok {
			t.Fatalf("%q did not parse", tc.line)
		}
		e := EventLine{Time: l.Time, Type: l.Type(), KV: l.KV}
		if got := e.describe(); got != tc.want {
			t.Errorf("%q: %q, want %q", tc.line, got, tc.want)
		}
		if e.critical() != tc.critical {
			t.Errorf("%q: critical %v, want %v", tc.line, e.critical(), tc.critical)
		}
	}
}
