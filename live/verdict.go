package live

// Verdict is a GPU's hardware health verdict. Its value is the one the
// gpu_telemetry_health_verdict metric gives: 0 ok, 1 warning, 2 critical,
// 3 unknown (the monitoring-plugin convention status's exit status follows).
type Verdict uint8

// The verdicts.
const (
	VerdictOK       Verdict = 0
	VerdictWarning  Verdict = 1
	VerdictCritical Verdict = 2
	VerdictUnknown  Verdict = 3 // the GPU does not answer: its readings are not current
)

// Verdict decides the GPU's hardware health verdict, the one every output
// gives (status, its document, top, metrics), and says it as they do:
// "ok", "warning", "critical", or "unknown (GPU lost)" (hung, failing) for
// a GPU that does not answer. Such a GPU has no current readings, so
// nothing says its health is ok, or that it is no worse than a warning;
// a critical verdict stays, since a GPU that goes silent does not undo
// what its last readings showed. known is false before the first health
// reading of a GPU that answers or has not started.
func (g *GPU) Verdict() (v Verdict, text string, known bool) {
	switch {
	case g.HealthLevel == "critical":
		return VerdictCritical, "critical", true
	case g.State.Kind == StateHung || g.State.Kind == StateLost || g.State.Kind == StateFailing:
		return VerdictUnknown, "unknown (GPU " + g.State.Kind.String() + ")", true
	case g.HealthLevel == "warning":
		return VerdictWarning, "warning", true
	case g.HealthLevel == "ok":
		return VerdictOK, "ok", true
	}
	return 0, "", false
}
