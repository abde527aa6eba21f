package fleet

import (
	"path/filepath"
	"testing"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"

	"github.com/gpu-telemetry/gpu-telemetry/anomaly"
)

// criticalReasonAlerts is the alert that pages for each critical health
// reason of anomaly.HealthReasonDefs (most read the counter itself, with
// DCGM's threshold, rather than the daemon's verdict).
var criticalReasonAlerts = map[string]string{
	"ecc_dbe":                "GPUDoubleBitECCErrors",
	"remap_failure":          "GPURowRemapFailure",
	"nvlink_down":            "GPUNVLinkDown",
	"nvlink_recovery_failed": "GPUNVLinkRecoveryFailed",
	"c2c_errors":             "GPUC2CErrors",
	"recovery_action":        "GPURecoveryActionPolled",
	"memory_unrepairable":    "GPUMemoryUnrepairable",
	"fabric_error":           "GPUFabricUnhealthy",
	"fabric_config":          "GPUFabricUnhealthy",
	"fabric_route_unhealthy": "GPUFabricUnhealthy",
	"nvswitch_fatal":         "GPUFabricUnhealthy",
}

// TestEveryHealthReasonAlerts: every health reason the daemon can give
// reaches an alert of the shipped rules: a critical one its own critical
// alert, a warning one GPUHealthWarning's reason matcher (and no critical
// reason matches it: that one pages already). A reason added to anomaly
// without its alert fails here.
func TestEveryHealthReasonAlerts(t *testing.T) {
	p := parser.NewParser(parser.Options{})
	groups, errs := rulefmt.ParseFile(filepath.Join(repo, "deploy", "prometheus", "gpu-telemetry.rules.yml"), false,
		model.UTF8Validation, p, nil)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	severity := map[string]string{}
	warnExpr := ""
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			severity[r.Alert] = r.Labels["severity"]
			if r.Alert == "GPUHealthWarning" {
				warnExpr = r.Expr
			}
		}
	}
	expr, err := p.ParseExpr(warnExpr)
	if err != nil {
		t.Fatalf("GPUHealthWarning: %v", err)
	}
	var reasonMatch func(string) bool
	parser.Inspect(expr, func(n parser.Node, _ []parser.Node) error {
		if vs, ok := n.(*parser.VectorSelector); ok {
			for _, m := range vs.LabelMatchers {
				if m.Name == "reason" {
					reasonMatch = m.Matches
				}
			}
		}
		return nil
	})
	if reasonMatch == nil {
		t.Fatalf("GPUHealthWarning (%s) has no reason matcher", warnExpr)
	}
	for _, d := range anomaly.HealthReasonDefs {
		if d.Critical {
			a, ok := criticalReasonAlerts[d.Name]
			if !ok || severity[a] != "critical" {
				t.Errorf("critical health reason %s: no critical alert (mapped to %q, severity %q)", d.Name, a, severity[a])
			}
			if reasonMatch(d.Name) {
				t.Errorf("critical health reason %s also matches GPUHealthWarning", d.Name)
			}
			continue
		}
		if !reasonMatch(d.Name) {
			t.Errorf("warning health reason %s does not reach GPUHealthWarning (%s)", d.Name, warnExpr)
		}
	}
}
