package atop

import (
	"cmp"
	"log/slog"
	"slices"
	"strings"
	"sync"

	"github.com/gpu-telemetry/gpu-telemetry/internal/counters"
	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

// na is what atop's protocol sends for a counter the GPU does not maintain
// (atop shows it as N/A).
const na = -1

// maxExitedPerClient bounds the exited-process records kept for one client
// between two of its requests (a client that connects and never asks again
// must not make the daemon grow). The oldest are dropped, counted and logged.
const maxExitedPerClient = 4096

// procStat is atopgpud's per-process record on one GPU, with the figures of
// both API versions (format.go's procLayouts pick them). Only a new process read
// is folded in: a second without one (reads stretched by the pacer, a GPU
// backing off) changes no sum and no count, so atop sees no growth rather
// than the last read again.
type procStat struct {
	pid     uint32
	kind    byte  // version 2: 'C' compute, 'G' graphics (a process in both lists is 'C')
	gpuBusy int64 // % of the last read (-1: not available)
	memBusy int64 // % of the last read (-1: not available)
	timeMs  int64 // accounting time; always -1 (accounting mode is never switched on)
	memNow  int64 // KiB of the last read (-1: not available)
	// version 1: memory summed over the reads that had a memory figure
	// (KiB; -1 while never reported) and their count, its own divisor
	memCum int64
	sample int64
	// Version 2 has one divisor, seen, for all three sums (atop divides each
	// sum's growth by seen's growth). A read counts (seen grows and its
	// figures are added) only when it has every figure this process had in
	// an earlier read: a read without one (the utilization call failed
	// this time) adds nothing, so no average is diluted by reads that lacked
	// its figure. A figure reported for the first time after counted reads
	// without it is averaged over those once (sums atop has seen cannot be
	// taken back); from then on every counted read has it. Sums are -1 while
	// never reported.
	hadBusy, hadMemBusy, hadMem        bool
	gpuBusyCum, memBusyCum, memCumSeen int64
	seen                               int64
}

// kindChar is a process kind as atop 2.13 shows it. atop's type has no
// "both": a process in both lists is shown as computing.
func kindChar(k reading.ProcKind) byte {
	switch {
	case k&reading.ProcCompute != 0:
		return 'C'
	case k&reading.ProcGraphics != 0:
		return 'G'
	}
	return 'U'
}

// gpuStat is atopgpud's per-GPU record, accumulated per second.
type gpuStat struct {
	busID, name string
	tasks       int // task-support bits: 1 = process lists (COMPUTE); 2 (ACCOUNT) is never set

	secN                   int    // rows in the second being collected
	busy, memBusy, memUsed figure // memUsed in KiB
	memTotal               int64  // KiB
	samples                int64
	procsKnown             bool

	lastProcs *reading.Procs // the slow tier's latest read
	folded    *reading.Procs // the read last folded in (a read is folded once)
	procs     map[uint32]*procStat
}

// figure is one of atopgpud's per-GPU figures: the sum and count of the
// values in the second being collected (from the 100 ms rows), the last
// second's mean (now; na when no row had it) and the sum of those means
// (cum; na before the first).
type figure struct {
	sum, n, now, cum int64
}

func (f *figure) add(v int64) { f.sum, f.n = f.sum+v, f.n+1 }

// close ends the second: its mean, rounded, is now and is added to cum.
func (f *figure) close() {
	f.now = na
	if f.n > 0 {
		f.now = (f.sum + f.n/2) / f.n
		f.cum = max(f.cum, 0) + f.now
	}
	f.sum, f.n = 0, 0
}

// Client is one connected client's bookkeeping: the processes that exited
// since its last 'S' request (each client sees every exit once).
type Client struct {
	exited [][]procStat // per GPU
}

// Accumulator keeps atopgpud's counters for every GPU. Sample and Procs feed
// it; Second closes a second (call it once a second); the formatters read it.
// All methods are safe from any goroutine and never block on NVML.
type Accumulator struct {
	mu      sync.Mutex
	log     *slog.Logger
	gpus    []gpuStat
	pos     map[int]int // NVML index -> position in gpus (atop's GPU number)
	clients map[*Client]struct{}
	counts  *counters.Registry // the registry it counts atop_exits_dropped in (counters.go)
}

// NewAccumulator returns an accumulator for the monitored GPUs, in the order
// atop will number them, counting in reg (required).
func NewAccumulator(gpus []reading.GPU, log *slog.Logger, reg *counters.Registry) *Accumulator {
	counters.Need(reg, "atop.NewAccumulator's registry")
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	a := &Accumulator{log: log, clients: map[*Client]struct{}{}, pos: map[int]int{}, counts: reg}
	a.gpus = make([]gpuStat, len(gpus))
	for i, g := range gpus {
		a.pos[g.Index] = i
		a.gpus[i] = gpuStat{busID: field(g.BusID, "unknown"), name: field(g.Name, "unknown"),
			busy: figure{now: na, cum: na}, memBusy: figure{now: na, cum: na}, memUsed: figure{now: na, cum: na},
			memTotal: na, procs: map[uint32]*procStat{}}
	}
	return a
}

// field makes a string safe as one word of a reply: no separators of the
// protocol ('@', '#', space) and only printable ASCII.
func field(s, empty string) string {
	s = strings.TrimSpace(s)
	if s == "" {
		return empty
	}
	b := []byte(s)
	for i, c := range b {
		if c <= ' ' || c >= 0x7f || c == '@' || c == '#' {
			b[i] = '_'
		}
	}
	return string(b)
}

// slot returns the GPU with NVML index idx, or nil.
func (a *Accumulator) slot(idx int) *gpuStat {
	i, ok := a.pos[idx]
	if !ok {
		return nil
	}
	return &a.gpus[i]
}

// Sample adds one 100 ms row to the current second. It allocates nothing.
func (a *Accumulator) Sample(s *reading.Sample) {
	a.mu.Lock()
	defer a.mu.Unlock()
	g := a.slot(s.GPU)
	if g == nil || s.Status != reading.StatusAnswered {
		return
	}
	g.secN++
	if v, ok := s.U32(reading.GPUUtil).Get(); ok {
		g.busy.add(int64(v))
	}
	if v, ok := s.U32(reading.MemUtil).Get(); ok {
		g.memBusy.add(int64(v))
	}
	if v, ok := s.Values[reading.VRAMUsedBytes].Get(); ok {
		g.memUsed.add(int64(v / 1024))
	}
	if v, ok := s.Values[reading.VRAMTotalBytes].Get(); ok {
		g.memTotal = int64(v / 1024)
	}
}

// Info refreshes a GPU's bus id and name (a GPU stuck at start gets its
// static facts later; until then they read "unknown").
func (a *Accumulator) Info(g reading.GPU) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if s := a.slot(g.Index); s != nil {
		s.busID, s.name = field(g.BusID, "unknown"), field(g.Name, "unknown")
	}
}

