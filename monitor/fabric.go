package monitor

import (
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/proc"
	"github.com/gpu-telemetry/gpu-telemetry/reading"
	"github.com/gpu-telemetry/gpu-telemetry/sink"
)

// fabricRescan is how often the fabric daemons are looked for again once a
// GPU has reported an NVLink fabric: a Fabric Manager that dies later is
// named in status within a minute (NVIDIA/NVSentinel issue 883: a dead
// Fabric Manager went unnoticed).
const fabricRescan = time.Minute

// scanFabricServices looks for the fabric daemons (a bounded /proc scan,
// sink.FabricServices), publishes what it found for status and metrics
// (gpu_telemetry_fabric_service_running), and writes a FABRIC_SERVICE line
// for a daemon that stopped or started running since the last scan (a
// restarted one, a new pid, is both). Side worker only: never on the sample
// path.
func (m *Monitor) scanFabricServices() []reading.FabricService {
	s := proc.FabricServices(m.cfg.HostRoot)
	now := time.Now()
	m.states.mu.Lock()
	prev := m.states.fabric
	m.states.fabric, m.states.fabricAt = s, now
	m.states.mu.Unlock()
	for i, f := range s {
		if i >= len(prev) || prev[i].PID == f.PID {
			continue
		}
		if was := prev[i].PID; was > 0 {
			m.log.Warn("a fabric daemon stopped running", "service", f.Name, "pid", was)
			m.eventLine(sink.FabricServiceEvent(now, f.Name, sink.FabricServiceStopped, was))
		}
		if f.PID > 0 {
			m.log.Info("a fabric daemon started running", "service", f.Name, "pid", f.PID)
			m.eventLine(sink.FabricServiceEvent(now, f.Name, sink.FabricServiceRunning, f.PID))
		}
	}
	return s
}

// rescanFabric queues a new scan of the fabric daemons once fabricRescan
// has passed since the last (none before a GPU reported a fabric).
func (m *Monitor) rescanFabric(now time.Time) {
	m.states.mu.Lock()
	due := m.states.fabric != nil && now.Sub(m.states.fabricAt) >= fabricRescan
	if due {
		m.states.fabricAt = now // one queued scan at a time
	}
	m.states.mu.Unlock()
	if due {
		m.side.queue("looking for the fabric daemons", -1, func() { m.scanFabricServices() })
	}
}
