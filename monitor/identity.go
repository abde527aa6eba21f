package monitor

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/gpu-telemetry/gpu-telemetry/reading"
	"github.com/gpu-telemetry/gpu-telemetry/snapshot"
)

// readIdentity names the host: name (--host, else the kernel's hostname),
// machine id (systemd's, else D-Bus's) and boot id, read under root. A name
// that cannot tell hosts apart (localhost, none) is logged.
func readIdentity(name, root string, log *slog.Logger) reading.Identity {
	read := func(p string) string {
		b, err := os.ReadFile(filepath.Join(root, p))
		if err != nil {
			return ""
		}
		return strings.TrimSpace(string(b))
	}
	id := reading.Identity{Host: name, BootID: snapshot.ReadBootID(filepath.Join(root, snapshot.DefaultBootIDPath))}
	if id.Host == "" {
		id.Host = read("proc/sys/kernel/hostname")
	}
	if id.Host == "" && root == "/" {
		id.Host, _ = os.Hostname()
	}
	for _, p := range []string{"etc/machine-id", "var/lib/dbus/machine-id"} {
		if id.MachineID = read(p); id.MachineID != "" {
			break
		}
	}
	if id.Host == "" || strings.HasPrefix(id.Host, "localhost") {
		log.Warn("the host's name does not tell it apart from others: set --host", "host", id.Host, "machine_id", id.MachineID)
		if id.Host == "" {
			id.Host = "unknown"
		}
	}
	log.Info("host", "host", id.Host, "machine_id", id.MachineID, "boot_id", id.BootID)
	return id
}