// Procs records the slow tier's latest process read for its GPU; it is
// folded in at the next Second. Passing the same read again (no new read
// since) is allowed and folds nothing.
func (a *Accumulator) Procs(p *reading.Procs) {
	if p == nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if g := a.slot(p.GPU); g != nil {
		g.lastProcs = p
	}
}

// Second closes the current second on every GPU, as atopgpud's once-a-second
// scan does: the averages of the second's rows become the "now" figures and
// are added to the cumulative counters, and a new process list updates the
// per-process counters (a list already folded in is not added again). A
// process gone from a list is handed to every client as exited. A GPU with no row this second (hung, failed) keeps its
// counters and reports -1 as its "now" figures.
func (a *Accumulator) Second() {
	a.mu.Lock()
	defer a.mu.Unlock()
	for i := range a.gpus {
		g := &a.gpus[i]
		if g.secN > 0 {
			g.samples++
		}
		g.secN = 0
		g.busy.close()
		g.memBusy.close()
		g.memUsed.close()
		a.foldProcs(i, g)
	}
}

func addCum(cum, v int64, ever *bool) int64 {
	if !*ever {
		*ever = true
		return v
	}
	return cum + v
}

// foldProcs applies the latest process read to one GPU, once per read.
func (a *Accumulator) foldProcs(idx int, g *gpuStat) {
	p := g.lastProcs
	if p == nil || p == g.folded {
		return
	}
	g.folded = p
	g.procsKnown = p.Status == reading.ProcOK
	if p.Status == reading.ProcUnsupported {
		g.tasks = 0
	}
	if !g.procsKnown {
		// No process data (hung, failed): keep the counters; nobody is
		// declared exited on a guess.
		return
	}
	g.tasks = 1
	seen := make(map[uint32]bool, len(p.List))
	for i := range p.List {
		pr := &p.List[i]
		seen[pr.PID] = true
		st := g.procs[pr.PID]
		if st == nil {
			st = &procStat{pid: pr.PID, timeMs: na, memNow: na, memCum: na, gpuBusyCum: na, memBusyCum: na, memCumSeen: na}
			g.procs[pr.PID] = st
		}
		st.fold(pr)
	}
	for pid, st := range g.procs {
		if seen[pid] {
			continue
		}
		delete(g.procs, pid)
		for c := range a.clients {
			a.addExited(c, idx, *st)
		}
	}
}

