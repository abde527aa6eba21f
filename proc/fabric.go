package proc

import (
	"path/filepath"

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
	for pid, exe := range Programs(filepath.Join(root, "proc")) {
		for i := range out {
			if out[i].PID == 0 && out[i].Exe == exe {
				out[i].PID = pid
			}
		}
	}
	return out
}
