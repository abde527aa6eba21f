package monitor

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpu-telemetry/gpu-telemetry/internal/testutil"
	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

// fakeRoot makes a host root holding the given files.
func fakeRoot(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for p, s := range files {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(root, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, p), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func TestReadIdentity(t *testing.T) {
	full := map[string]string{
		"proc/sys/kernel/hostname":       "gpu-node-07\n",
		"etc/machine-id":                 "4f0c8d6a2b7e4e1c9a3d5b7f1e2c4a6b\n",
		"proc/sys/kernel/random/boot_id": "9b1d3f5e-7a2c-4e6b-8d0f-1a3c5e7b9d2f\n",
		"var/lib/dbus/machine-id":        "ffffffffffffffffffffffffffffffff\n", // systemd's wins
	}
	dbusOnly := map[string]string{"proc/sys/kernel/hostname": "h2", "var/lib/dbus/machine-id": "abc\n"}
	for _, c := range []struct {
		name, flag string
		files      map[string]string
		want       reading.Identity
		warn       bool
	}{
		{"the hostname, machine id and boot id", "", full,
			reading.Identity{Host: "gpu-node-07", MachineID: "4f0c8d6a2b7e4e1c9a3d5b7f1e2c4a6b", BootID: "9b1d3f5e-7a2c-4e6b-8d0f-1a3c5e7b9d2f"}, false},
		{"--host wins over the hostname", "rack3-node07", full,
			reading.Identity{Host: "rack3-node07", MachineID: "4f0c8d6a2b7e4e1c9a3d5b7f1e2c4a6b", BootID: "9b1d3f5e-7a2c-4e6b-8d0f-1a3c5e7b9d2f"}, false},
		{"D-Bus's machine id when systemd's is missing", "", dbusOnly, reading.Identity{Host: "h2", MachineID: "abc"}, false},
		{"localhost is named, and warned about", "", map[string]string{"proc/sys/kernel/hostname": "localhost"}, reading.Identity{Host: "localhost"}, true},
		{"no name at all", "", map[string]string{}, reading.Identity{Host: "unknown"}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			var logs testutil.LogBuf
			got := readIdentity(c.flag, fakeRoot(t, c.files), logs.Logger())
			if got != c.want {
				t.Errorf("got %+v, want %+v", got, c.want)
			}
			if warned := strings.Contains(logs.String(), "level=WARN"); warned != c.warn {
				t.Errorf("warned %v, want %v:\n%s", warned, c.warn, logs.String())
			}
		})
	}
}

func TestLogfmtValue(t *testing.T) {
	for in, want := range map[string]string{"gpu-node-07": "gpu-node-07", "a b": `"a b"`, `x"y`: `"x\"y"`, "k=v": `"k=v"`, "": `""`} {
		if got := logfmtValue(in); got != want {
			t.Errorf("logfmtValue(%q) = %s, want %s", in, got, want)
		}
	}
}
