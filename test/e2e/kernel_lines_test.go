package e2e

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/internal/testutil"
)

// TestAERAndFallenOffBusReachTheRightGPU feeds the real binary kernel lines
// (in the shapes of public bug reports, with the simulated GPUs' bus ids):
// an uncorrectable AER error whose source is GPU 0, an old driver's
// fallen-off-the-bus line for GPU 1, and look-alikes that must not count.
func TestAERAndFallenOffBusReachTheRightGPU(t *testing.T) {
	t.Parallel()
	p := start(t, opts{scenario: "gpus 2\n", kmsg: true})
	p.waitForRows(1, 5, 15*time.Second)
	p.writeKmsg(
		"3,950,2000000,-;pcieport 0000:00:01.0: AER: Uncorrected (Fatal) error received: 0000:01:00.0",
		"3,951,2000010,-;nvidia 0000:01:00.0: AER: PCIe Bus Error: severity=Uncorrected (Fatal), type=Transaction Layer, (Requester ID)",
		"4,952,2000119,-;mlx5_core 0000:3b:00.0: XID 119 port event",
		"4,953,2001119,-;nvme 0000:03:00.0: AER: PCIe Bus Error: severity=Uncorrected (Fatal), type=Transaction Layer, (Requester ID)",
		"3,954,2002000,-;NVRM: GPU 0000:21:00.0: GPU has fallen off the bus.",
	)
	p.waitFor("a crash snapshot of each GPU", 15*time.Second, func() bool {
		m0, _ := filepath.Glob(filepath.Join(p.dir, "crashes", "crash-*-gpu0.log"))
		m1, _ := filepath.Glob(filepath.Join(p.dir, "crashes", "crash-*-gpu1.log"))
		return len(m0) == 1 && len(m1) == 1
	})
	p.stop()
	ev := readFile(t, filepath.Join(p.dir, "events.log"))
	testutil.Contains(t, "events.log", ev,
		"gpu=0 bus=00000000:01:00.0 source=kmsg type=AER severity=uncorrectable-fatal device=0000:00:01.0 reporter=0000:01:00.0 ktime=2.000000",
		"gpu=0 bus=00000000:01:00.0 source=kmsg type=AER severity=uncorrectable-fatal device=0000:01:00.0 ktime=2.000010",
		"gpu=1 bus=00000000:21:00.0 source=kmsg type=FALLEN_OFF_BUS ktime=2.002000",
	)
	for _, bad := range []string{"mlx5", "nvme", "xid=119"} {
		if strings.Contains(ev, bad) {
			t.Errorf("a look-alike counted (%q):\n%s", bad, ev)
		}
	}
	m1, _ := filepath.Glob(filepath.Join(p.dir, "crashes", "crash-*-gpu1.log"))
	if b := readFile(t, m1[0]); !strings.Contains(b, "Reason: GPU has fallen off the bus (kmsg, no Xid)") {
		t.Errorf("GPU 1's snapshot reason:\n%s", b[:min(len(b), 600)])
	}
}
