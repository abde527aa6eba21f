package sink

import (
	"strconv"
	"strings"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

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
