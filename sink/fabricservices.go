package sink

import (
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/proc"
	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

// A dead Fabric Manager goes unnoticed on an NVSwitch system
// (NVIDIA/NVSentinel issue 883): the GPUs' fabric stays "in progress" or
// loses its routes while the driver looks fine. FabricServices says which
// of the fabric's daemons run, from the host's /proc (no program run, no
// D-Bus): the process's executable name, as the daemons' systemd units
// start them.

// fabricDaemons are the fabric's daemons: NVIDIA Fabric Manager (unit
// nvidia-fabricmanager, HGX and NVL72), the IMEX daemon (nvidia-imex,
// GB200 NVL72's memory export between nodes) and the NVLink subnet manager
// (nvlsm, NVLink5 switch trays).
var fabricDaemons = []reading.FabricService{
	{Name: "nvidia-fabricmanager", Exe: "nv-fabricmanager"},
	{Name: "nvidia-imex", Exe: "nvidia-imex"},
	{Name: "nvlsm", Exe: "nvlsm"},
}

// FabricServices scans root's /proc for the fabric daemons (root "/" on a
// real host).
func FabricServices(root string) []reading.FabricService {
	out := append([]reading.FabricService(nil), fabricDaemons...)
	for pid, exe := range proc.Programs(filepath.Join(root, "proc")) {
		for i := range out {
			if out[i].PID == 0 && out[i].Exe == exe {
				out[i].PID = pid
			}
		}
	}
	return out
}

// The states of a FABRIC_SERVICE line (FabricServiceEvent).
const (
	FabricServiceStopped = "stopped"
	FabricServiceRunning = "running"
)

// FabricServiceEvent is the events.log line of a fabric daemon that
// stopped running (pid: the process gone) or started (pid: the new one)
// since the last scan: a Fabric Manager that dies leaves the GPUs' fabric
// unrouted while the driver looks fine.
func FabricServiceEvent(now time.Time, service, state string, pid int) EventLine {
	return EventLine{Time: now, GPU: -1, Source: "proc", Type: TypeFabricService,
		Fields: KV("service", service, "state", state, "pid", strconv.Itoa(pid))}
}

// FabricServicesText says which of them run: "nvidia-fabricmanager running
// (pid 1234), nvidia-imex not running, nvlsm not running".
func FabricServicesText(s []reading.FabricService) string {
	parts := make([]string, len(s))
	for i, f := range s {
		if f.PID > 0 {
			parts[i] = f.Name + " running (pid " + strconv.Itoa(f.PID) + ")"
		} else {
			parts[i] = f.Name + " not running"
		}
	}
	return strings.Join(parts, ", ")
}
