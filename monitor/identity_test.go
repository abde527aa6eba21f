package monitor

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/internal/testutil"
	"github.com/gpu-telemetry/gpu-telemetry/live"
	"github.com/gpu-telemetry/gpu-telemetry/reading"
	"github.com/gpu-telemetry/gpu-telemetry/sink"
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

// TestEveryOutputNamesTheHostByHostFlag: with --host other than the
// kernel's hostname, every output names the host by --host: system-info.txt,
// each events.log line, the crash snapshot's header, and the status
// document the metrics' host info and `status` are made from. The kernel's
// name appears only as system-info.txt's note.
func TestEveryOutputNamesTheHostByHostFlag(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 1, func(c *Config) {
			c.Host = "rack3-node07"
			c.HostRoot = fakeRoot(t, map[string]string{"proc/sys/kernel/hostname": "buildbox\n", "etc/machine-id": "4f0c\n"})
		})
		var doc live.Doc
		r.run(time.Second, func() {
			time.Sleep(300 * time.Millisecond)
			r.m.onEvent(reading.Event{Time: time.Now(), GPU: 0, Kind: reading.EventXid, Source: reading.SourceNVML, Data: 79})
			time.Sleep(300 * time.Millisecond)
			doc = live.NewDoc(r.m.Board().View())
		})
		si, _ := os.ReadFile(filepath.Join(r.dir, "system-info.txt"))
		testutil.Contains(t, "system-info.txt", string(si), "\n Host: rack3-node07 (machine id 4f0c, ")
		if n := strings.Count(string(si), "buildbox"); n != 1 || !strings.Contains(string(si), "Kernel hostname: buildbox") {
			t.Errorf("system-info.txt names the kernel's hostname other than as its note:\n%s", si)
		}
		ev, _ := os.ReadFile(filepath.Join(r.dir, "events.log"))
		lines := strings.Split(strings.TrimSpace(string(ev)), "\n")
		for _, l := range lines {
			if e, ok := sink.ParseEventLine(l); !ok || e.KV["host"] != "rack3-node07" {
				t.Errorf("events.log line does not name the host rack3-node07: %s", l)
			}
		}
		if len(lines) == 0 || strings.Contains(string(ev), "buildbox") {
			t.Errorf("events.log:\n%s", ev)
		}
		crashes, _ := filepath.Glob(filepath.Join(r.dir, "crashes", "crash-*.log"))
		if len(crashes) != 1 {
			t.Fatalf("crash snapshots %v", crashes)
		}
		snap, _ := os.ReadFile(crashes[0])
		testutil.Contains(t, "crash snapshot", string(snap), "\nHost: rack3-node07 (machine id 4f0c, ")
		if doc.Host.Name != "rack3-node07" || doc.Host.MachineID != "4f0c" {
			t.Errorf("status names the host %q (machine id %q)", doc.Host.Name, doc.Host.MachineID)
		}
	})
}
