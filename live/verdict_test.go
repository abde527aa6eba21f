package live

import (
	"strings"
	"testing"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

// TestVerdict: a GPU that does not answer has no "ok" (nor "warning")
// verdict: its health is unknown, saying why; a critical verdict stays.
func TestVerdict(t *testing.T) {
	for _, c := range []struct {
		name  string
		state StateKind
		level string
		v     Verdict
		text  string
		known bool
	}{
		{"answering ok", StateAnswering, "ok", VerdictOK, "ok", true},
		{"answering warning", StateAnswering, "warning", VerdictWarning, "warning", true},
		{"answering critical", StateAnswering, "critical", VerdictCritical, "critical", true},
		{"answering before its first health reading", StateAnswering, "", 0, "", false},
		{"not started", StateNotStarted, "", 0, "", false},
		{"lost, was ok", StateLost, "ok", VerdictUnknown, "unknown (GPU lost)", true},
		{"hung, was ok", StateHung, "ok", VerdictUnknown, "unknown (GPU hung)", true},
		{"failing, was ok", StateFailing, "ok", VerdictUnknown, "unknown (GPU failing)", true},
		{"lost, was warning", StateLost, "warning", VerdictUnknown, "unknown (GPU lost)", true},
		{"hung before its first health reading", StateHung, "", VerdictUnknown, "unknown (GPU hung)", true},
		{"lost, was critical", StateLost, "critical", VerdictCritical, "critical", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := GPU{State: State{Kind: c.state}, HealthLevel: c.level}
			v, text, known := g.Verdict()
			if v != c.v || text != c.text || known != c.known {
				t.Errorf("Verdict() = %d %q %v, want %d %q %v", v, text, known, c.v, c.text, c.known)
			}
		})
	}
}

// TestLostGPUHealthIsUnknown: a GPU whose health was ok and that is then
// lost says "unknown (GPU lost)" in the status document and its text.
func TestLostGPUHealthIsUnknown(t *testing.T) {
	var g GPU
	s := sample(0, 0)
	g.Observe(&s, 100*time.Millisecond)
	g.HealthLevel = "ok"
	lost := reading.Sample{Time: t0.Add(time.Second), Status: reading.StatusLost}
	g.Observe(&lost, 100*time.Millisecond)
	d := gpuDoc(&g, t0.Add(2*time.Second), 0)
	if d.State != "lost" || d.Health == nil || d.Health.Verdict != "unknown (GPU lost)" {
		t.Fatalf("lost GPU: state %q, health %+v", d.State, d.Health)
	}
	if h := HealthText(d); !strings.HasPrefix(h, "health unknown (GPU lost)  ") {
		t.Errorf("HealthText = %q", h)
	}
}
