package events

import (
	"strconv"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/kmsg"
	"github.com/gpu-telemetry/gpu-telemetry/reading"
	"github.com/gpu-telemetry/gpu-telemetry/sink"
	"github.com/gpu-telemetry/gpu-telemetry/snapshot"
	"github.com/gpu-telemetry/gpu-telemetry/xid"
)

// A KernelLine is a kernel log record that is not an Xid but tells of a
// GPU's trouble, taken apart (one of AER, NVRM and SXid is set: an AER
// line on the GPU's PCIe path, an NVRM failure line, or an NVSwitch's SXid) and attributed by the
// caller, which knows the GPUs' bus ids and PCIe paths, to the GPU it
// concerns. An AER line reported by a bridge concerns every GPU below it:
// it is one KernelLine for each.
type KernelLine struct {
	Rec  kmsg.Record
	Read time.Time // when it was read, from time.Now (LineLimit.Allow)
	GPU  int       // the GPU's index; -1: none monitored
	Bus  string    // the GPU's bus id, or the line's own address when no GPU is monitored there; "" unknown
	AER  *kmsg.AERReport
	NVRM *kmsg.NVRMReport
	SXid *kmsg.SXidReport // an NVSwitch's: GPU -1, Bus the switch's
}

// nvrmLines are the events.log type (also the kind= of their
// KERNEL_LINES_SUPPRESSED lines), the crash snapshot reason, the headline's
// words and the stage of each kind of NVRM line.
var nvrmLines = map[kmsg.NVRMKind]struct {
	typ, reason, what string
	stage             snapshot.Stage
}{
	kmsg.NVRMFallenOffBus: {sink.TypeFallenOffBus, "GPU has fallen off the bus (kmsg, no Xid)", "fell off the bus (no Xid)", snapshot.StageLost},
	kmsg.NVRMInitFailed:   {sink.TypeRMInitFailed, "RmInitAdapter failed (kmsg)", "RmInitAdapter failed", snapshot.StageFault},
	kmsg.NVRMGSPTimeout:   {sink.TypeGSPTimeout, "GSP RPC timeout (kmsg)", "GSP RPC timeout", snapshot.StageFirmware},
	kmsg.NVRMGSPCrash:     {sink.TypeGSPCrash, "GSP heartbeat lost or crash report (kmsg)", "GSP heartbeat lost or crashed", snapshot.StageFirmware},
}

// KernelLine runs a kernel AER or NVRM failure line through the stage and
// returns its record: its events.log line unless it is over the burst limit
// (LineLimit: then Held, and no incident), after the line that sums up
// the previous window's held lines when this one begins a new window; the
// incident it raises (an uncorrectable AER error, every NVRM failure line),
// of when the kernel logged it for a line read after the fact.
func (s *Stage) KernelLine(l KernelLine) Record {
	line := sink.EventLine{Time: l.Read, GPU: l.GPU, Bus: l.Bus, Source: reading.SourceKmsg.String()}
	var kind string
	var ev *snapshot.Event
	switch {
	case l.AER != nil:
		a := l.AER
		kind = "AER/" + a.Severity.String()
		line.Type, line.Fields = sink.TypeAER, sink.KV("severity", a.Severity.String(), "device", a.Device.String())
		if src, ok := a.Source.Get(); ok {
			line.Fields = append(line.Fields, sink.Field{Key: "reporter", Value: src.String()})
		}
		if a.Severity.Uncorrectable() {
			ev = &snapshot.Event{Reason: "PCIe AER " + a.Severity.String() + " error on the GPU's path (kmsg)", Stage: snapshot.StageFault}
		}
	case l.NVRM != nil:
		n := nvrmLines[l.NVRM.Kind]
		kind = n.typ
		line.Type = n.typ
		if l.NVRM.DriverGPU >= 0 {
			line.Fields = sink.KV("driver_gpu", strconv.Itoa(l.NVRM.DriverGPU))
		}
		ev = &snapshot.Event{What: n.what, Reason: n.reason, Stage: n.stage}
	case l.SXid != nil:
		// The switch's error, not a GPU's: its line names the switch, and
		// the GPUs behind it report their own Xids (74, 45).
		x := l.SXid
		kind, line.Type = sink.TypeSXid, sink.TypeSXid
		sev := "nonfatal"
		if i, ok := xid.LookupSXid(x.Code); !ok {
			sev = "unknown"
		} else if i.Fatal {
			sev = "fatal"
		}
		line.Fields = sink.KV("switch", strconv.Itoa(x.Switch), "sxid", strconv.Itoa(x.Code), "name", xid.SXidName(x.Code), "severity", sev)
	default:
		return Record{}
	}
	line.Fields = lineTail(line.Fields, true, l.Rec)
	var r Record
	ok, held := s.limit.Allow(l.GPU, kind, l.Read)
	if held > 0 {
		r.Lines = append(r.Lines, kernelLinesSuppressed(l.Read, Held{GPU: l.GPU, Kind: kind, Lines: held}))
	}
	if !ok {
		r.Held, r.FirstHeld = kind, s.counts.Add(kernelLinesHeld, 1) == 1
		return r
	}
	s.counts.Inc(kernelLines)
	r.Lines = append(r.Lines, line)
	if ev != nil {
		// A line read after the fact happened when the kernel logged it;
		// its events.log line is stamped when it was read, with that ktime.
		ev.Time = s.clock.LoggedAt(l.Read, l.Rec.Time, l.Rec.Backlog)
		r.Critical, r.Alert, r.Reason = ev, Error, ev.Reason
	}
	return r
}