// fold adds one new read of a process (see procStat for what counts).
func (st *procStat) fold(pr *reading.Process) {
	st.kind = kindChar(pr.Kind)
	st.gpuBusy, st.memBusy, st.memNow = na, na, na
	busy, hasBusy := pr.SMUtil.Get()
	memBusy, hasMemBusy := pr.MemUtil.Get()
	mem, hasMem := pr.MemBytes.Get()
	if hasBusy {
		st.gpuBusy = int64(busy)
	}
	if hasMemBusy {
		st.memBusy = int64(memBusy)
	}
	if hasMem {
		st.memNow = int64(mem / 1024)
		st.memCum = max(st.memCum, 0) + st.memNow
		st.sample++
	}
	if (st.hadBusy && !hasBusy) || (st.hadMemBusy && !hasMemBusy) || (st.hadMem && !hasMem) {
		return // not a version-2 sample: it lacks a figure earlier ones had
	}
	st.seen++
	if hasBusy {
		st.gpuBusyCum = addCum(st.gpuBusyCum, st.gpuBusy, &st.hadBusy)
	}
	if hasMemBusy {
		st.memBusyCum = addCum(st.memBusyCum, st.memBusy, &st.hadMemBusy)
	}
	if hasMem {
		st.memCumSeen = addCum(st.memCumSeen, st.memNow, &st.hadMem)
	}
}

func (a *Accumulator) addExited(c *Client, idx int, st procStat) {
	l := c.exited[idx]
	total := 0
	for _, e := range c.exited {
		total += len(e)
	}
	if total >= maxExitedPerClient {
		if a.counts.Add(exitsDropped, 1) == 1 {
			a.log.Warn("atop client not asking: oldest exited-process records dropped", "kept", maxExitedPerClient)
		}
		if len(l) == 0 {
			return // another GPU holds the backlog: this one is dropped
		}
		l = l[1:]
	}
	c.exited[idx] = append(l, st)
}

// Register adds a client; exits are kept for it from now on.
func (a *Accumulator) Register() *Client {
	a.mu.Lock()
	defer a.mu.Unlock()
	c := &Client{exited: make([][]procStat, len(a.gpus))}
	a.clients[c] = struct{}{}
	return c
}

// Unregister forgets a client.
func (a *Accumulator) Unregister(c *Client) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.clients, c)
}

// sortedProcs returns a GPU's active processes by PID (replies are
// deterministic).
func sortedProcs(g *gpuStat) []procStat {
	out := make([]procStat, 0, len(g.procs))
	for _, st := range g.procs {
		out = append(out, *st)
	}
	slices.SortFunc(out, func(x, y procStat) int { return cmp.Compare(x.pid, y.pid) })
	return out
}
