package monitor

import (
	"log/slog"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/internal/events"
	"github.com/gpu-telemetry/gpu-telemetry/kmsg"
	"github.com/gpu-telemetry/gpu-telemetry/reading"
	"github.com/gpu-telemetry/gpu-telemetry/sink"
	"github.com/gpu-telemetry/gpu-telemetry/snapshot"
)

// Kernel lines other than Xids (PCIe AER, fallen off the bus without an Xid,
// RmInitAdapter failed, GSP timeout and crash reports) go to events.log with
// the GPU they concern; the serious ones are critical events.

// kernelLines is the monitor's state for these lines. The zero value is
// ready; the AER path table is built from sysfs on first use, and again on
// the next use after a GPU stuck at start gave its bus id (stale).
type kernelLines struct {
	paths *kmsg.AERPaths // the kernel log goroutine's only
	stale atomic.Bool    // set by staticKnown: paths lacks a GPU

	mu    sync.Mutex
	nums  kmsg.GPUNumbers
	limit events.KernelLines // lines per GPU and kind a minute

	written    lossCounter // not a loss: lines written (kernel_lines)
	suppressed lossCounter // lines over the burst limit
}

// initPaths reads which bridges lead to each GPU whose bus id is known: on
// first use, and again once a GPU stuck at start has given its bus id. It
// runs on the kernel log goroutine.
func (m *Monitor) initPaths() {
	k := &m.kern
	if k.paths != nil && !k.stale.Swap(false) {
		return
	}
	k.paths = kmsg.NewAERPaths()
	dir := filepath.Join(m.cfg.HostRoot, kmsg.DefaultPCIDevices)
	for _, gs := range m.gpus {
		a, err := reading.ParsePCIAddr(gs.busID())
		if err != nil {
			continue
		}
		bridges, err := kmsg.PCIPath(dir, a)
		if err != nil {
			// No sysfs (a container, the simulated driver): AER lines
			// naming the GPU itself still match.
			m.log.Debug("no PCI path for the GPU; AER lines on its bridges will not be matched", "gpu", gs.idx, "error", err)
		}
		k.paths.Add(gs.idx, a, bridges)
	}
}

// learnXid notes the driver's GPU number an Xid line names (GSP lines name
// the GPU only by that number).
func (m *Monitor) learnXid(x kmsg.XidReport) {
	m.kern.mu.Lock()
	m.kern.nums.Learn(x)
	m.kern.mu.Unlock()
}

// onKernelLine handles a kernel record that is not an Xid: an AER line or an
// NVRM failure line is written to events.log for its GPU(s), and taken as a
// critical event when it is one. Anything else is ignored.
func (m *Monitor) onKernelLine(rec kmsg.Record, now time.Time) {
	ktime := events.KernelTimeField(rec.Time)
	// The incident's time: a line read after the fact happened when the
	// kernel logged it (its events.log line is stamped when it was read,
	// with that ktime).
	at := m.ev.LoggedAt(now, rec.Time, rec.Backlog)
	if r, ok := kmsg.ParseAER(rec.Message); ok {
		m.initPaths()
		gpus, _ := m.kern.paths.GPUs(r)
		if len(gpus) == 0 {
			return // another device's AER line
		}
		kv := sink.KV("severity", r.Severity.String(), "device", r.Device.String())
		if s, ok := r.Source.Get(); ok {
			kv = append(kv, sink.Field{Key: "reporter", Value: s.String()})
		}
		kv = append(kv, ktime, sink.Field{Key: "text", Value: kmsg.Printed(rec.Message)})
		if rec.Backlog {
			kv = append(kv, events.BacklogField)
		}
		for _, g := range gpus {
			gs := m.byIndex[g]
			if !m.kernelLineAllowed(g, "AER/"+r.Severity.String(), now) {
				continue
			}
			line := sink.Event{Time: now, GPU: g, Bus: gs.busID(), Source: "kmsg", Type: sink.TypeAER, Fields: kv}
			var d snapshot.Decision
			var plan *crashPlan
			if r.Severity.Uncorrectable() {
				d, plan = m.kernelCritical(gs, now, snapshot.Event{Time: at, Reason: "PCIe AER " + r.Severity.String() + " error on the GPU's path (kmsg)", Stage: snapshot.StageFault})
			}
			m.incidentLine(line, d)
			gs.crashSnapshot(plan)
		}
		return
	}
	r, ok := kmsg.ParseNVRM(rec.Message)
	if !ok {
		return
	}
	m.kern.mu.Lock()
	m.kern.nums.Resolve(&r)
	m.kern.mu.Unlock()
	gpu, bus := -1, ""
	if a, ok := r.Bus.Get(); ok {
		if gs := m.gpuByBus(a); gs != nil {
			gpu, bus = gs.idx, gs.busID()
		} else {
			bus = a.String()
		}
	}
	line := nvrmLines[r.Kind]
	if !m.kernelLineAllowed(gpu, line.typ, now) {
		return
	}
	ev := sink.Event{Time: now, GPU: gpu, Bus: bus, Source: "kmsg", Type: line.typ}
	if r.DriverGPU >= 0 {
		ev.Fields = append(ev.Fields, sink.Field{Key: "driver_gpu", Value: strconv.Itoa(r.DriverGPU)})
	}
	ev.Fields = append(ev.Fields, ktime, sink.Field{Key: "text", Value: kmsg.Printed(rec.Message)})
	if rec.Backlog {
		ev.Fields = append(ev.Fields, events.BacklogField)
	}
	var d snapshot.Decision
	var plan *crashPlan
	gs := m.byIndex[gpu]
	if gs != nil {
		d, plan = m.kernelCritical(gs, now, snapshot.Event{Time: at, What: line.what, Reason: line.reason, Stage: line.stage})
	} else {
		m.log.Warn("GPU failure line in the kernel log for a GPU that is not monitored", "line", rec.Message)
	}
	m.incidentLine(ev, d)
	if gs != nil {
		gs.crashSnapshot(plan)
	}
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

// kernelCritical makes a kernel line read at now a critical event of the
// GPU that happened at ev.Time (earlier for a line read after the fact).
// The caller writes the line, then builds the plan (incidentDesk.criticalEvent).
func (m *Monitor) kernelCritical(gs *gpuState, now time.Time, ev snapshot.Event) (snapshot.Decision, *crashPlan) {
	gs.log.Error("critical GPU event", "reason", ev.Reason)
	gs.nextTry.Store(0)
	return m.inc.criticalEvent(gs, now, ev)
}

// kernelLineAllowed counts a line of kind for gpu received at now and says
// whether it is within the burst limit (events.KernelLines): the lines over
// it are counted (kernel_lines_suppressed), and when a window with
// suppressed lines ends, one line says how many.
func (m *Monitor) kernelLineAllowed(gpu int, kind string, now time.Time) bool {
	k := &m.kern
	ok, summary := k.limit.Allow(gpu, kind, now)
	if summary > 0 {
		m.eventLine(sink.Event{Time: now, GPU: gpu, Source: "kmsg", Type: sink.TypeKernelLinesSuppressed,
			Fields: sink.KV("kind", kind, "lines", strconv.Itoa(summary), "window", events.KernelLineWindow.String())})
	}
	if ok {
		k.written.n.Add(1)
	} else {
		k.suppressed.add(m.log, "kernel_lines_suppressed", "a kernel log line (over "+strconv.Itoa(events.KernelLineBurst)+" of one kind per GPU per minute)",
			slog.Int("gpu", gpu), slog.String("kind", kind))
	}
	return ok
}
