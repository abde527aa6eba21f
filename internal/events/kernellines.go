package events

import (
	"strconv"
	"sync"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/kmsg"
	"github.com/gpu-telemetry/gpu-telemetry/reading"
	"github.com/gpu-telemetry/gpu-telemetry/sink"
	"github.com/gpu-telemetry/gpu-telemetry/snapshot"
)

// KernelLines bounds how many kernel lines of one kind for one GPU are
// written per KernelLineWindow: a flaky link can print corrected AER errors
// by the thousand. The rest are held back, and their number is handed on
// when the window ends, for one line that sums them up. The zero value is
// ready; it is safe for concurrent use.
type KernelLines struct {
	mu     sync.Mutex
	bursts map[burstKey]*burst
}

const (
	// KernelLineBurst is how many lines of one kind for one GPU a window
	// lets through.
	KernelLineBurst = 10
	// KernelLineWindow is the window.
	KernelLineWindow = time.Minute
)

type burstKey struct {
	gpu  int
	kind string
}

type burst struct {
	start   time.Time
	n       int
	dropped int
}

// Allow counts a line of kind for gpu received at now and says whether it is
// within the burst limit. held is, when the line begins a new window, how
// many the previous window held back (0 otherwise): one line should say so.
// now is the line's receipt time from time.Now, so the window is measured on
// Go's monotonic clock and a wall-clock step neither stretches nor cuts it;
// it must not be a time without that reading.
func (k *KernelLines) Allow(gpu int, kind string, now time.Time) (ok bool, held int) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.bursts == nil {
		k.bursts = map[burstKey]*burst{}
	}
	key := burstKey{gpu, kind}
	b := k.bursts[key]
	if b == nil || now.Sub(b.start) >= KernelLineWindow {
		if b != nil {
			held = b.dropped
		}
		b = &burst{start: now}
		k.bursts[key] = b
	}
	b.n++
	ok = b.n <= KernelLineBurst
	if !ok {
		b.dropped++
	}
	return ok, held
}

// A KernelLine is a kernel log record that is not an Xid but tells of a
// GPU's trouble, taken apart (one of AER and NVRM is set: an AER line on
// the GPU's PCIe path, or an NVRM failure line) and attributed by the
// caller, which knows the GPUs' bus ids and PCIe paths, to the GPU it
// concerns. An AER line reported by a bridge concerns every GPU below it:
// it is one KernelLine for each.
type KernelLine struct {
	Rec  kmsg.Record
	Read time.Time // when it was read, from time.Now (KernelLines.Allow)
	GPU  int       // the GPU's index; -1: none monitored
	Bus  string    // the GPU's bus id, or the line's own address when no GPU is monitored there; "" unknown
	AER  *kmsg.AERReport
	NVRM *kmsg.NVRMReport
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
// (KernelLines: then Held, and no incident), after the line that sums up
// the previous window's held lines when this one begins a new window; the
// incident it raises (an uncorrectable AER error, every NVRM failure line),
// of when the kernel logged it for a line read after the fact.
func (s *Stage) KernelLine(l KernelLine) Record {
	line := sink.Event{Time: l.Read, GPU: l.GPU, Bus: l.Bus, Source: reading.SourceKmsg.String()}
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
	default:
		return Record{}
	}
	line.Fields = lineTail(line.Fields, true, l.Rec)
	var r Record
	ok, held := s.limit.Allow(l.GPU, kind, l.Read)
	if held > 0 {
		r.Lines = append(r.Lines, sink.Event{Time: l.Read, GPU: l.GPU, Source: line.Source, Type: sink.TypeKernelLinesSuppressed,
			Fields: sink.KV("kind", kind, "lines", strconv.Itoa(held), "window", KernelLineWindow.String())})
	}
	if !ok {
		r.Held, r.FirstHeld = kind, s.kernelHeld.Add(1) == 1
		return r
	}
	s.kernelLines.Add(1)
	r.Lines = append(r.Lines, line)
	if ev != nil {
		// A line read after the fact happened when the kernel logged it;
		// its events.log line is stamped when it was read, with that ktime.
		ev.Time = s.clock.LoggedAt(l.Read, l.Rec.Time, l.Rec.Backlog)
		r.Critical, r.Alert, r.Reason = ev, Error, ev.Reason
	}
	return r
}
