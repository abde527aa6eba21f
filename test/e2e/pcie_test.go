package e2e

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/internal/testutil"
)

// TestDowntrainedBusyLinkIsAHealthReason: GPU 0's link runs at x8 gen 4 of
// x16 gen 5 while busy; past --pcie-degraded-after its rows are flagged, the
// health verdict gains the warning pcie_degraded with an events.log line
// that says the link, and the metric and status show it. GPU 1, busy at
// full speed, shows nothing.
func TestDowntrainedBusyLinkIsAHealthReason(t *testing.T) {
	t.Parallel()
	p, addr := startHealth(t, opts{
		scenario: "gpus 2\ngpu all util_gpu 90\ngpu 0 pcie_width 8\ngpu 0 pcie_gen 4\n",
		args:     []string{"--pcie-degraded-after", "2"},
	}, "the pcie_degraded health warning", 30*time.Second,
		`gpu=0 bus=00000000:01:00.0 type=HEALTH_WARNING reason=pcie_degraded detail="the PCIe link runs below its maximum while the GPU is busy" link="x8 of x16, gen 4 of 5"`)
	_, d := healthStatus(t, p.socketPath())
	if h := d.GPUs[0].Health; h.Verdict != "warning" || !slices.Contains(h.Reasons, "pcie_degraded") {
		t.Errorf("GPU 0 health %s %v, want a warning with pcie_degraded", h.Verdict, h.Reasons)
	}
	if h := d.GPUs[1].Health; slices.Contains(h.Reasons, "pcie_degraded") {
		t.Errorf("GPU 1 at full speed: health %s %v", h.Verdict, h.Reasons)
	}
	m := scrapeMetrics(t, addr)
	testutil.Contains(t, "metrics", m, `reason="pcie_degraded"`)
	for _, l := range strings.Split(m, "\n") {
		if strings.Contains(l, `reason="pcie_degraded"`) && strings.Contains(l, `gpu="1"`) {
			t.Errorf("GPU 1 at full speed: %s", l)
		}
	}
	tb, _ := p.lastRow(0)
	if last := tb.rows[len(tb.rows)-1]; !strings.Contains(tb.get(last, "flags"), "PCIE_DEGRADED(x8,gen4)") {
		t.Errorf("GPU 0's last row is not flagged: %q", tb.get(last, "flags"))
	}
	p.stop()
	if n := strings.Count(events(p.dir), "reason=pcie_degraded"); n != 1 {
		t.Errorf("%d pcie_degraded lines, want 1 (it holds while the link stays down)", n)
	}
}
