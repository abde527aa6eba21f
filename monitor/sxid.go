package monitor

import (
	"strconv"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/anomaly"
	"github.com/gpu-telemetry/gpu-telemetry/internal/events"
	"github.com/gpu-telemetry/gpu-telemetry/kmsg"
	"github.com/gpu-telemetry/gpu-telemetry/reading"
	"github.com/gpu-telemetry/gpu-telemetry/sink"
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
// (Ack clears it), also over a restart in the same boot (startRepair). The kernel log does not say which
// baseboard a switch is on; a host has one fabric here (an NVL72 rack's
// switches are outside the host and log nothing to its kernel).
//
// The kernel log goroutine reads its backlog at start, before a GPU's first
// sample says whether the GPU is on a fabric; so the latest fatal SXid is
// the host's, pending (Monitor.sxid), and each GPU takes it once: at once
// when its fabric state is known, else on its worker with the first sample
// that tells it.

// pendingSXid is a fatal SXid of the host, for the GPUs to take (seq: its
// number, from 1; takeSXid).
type pendingSXid struct {
	seq  uint64
	what string    // "SXid 15009 (route GLT DBE) on nvidia-nvswitch3 at 0000:05:00.0"
	at   time.Time // when the kernel logged it (its incident's time)
	// backlog: read after the fact, "kmsg backlog, logged at ktime=...",
	// as an Xid's incident says (events.Stage); "": read as logged.
	backlog string
}

// The GPU's fabric as its answered samples last said (gpuState.fabric): a
// failed or lost sample does not change it.
const (
	fabricUnknown int32 = iota // no answered sample yet
	fabricOff                  // no fabric reading, or "not supported"
	fabricOn
)

// fatalSXid raises nvswitch_fatal for fatal SXid x on every
// GPU known to be on the fabric and leaves it pending for those whose
// fabric is not known yet; once every GPU is known and none is on a fabric
// (no NVSwitch can be there: the line was forged or replayed) it says once
// that the SXid is no GPU's. Kernel log goroutine only.
func (m *Monitor) fatalSXid(x kmsg.SXidReport, i xid.SXidInfo, rec kmsg.Record, now time.Time) {
	p := &pendingSXid{
		seq:  1,
		what: "SXid " + strconv.Itoa(x.Code) + " (" + i.Name + ") on nvidia-nvswitch" + strconv.Itoa(x.Switch) + " at " + x.Bus.String(),
		at:   m.kclock.clock.LoggedAt(now, rec.Time, rec.Backlog),
	}
	if last := m.sxid.Load(); last != nil {
		p.seq = last.seq + 1 // this goroutine stores each
	}
	if rec.Backlog {
		kt := events.KernelTimeField(rec.Time)
		p.backlog = "kmsg backlog, logged at " + kt.Key + "=" + kt.Value
	}
	for _, gs := range m.gpus {
		if gs.fabric.Load() == fabricOn {
			gs.takeSXid(p)
		}
	}
	m.sxid.Store(p)
	m.sxidNoFabric()
}

// takeSXid raises nvswitch_fatal for pending SXid p on the GPU, which is on
// the fabric, unless the GPU took p or a later one already or the reason is
// raised (the burst's first names the incident). Any goroutine.
func (gs *gpuState) takeSXid(p *pendingSXid) {
	if !gs.tookSXid(p) || gs.tr.Raised(anomaly.ReasonNVSwitchFatal) {
		return
	}
	gs.sxid.Store(p)
	if gs.tr.Raise(anomaly.ReasonNVSwitchFatal) {
		gs.log.Error("fatal NVSwitch error: the GPU's fabric needs the baseboard reset", "sxid", p.what)
	}
}

// tookSXid marks pending SXid p taken by the GPU; false when it or a later
// one was.
func (gs *gpuState) tookSXid(p *pendingSXid) bool {
	for {
		old := gs.sxidTaken.Load()
		if old >= p.seq {
			return false
		}
		if gs.sxidTaken.CompareAndSwap(old, p.seq) {
			return true
		}
	}
}

// fabricSample notes the GPU's fabric from sample s (an answered one's) and
// takes the host's pending fatal SXid once the fabric is known. Worker
// goroutine only, before the sample's verdict.
func (gs *gpuState) fabricSample(s *reading.Sample) {
	if s.Status == reading.StatusAnswered {
		switch {
		case onFabric(s.Values):
			gs.fabric.Store(fabricOn)
		case s.Values[reading.HFabricState].OK || gs.fabric.Load() == fabricUnknown:
			gs.fabric.Store(fabricOff) // a reading timed out keeps a known fabric
		}
	}
	p := gs.m.sxid.Load()
	if p == nil || gs.sxidTaken.Load() >= p.seq {
		return
	}
	switch gs.fabric.Load() {
	case fabricOn:
		gs.takeSXid(p)
	case fabricOff:
		gs.tookSXid(p)
		gs.m.sxidNoFabric()
	}
}

// sxidNoFabric logs, once, that a fatal SXid is no GPU's when every GPU's
// fabric is known and none is on one. Any goroutine.
func (m *Monitor) sxidNoFabric() {
	p := m.sxid.Load()
	if p == nil {
		return
	}
	for _, gs := range m.gpus {
		if gs.fabric.Load() != fabricOff {
			return
		}
	}
	if m.kern.noFabric.CompareAndSwap(false, true) {
		m.log.Warn("a fatal SXid on a host with no GPU on an NVLink fabric: counted, attributed to no GPU", "sxid", p.what)
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
		d += ": " + p.what
	}
	return d
}

// sxidIncident is nvswitch_fatal's incident ev and line as the fatal SXid
// that raised it has them: when the kernel logged it, and for one read after
// the fact, so marked (as an Xid's: its reason says "kmsg backlog, logged at
// ktime=...", its line backlog=true).
func (gs *gpuState) sxidIncident(c *sampleIncident) {
	p := gs.sxid.Load()
	if p == nil {
		return
	}
	if !p.at.IsZero() {
		c.ev.Time = p.at
	}
	if p.backlog != "" {
		c.ev.Reason += " (" + p.backlog + ")"
		c.line.Fields = append(c.line.Fields, sink.Field{Key: "backlog", Value: "true"})
	}
}
