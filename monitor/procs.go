package monitor

import (
	"slices"
	"strings"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/live"
	"github.com/gpu-telemetry/gpu-telemetry/live/atop"
	"github.com/gpu-telemetry/gpu-telemetry/reading"
	"github.com/gpu-telemetry/gpu-telemetry/sampler"
	"github.com/gpu-telemetry/gpu-telemetry/snapshot"
)

// procEvery is the slow tier's process cadence at the normal rate:
// atopgpud's once a second. A read inside the driver procStuckAfter when a
// crash snapshot is taken is reported as not returned (a real driver
// answers in milliseconds).
const (
	procEvery      = time.Second
	procStuckAfter = 250 * time.Millisecond
)

// procParts is the slow tier's process reads and atop's protocol.
type procParts struct {
	atop  *atop.Accumulator // nil without --atop
	srv   *atop.Server      // nil without --atop
	ticks int               // ticks per process read of a GPU at the normal rate
}

// setupProcs gives every GPU its process reader and, with --atop, the
// accumulator the atopgpud protocol is served from.
func (m *Monitor) setupProcs() {
	infos := make([]reading.GPU, 0, len(m.gpus))
	for _, gs := range m.gpus {
		gs.pr = sampler.NewProcReader(gs.g, sampler.ProcConfig{Deadline: m.cfg.Deadline, ProcRoot: m.cfg.ProcRoot}, m.log)
		infos = append(infos, gs.g.Info())
	}
	m.procs.ticks = max(1, int((procEvery+m.cfg.Interval/2)/m.cfg.Interval))
	if m.cfg.Atop != nil {
		m.procs.atop = atop.NewAccumulator(infos, m.log, m.reg)
		m.procs.srv = atop.NewServer(m.procs.atop, *m.cfg.Atop, m.log, m.reg)
	}
}

// procTick runs on the poll loop at tick k. A GPU's process read starts
// about once a second, on a different tick for each GPU, and less often
// while the pacer stretches the slow tier (counted); not at all while the
// GPU backs off (a faulted GPU answers only after long timeouts: its last
// read stays, with its age). Once a second atop's second closes with the
// latest lists. Nothing here waits on NVML.
func (m *Monitor) procTick(at instant, k uint64) {
	for i, gs := range m.gpus {
		answering := !gs.offAtTick
		due, held := m.host.Pacer.SlowDue(k, i, m.procs.ticks)
		if held && answering {
			m.reg.Inc(procsStretched)
		}
		gs.pr.Tick(at.Wall, at.Mono, due && answering)
		if p := gs.pr.Latest(); p != gs.procsShown {
			gs.procsShown = p
			gs.slot.Update(func(g *live.GPU) { g.Processes = p })
		}
	}
	if m.procs.atop == nil || k%uint64(m.procs.ticks) != 0 {
		return
	}
	if k > 0 {
		m.procs.atop.Second()
	}
	for _, gs := range m.gpus {
		m.procs.atop.Info(gs.g.Info())
		m.procs.atop.Procs(gs.pr.Latest())
	}
}

// procSection is the crash snapshot's "Processes on this GPU" section at
// when, from the latest read (never a new NVML call: the GPU may be hung).
func (gs *gpuState) procSection(when time.Time) []snapshot.Section {
	return []snapshot.Section{snapshot.ProcessesSection(gs.pr.Snapshot(gs.m.cfg.mono(), procStuckAfter), when)}
}

// jobs names the jobs on the GPU in its latest good process read, from
// memory, for an events.log field: "slurm job 4242 step 0; pod <uid>
// container <id>", or "".
func (gs *gpuState) jobs() string {
	good := gs.pr.Latest().Good()
	if good == nil {
		return ""
	}
	var out []string
	for i := range good.List {
		if j := good.List[i].Workload.String(); j != "" && !slices.Contains(out, j) {
			out = append(out, j)
		}
	}
	return strings.Join(out, "; ")
}
