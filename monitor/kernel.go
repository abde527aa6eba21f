package monitor

import (
	"errors"
	"log/slog"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/internal/counters"
	"github.com/gpu-telemetry/gpu-telemetry/internal/events"
	"github.com/gpu-telemetry/gpu-telemetry/kmsg"
	"github.com/gpu-telemetry/gpu-telemetry/reading"
	"github.com/gpu-telemetry/gpu-telemetry/xid"
)

// The NVSwitches' SXid lines, counted whether or not the burst limit writes
// them: status's host part and the metrics gpu_telemetry_sxids_total and
// gpu_telemetry_sxids_fatal_total. A fatal one is also the nvswitch_fatal
// health reason of every GPU on the fabric (sxid.go).
var (
	sxidsRead  = counters.Declare(counters.Def{Name: "sxids", Help: "NVSwitch SXid lines read from the kernel log (the switches', not a GPU's)"})
	sxidsFatal = counters.Declare(counters.Def{Name: "sxids_fatal", Help: "NVSwitch SXid lines of a code NVIDIA's catalog calls fatal (the switch port's traffic lost; a system restart resets the switch)"})
)

// What a kernel line makes (its events.log line, the burst limit, whether it
// is an incident) is the event stage's (events.Stage.KernelLine); the
// monitor tells which GPU a line names and carries the record out.

// kernelGPUs tells which monitored GPU a kernel line names: by its bus id
// (byBus), by a bridge on its PCIe path (AER lines), or by the driver's own
// GPU number (GSP lines).
type kernelGPUs struct {
	paths *kmsg.AERPaths  // the kernel log goroutine's only
	nums  kmsg.GPUNumbers // the kernel log goroutine's only
	stale atomic.Bool     // set by lateFacts: paths lacks a GPU
	// noFabric: a fatal SXid found no GPU on a fabric to attribute it to,
	// logged (once; sxidNoFabric).
	noFabric atomic.Bool

	// mu guards what the kernel log goroutine shares with a GPU stuck at
	// start, or whose bus id was unread then, that gives its bus id
	// (lateFacts, on its worker).
	mu    sync.Mutex
	byBus map[reading.PCIAddr]*gpuState // by PCI slot
}

// initPaths reads which bridges lead to each GPU whose bus id is known: on
// first use, and again once a GPU stuck at start has given its bus id
// (stale). Kernel log goroutine only.
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

// onKernelRecord handles one kernel log record, read at now: a driver's Xid
// line makes its events, any other goes to onKernelLine. Only the kernel's
// own records are read: one written from user space is anyone's text,
// however much it looks like the driver's.
func (m *Monitor) onKernelRecord(rec kmsg.Record, now time.Time) {
	if !rec.FromKernel() {
		return
	}
	x, err := kmsg.ParseDriverXid(rec.Message)
	switch {
	case errors.Is(err, kmsg.ErrNotXid):
		m.onKernelLine(rec, now) // AER, fallen off the bus, RmInitAdapter, GSP
	case err != nil:
		lose(m.reg, m.log, badXids, "an Xid line of the driver whose GPU address or code could not be read",
			slog.String("line", kmsg.Printed(rec.Message)), slog.String("error", err.Error()))
	default:
		m.kern.nums.Learn(x) // GSP lines name the GPU only by the driver's number
		for _, e := range m.kernelXidEvents(x, rec, now) {
			m.onEvent(e)
		}
	}
}

// onKernelLine handles a kernel record that is not an Xid: an AER line or
// an NVRM failure line (fallen off the bus, RmInitAdapter, GSP) goes
// through the event stage for each GPU it names, an NVSwitch's SXid line
// for its switch. Anything else is ignored.
func (m *Monitor) onKernelLine(rec kmsg.Record, now time.Time) {
	if r, ok := kmsg.ParseAER(rec.Message); ok {
		m.initPaths()
		gpus, _ := m.kern.paths.GPUs(r) // none: another device's
		for _, g := range gpus {
			gs := m.byIndex[g]
			m.kernelLine(gs, events.KernelLine{Rec: rec, Read: now, GPU: g, Bus: gs.busID(), AER: &r})
		}
		return
	}
	if x, ok := kmsg.ParseSXid(rec.Message); ok {
		m.reg.Inc(sxidsRead)
		m.kernelLine(nil, events.KernelLine{Rec: rec, Read: now, GPU: -1, Bus: x.Bus.String(), SXid: &x})
		if i, ok := xid.LookupSXid(x.Code); ok && i.Fatal {
			m.reg.Inc(sxidsFatal)
			m.fatalSXid(x, i, rec, now)
		}
		return
	}
	r, ok := kmsg.ParseNVRM(rec.Message)
	if !ok {
		return
	}
	m.kern.nums.Resolve(&r)
	l := events.KernelLine{Rec: rec, Read: now, GPU: -1, NVRM: &r}
	var gs *gpuState
	if a, ok := r.Bus.Get(); ok {
		if gs = m.gpuByBus(a); gs != nil {
			l.GPU, l.Bus = gs.idx, gs.busID()
		} else {
			l.Bus = a.String()
		}
	}
	m.kernelLine(gs, l)
}

// kernelLine carries out what the event stage makes of kernel line l for
// GPU gs (nil: not monitored).
func (m *Monitor) kernelLine(gs *gpuState, l events.KernelLine) {
	r := m.ev.KernelLine(l)
	if r.FirstHeld {
		logFirstLoss(m.log, "kernel_lines_suppressed", "a kernel log line (over "+strconv.Itoa(events.LineBurst)+" of one kind per GPU per minute)",
			slog.Int("gpu", l.GPU), slog.String("kind", r.Held))
	}
	var plan crashPlan
	switch {
	case r.Critical == nil:
	case gs == nil:
		m.log.Warn("GPU failure line in the kernel log for a GPU that is not monitored", "line", l.Rec.Message)
	default:
		gs.log.Error("critical GPU event", "reason", r.Reason)
		gs.nextTry.Store(0)
		plan = gs.criticalEvent(l.Read, *r.Critical)
	}
	if gs != nil && l.NVRM != nil && l.NVRM.Kind == kmsg.NVRMInitFailed {
		gs.judgeAction(l.Read, true, func(rp repairEvents) { rp.InitFailed() })
	}
	m.carryOut(gs, r, plan)
}
