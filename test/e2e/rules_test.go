package e2e

import (
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/gpu-telemetry/gpu-telemetry/internal/testutil"
)

// TestAlertRules checks deploy/prometheus's alert rules with promtool and
// runs their unit tests.
func TestAlertRules(t *testing.T) {
	t.Parallel()
	promtool := testutil.NeedTool(t, "promtool", "prometheus")
	dir := filepath.Join(repo, "deploy", "prometheus")
	for _, args := range [][]string{{"check", "rules", "gpu-telemetry.rules.yml"}, {"test", "rules", "gpu-telemetry.rules.test.yml"}} {
		cmd := exec.Command(promtool, args...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("promtool %v: %v\n%s", args, err, out)
		}
	}
}
