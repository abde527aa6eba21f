package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/internal/testutil"
)

// TestDriverAndVBIOSUpdatesAreRecorded: between two runs the driver and
// GPU 0's VBIOS were updated; the second start records both as INVENTORY
// lines (from, to), GPU 1's unchanged VBIOS as nothing, and a third start
// with nothing changed records none.
func TestDriverAndVBIOSUpdatesAreRecorded(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	run := func(scenario string) {
		p := start(t, opts{scenario: scenario, dir: dir})
		// Not the rows: the files of the run before already hold some.
		p.waitFor("the first sample", 20*time.Second, func() bool {
			return strings.Contains(p.stderr.String(), `msg="first sample of every GPU written"`)
		})
		p.stop()
	}
	run("gpus 2\ndriver 570.86.15\ngpu all vbios 96.00.89.00.01\n")
	if strings.Contains(events(dir), "type=INVENTORY") {
		t.Fatalf("a first run recorded an inventory change:\n%s", events(dir))
	}
	updated := "gpus 2\ndriver 575.51.03\ngpu all vbios 96.00.89.00.01\ngpu 0 vbios 96.00.9F.00.04\n"
	run(updated)
	ev := events(dir)
	testutil.Contains(t, "events.log", ev,
		"level=info gpu=? source=start type=INVENTORY change=driver from=570.86.15 to=575.51.03",
		"level=info gpu=0 bus=00000000:01:00.0 source=start type=INVENTORY change=vbios serial=")
	testutil.Contains(t, "events.log", ev, "from=96.00.89.00.01 to=96.00.9F.00.04")
	if n := strings.Count(ev, "change=vbios"); n != 1 {
		t.Errorf("%d VBIOS lines, want 1 (GPU 0's):\n%s", n, ev)
	}
	run(updated)
	if n := strings.Count(events(dir), "type=INVENTORY"); n != 2 {
		t.Errorf("a start with nothing changed recorded more: %d INVENTORY lines, want 2:\n%s", n, events(dir))
	}
}

// TestMaxPCIeLinkChangeIsRecorded: the board's maximum PCIe link (board and
// slot together) is x16 in one run and x8 in the next (another slot, a
// riser changed): once the second run has sampled it, one INVENTORY
// change=pcie_max line says so.
func TestMaxPCIeLinkChangeIsRecorded(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := start(t, opts{scenario: "gpus 1\n", dir: dir})
	p.waitFor("the maximum link in run-state", 20*time.Second, func() bool {
		b, _ := os.ReadFile(filepath.Join(dir, "run-state"))
		return strings.Contains(string(b), "pcie_max=GPU-")
	})
	p.stop()
	p = start(t, opts{scenario: "gpus 1\ngpu 0 max_pcie_width 8\n", dir: dir})
	p.waitForEvent("the pcie_max line", 20*time.Second,
		`level=info gpu=0 bus=00000000:01:00.0 source=start type=INVENTORY change=pcie_max serial=`)
	p.stop()
	testutil.Contains(t, "events.log", events(dir), `from="gen 5 x16" to="gen 5 x8"`)
	if n := strings.Count(events(dir), "change=pcie_max"); n != 1 {
		t.Errorf("%d pcie_max lines, want 1", n)
	}
}
