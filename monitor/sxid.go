package monitor

import (
	"strconv"

	"github.com/gpu-telemetry/gpu-telemetry/anomaly"
	"github.com/gpu-telemetry/gpu-telemetry/kmsg"
	"github.com/gpu-telemetry/gpu-telemetry/reading"
	"github.com/gpu-telemetry/gpu-telemetry/xid"
)

// A fatal SXid (NVIDIA's catalog, xid.SXidInfo.Fatal) is the switch's, but
// on an HGX baseboard the fabric it breaks is every GPU's: NVIDIA's Fabric
// Manager User Guide asks for the baseboard's GPUs and NVSwitches to be
// reset together. So it raises the nvswitch_fatal health reason of every
// monitored GPU that reports an NVLink fabric; the GPU's next sample begins
// it, with its HEALTH_CRITICAL line, its incident and crash snapshot and its
// repair action, as any critical reason. A burst of SXid lines is one
// incident: the reason holds until an operator acknowledges the GPU's action
// (Ack clears it) or the logger restarts. The kernel log does not say which
// baseboard a switch is on; a host has one fabric here (an NVL72 rack's
// switches are outside the host and log nothing to its kernel).

// fatalSXid raises nvswitch_fatal for fatal SXid x on every GPU on the
// fabric; on a host with none (no NVSwitch can be there: the line was forged
// or replayed) it says once that the SXid is no GPU's. Kernel log goroutine
// only.
func (m *Monitor) fatalSXid(x kmsg.SXidReport, i xid.SXidInfo) {
	what := "SXid " + strconv.Itoa(x.Code) + " (" + i.Name + ") on nvidia-nvswitch" + strconv.Itoa(x.Switch) + " at " + x.Bus.String()
	n := 0
	for _, gs := range m.gpus {
		if !onFabric(reading.Values(gs.Health().Vals)) {
			continue
		}
		n++
		if gs.tr.Raised(anomaly.ReasonNVSwitchFatal) {
			continue // the burst's first names the incident
		}
		gs.sxid.Store(&what)
		if gs.tr.Raise(anomaly.ReasonNVSwitchFatal) {
			gs.log.Error("fatal NVSwitch error: the GPU's fabric needs the baseboard reset", "sxid", x.Code, "switch", x.Switch)
		}
	}
	if n == 0 && !m.kern.noFabric {
		m.kern.noFabric = true
		m.log.Warn("a fatal SXid on a host with no GPU on an NVLink fabric: counted, attributed to no GPU", "sxid", x.Code, "switch", x.Switch, "bus", x.Bus.String())
	}
}

// onFabric reports whether a GPU's health readings v say it is on an NVLink
// fabric: it reads a fabric state other than "not supported".
func onFabric(v reading.Values) bool {
	st, ok := v[reading.HFabricState].Get()
	return ok && st != reading.FabricNotSupported
}

// reasonDetail is the detail of health reason rs's line: its help, and for
// nvswitch_fatal the SXid that raised it.
func (gs *gpuState) reasonDetail(rs anomaly.HealthReason) string {
	d := anomaly.HealthReasonDefs[rs].Help
	if p := gs.sxid.Load(); p != nil && rs == anomaly.ReasonNVSwitchFatal {
		d += ": " + *p
	}
	return d
}
