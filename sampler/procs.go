package sampler

import (
	"cmp"
	"context"
	"log/slog"
	"slices"
	"sync/atomic"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpu-telemetry/gpu-telemetry/proc"
	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

// ProcConfig tunes the per-GPU process reader.
type ProcConfig struct {
	// Deadline: a read still inside NVML after this long is reported hung.
	Deadline time.Duration
	// ProcRoot is where /proc is mounted ("/proc"); tests point it elsewhere.
	ProcRoot string
}

// ProcReader reads one GPU's running processes about once a second on a
// goroutine of its own: these calls cost milliseconds on a real driver, so
// they are never part of the sample, and one stuck in the driver delays
// neither the rows nor the other GPUs. At most one read is in flight; one
// past the deadline is published as hung (keeping the last good list).
type ProcReader struct {
	gpu *GPU
	cfg ProcConfig
	capCache

	kick   chan struct{}
	busy   atomic.Bool
	start  atomic.Pointer[readStart]
	latest atomic.Pointer[reading.Procs]

	// Owned by the reading goroutine.
	off     [maxFns]int64   // capability cache by function
	lastTS  uint64          // newest GetProcessUtilization timestamp seen (us)
	failing bool            // the last read failed: not logged again
	desc    *proc.Describer // names the listed processes from /proc
}

// readStart is when a read began: the wall time stamps it, the monotonic
// reading (Tick's) decides whether it is hung (Worker says why).
type readStart struct {
	wall time.Time
	mono time.Duration
}

// NewProcReader returns a reader for g. Nothing is read until Run's loop is
// kicked.
func NewProcReader(g *GPU, cfg ProcConfig, log *slog.Logger) *ProcReader {
	log = cmp.Or(log, slog.New(slog.DiscardHandler))
	cfg.ProcRoot = cmp.Or(cfg.ProcRoot, "/proc")
	p := &ProcReader{gpu: g, cfg: cfg, capCache: capCache{base: time.Now(), log: log.With("gpu", g.Info().Index), what: "process reading"},
		kick: make(chan struct{}, 1), desc: proc.NewDescriber(cfg.ProcRoot)}
	p.latest.Store(&reading.Procs{GPU: g.Info().Index, Status: reading.ProcNotRead})
	return p
}

// Latest returns the most recent published read; never nil. Safe from any
// goroutine; it never waits on NVML.
func (p *ProcReader) Latest() *reading.Procs { return p.latest.Load() }

// Run reads when kicked until ctx is cancelled. A read stuck in the driver
// keeps Run with it; callers must not wait for Run without a deadline.
func (p *ProcReader) Run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-p.kick:
		}
		r := p.read(p.start.Load().wall)
		p.latest.Store(r)
		p.busy.Store(false)
	}
}

// Tick is called about once a second (from one goroutine for all GPUs) at
// wall time now and monotonic reading mono (as Worker's). It starts a read,
// stamped now, when none is in flight and start is true, and publishes
// "hung" for a read past the deadline. It never waits on NVML.
func (p *ProcReader) Tick(now time.Time, mono time.Duration, start bool) {
	if !p.busy.Load() {
		if start && p.busy.CompareAndSwap(false, true) {
			p.start.Store(&readStart{wall: now, mono: mono})
			p.kick <- struct{}{}
		}
		return
	}
	st, last := p.start.Load(), p.latest.Load()
	if mono-st.mono < p.cfg.Deadline || last.Status == reading.ProcHung {
		return
	}
	fn := Fn(p.cur.Load())
	if fn == FnNone {
		return // late for another reason (reading /proc): not the driver
	}
	if !p.latest.CompareAndSwap(last, &reading.Procs{GPU: p.gpu.Info().Index, Time: st.wall, Status: reading.ProcHung,
		Err: fn.String() + " stuck", LastOK: last.Good()}) {
		return // the read came back meanwhile
	}
	p.gpu.reg.Inc(procReadsHung)
	p.log.Warn("process list read hung; no process data until it returns", "function", fn.String(), "since", st.wall)
}

// Snapshot returns what a crash snapshot should say about the processes at
// mono: the latest read or, when a read has been in the driver for
// stuckAfter but not reported hung yet (a GSP fault takes the process
// calls down before their deadline), a hung read keeping the last good list.
func (p *ProcReader) Snapshot(mono, stuckAfter time.Duration) *reading.Procs {
	l := p.latest.Load()
	fn := Fn(p.cur.Load())
	if !p.busy.Load() || fn == FnNone || l.Status == reading.ProcHung {
		return l
	}
	st := p.start.Load()
	if mono-st.mono < stuckAfter {
		return l
	}
	return &reading.Procs{GPU: l.GPU, Time: st.wall, Status: reading.ProcHung,
		Err: fn.String() + " not returned yet", LastOK: l.Good()}
}

// Busy reports whether a read is in flight and, if so, whether it is inside
// an NVML call (shutdown must not call nvmlShutdown under a stuck call).
func (p *ProcReader) Busy() (busy, inNVML bool) {
	busy = p.busy.Load()
	return busy, busy && Fn(p.cur.Load()) != FnNone
}

