package proc

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/gpu-telemetry/gpu-telemetry/reading"
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
	got := FabricServices(root)
	want := []reading.FabricService{
		{Name: "nvidia-fabricmanager", Exe: "nv-fabricmanager", PID: 812},
		{Name: "nvidia-imex", Exe: "nvidia-imex"},
		{Name: "nvlsm", Exe: "nvlsm"},
	}
	if !slices.Equal(got, want) {
		t.Errorf("got %+v, want %+v", got, want)
	}
	if got := FabricServices(filepath.Join(root, "none")); !slices.Equal(got, fabricDaemons) {
		t.Errorf("no /proc: %+v", got)
	}
}
