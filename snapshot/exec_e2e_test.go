package snapshot

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/internal/testutil"
)

// TestManagerWithExecRunner runs a crash snapshot through real processes:
// fake programs on PATH, one of them hung (nvidia-smi on a GPU off the bus),
// one missing (free).
func TestManagerWithExecRunner(t *testing.T) {
	requireProgram(t, "sh", "sleep")
	sh, _ := exec.LookPath("sh")
	sleep, _ := exec.LookPath("sleep")
	bin := t.TempDir()
	scripts := map[string]string{
		"dmesg":      "printf '%s\\n' '[1.0] NVRM: Xid (PCI:0000:4b:00): 79, GPU has fallen off the bus.' '[1.1] pcieport 0000:4a:01.0: AER: Uncorrected (Fatal) error'",
		"lspci":      "echo \"lspci args: $*\"",
		"setpci":     "echo ffff",
		"nvidia-smi": "exec " + sleep + " 10",
		"uptime":     "echo ' 09:26:53 up 1 day, load average: 0.00, 0.01, 0.05'",
	}
	for name, body := range scripts {
		if err := os.WriteFile(filepath.Join(bin, name), []byte("#!"+sh+"\n"+body+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("PATH", bin)

	m, _ := newTestManager(t, func(c *Config) {
		c.Runner = nil // the default: an ExecRunner with CommandTimeout
		c.CommandTimeout = 300 * time.Millisecond
	})
	start := time.Now()
	crash(m, 3, testEvent, testCrashRequest)
	s := crashText(t, m)
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("snapshot took %v with a 300ms command timeout", took)
	}
	testutil.Contains(t, "snapshot", s,
		// The bridge above the GPU (in the fake sysfs) reports its AER
		// errors: its lines are the GPU's too.
		"=== dmesg (nvidia/gpu errors) ===\n[1.0] NVRM: Xid (PCI:0000:4b:00): 79, GPU has fallen off the bus.\n[1.1] pcieport 0000:4a:01.0: AER: Uncorrected (Fatal) error\n\n",
		"=== PCIe AER errors ===\n[1.1] pcieport 0000:4a:01.0: AER: Uncorrected (Fatal) error\n",
		"=== PCIe device state ===\nlspci args: -nnDvvvxxxx -s 0000:4b:00.0\n",
		"=== GPU register test (ffff = off bus) ===\nffff\n",
		"=== nvidia-smi (may fail) ===\n(timed out after 300ms)\n",
		"=== System memory ===\n(free: not installed (Debian package procps))\n",
		"=== System load ===\n 09:26:53 up 1 day",
		"\n=== End of snapshot ===\n",
	)
}