func (p *ProcReader) can(fn Fn) bool {
	return p.gpu.syms.Has(fn) && p.on(p.off[fn])
}

// procCall runs f as fn, marking it in flight, and classifies its result.
func procCall[T any](p *ProcReader, fn Fn, f func() (T, nvml.Return)) (T, Class, nvml.Return) {
	p.begin(fn)
	v, ret := f()
	p.begin(FnNone)
	return v, p.note(fn, &p.off[fn], ret, p.gpu.cfg.Reprobe), ret
}

// read makes one round of process calls.
func (p *ProcReader) read(start time.Time) *reading.Procs {
	out := &reading.Procs{GPU: p.gpu.Info().Index, Time: start}
	dev := p.gpu.Device()
	if dev == nil {
		out.Status, out.Err = reading.ProcFailed, "no handle for this GPU"
		return p.finish(out)
	}

	byPID := map[uint32]*reading.Process{}
	answered, refused := 0, 0
	lists := [...]struct {
		fn   Fn
		kind reading.ProcKind
		get  func() ([]nvml.ProcessInfo, nvml.Return)
	}{
		{FnProcesses, reading.ProcCompute, dev.GetComputeRunningProcesses},
		{FnGraphicsProcesses, reading.ProcGraphics, dev.GetGraphicsRunningProcesses},
	}
	for _, l := range lists {
		if !p.can(l.fn) {
			refused++
			continue
		}
		infos, c, ret := procCall(p, l.fn, l.get)
		switch {
		case c == ClassOK:
			answered++
		case c.capability():
			refused++
			continue
		default:
			out.Status, out.Err = reading.ProcFailed, l.fn.String()+": "+retText(ret)
			return p.finish(out)
		}
		for _, in := range infos {
			pr := byPID[in.Pid]
			if pr == nil {
				pr = &reading.Process{PID: in.Pid}
				byPID[in.Pid] = pr
			}
			pr.Kind |= l.kind
			// NVML_VALUE_NOT_AVAILABLE (all ones) without permission or
			// under some virtualisation: absent, not a huge number.
			if in.UsedGpuMemory != ^uint64(0) {
				pr.MemBytes = reading.Some(pr.MemBytes.V + in.UsedGpuMemory)
			}
		}
	}
	if answered == 0 {
		out.Status, out.Err = reading.ProcUnsupported, "process lists not available from this driver"
		return p.finish(out)
	}
	out.List = make([]reading.Process, 0, len(byPID))
	for _, pr := range byPID {
		out.List = append(out.List, *pr)
	}
	slices.SortFunc(out.List, func(a, b reading.Process) int { return cmp.Compare(a.PID, b.PID) })
	p.readUtil(dev, out.List)
	p.desc.Describe(out.List, start)
	out.Status = reading.ProcOK
	return p.finish(out)
}

// finish logs a change between success and failure once and links the last
// good read.
func (p *ProcReader) finish(out *reading.Procs) *reading.Procs {
	if out.Status == reading.ProcOK {
		if p.failing {
			p.log.Info("process list readable again")
		}
		p.failing = false
		return out
	}
	out.LastOK = p.latest.Load().Good() // the published read's (a hung one keeps it too)
	if out.Status == reading.ProcFailed {
		p.gpu.reg.Inc(procReadsFailed)
		if !p.failing {
			p.failing = true
			p.log.Warn("process list read failed; no process data", "error", out.Err)
		}
	}
	return out
}

// readUtil fills SM and memory busy per process: the average of the
// samples NVML took since the last read. It returns samples only for
// processes that ran (NOT_FOUND: none did), so once the call answered a
// listed process without one was idle: a real 0.
func (p *ProcReader) readUtil(dev Device, list []reading.Process) {
	if len(list) == 0 || !p.can(FnProcessUtil) {
		return
	}
	samples, c, ret := procCall(p, FnProcessUtil, func() ([]nvml.ProcessUtilizationSample, nvml.Return) {
		return dev.GetProcessUtilization(p.lastTS)
	})
	if c != ClassOK && ret != nvml.ERROR_NOT_FOUND {
		return
	}
	type acc struct{ sm, mem, n uint64 }
	sum := map[uint32]acc{}
	for _, s := range samples {
		p.lastTS = max(p.lastTS, s.TimeStamp)
		if s.SmUtil > maxPercent || s.MemUtil > maxPercent {
			continue // garbage from a driver in trouble
		}
		a := sum[s.Pid]
		sum[s.Pid] = acc{a.sm + uint64(s.SmUtil), a.mem + uint64(s.MemUtil), a.n + 1}
	}
	for i := range list {
		list[i].UtilSupported = true
		list[i].SMUtil, list[i].MemUtil = reading.Some(uint32(0)), reading.Some(uint32(0))
		if a, ok := sum[list[i].PID]; ok {
			list[i].SMUtil = reading.Some(uint32((a.sm + a.n/2) / a.n))
			list[i].MemUtil = reading.Some(uint32((a.mem + a.n/2) / a.n))
		}
	}
}
