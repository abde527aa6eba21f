package snapshot

import (
	"strings"
	"testing"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/internal/testutil"
)

// TestKernelLinesPlacedByPrintkTime: dmesg lines in a snapshot carry the
// wall-clock time their printk stamp maps to through Config.KernelWall (here
// the printk clock read 0 at 2026-03-12 09:27:30.589), not when they were
// read.
func TestKernelLinesPlacedByPrintkTime(t *testing.T) {
	boot := time.Date(2026, 3, 13, 9, 26, 53, 589e6, time.UTC).Add(-86400*time.Second + 37*time.Second)
	wall := func(p time.Duration) time.Time { return boot.Add(p) }
	m, _ := newTestManager(t, func(c *Config) { c.KernelWall = wall })
	if d := crash(m, 3, testEvent, testCrashRequest); !d.Accepted {
		t.Fatal("not accepted")
	}
	testutil.Contains(t, "snapshot", crashText(t, m),
		"[86400.120000] {2026-03-13T09:27:30.709Z} NVRM: Xid (PCI:0000:4b:00): 79, pid=2314, GPU has fallen off the bus.")
	r := placeKernelLines([]byte("no stamp here\n[bad] x\n[    4.118822] nvidia: loading\n"), wall)
	if got := string(r); !strings.HasPrefix(got, "no stamp here\n[bad] x\n[    4.118822] {") {
		t.Errorf("lines without a stamp changed: %q", got)
	}
}
