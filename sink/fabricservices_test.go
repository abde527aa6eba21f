package sink

import (
	"os"
	"path/filepath"
	"testing"
)

func TestFabricServices(t *testing.T) {
	root := t.TempDir()
	procs := map[string]string{
		"1":    "/sbin/init\x00splash\x00",
		"812":  "/usr/bin/nv-fabricmanager\x00-c\x00/usr/share/nvidia/nvswitch/fabricmanager.cfg\x00",
		"900":  "/usr/bin/nvidia-imex-ctl\x00", // not the daemon
		"self": "x\x00",
		"77":   "", // a kernel thread: no command line
	}
	for pid, cmd := range procs {
		dir := filepath.Join(root, "proc", pid)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "cmdline"), []byte(cmd), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got := FabricServicesText(FabricServices(root))
	if want := "nvidia-fabricmanager running (pid 812), nvidia-imex not running, nvlsm not running"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if got := FabricServicesText(FabricServices(filepath.Join(root, "none"))); got != "nvidia-fabricmanager not running, nvidia-imex not running, nvlsm not running" {
		t.Errorf("no /proc: %q", got)
	}
}
