package sampler

import (
	"cmp"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

// Probe measures what each NVML call the sampler makes costs on this host,
// for `gpu-telemetry probe`: only reads, through the daemon's own executor,
// each call under a deadline (a GPU whose call does not return in time is
// reported hung and left alone). Each call kind is made Calls times per
// GPU, GPU by GPU (the driver's own cost), then on every GPU at once (what
// a tick sees: a driver-wide lock shows as a higher "together" figure).

// ProbeOptions configure Probe.
type ProbeOptions struct {
	Calls     int           // calls per kind and GPU in each phase (default 200)
	Deadline  time.Duration // per call, as the daemon's --deadline
	Interval  time.Duration // the poll interval the estimate is for
	SlowEvery int           // the slow tier's period in samples (DefaultConfig)
}

// ProbeStat is the latency of one call kind on one GPU in one phase.
type ProbeStat struct {
	N        int           // calls timed
	P50, P99 time.Duration // 0 when N is 0
	Err      string        // the driver refused the call (not timed)
}

// ProbeKind is one call kind: its name, how often a GPU-sample makes it
// (averaged over the slow tier's period), and its latency per GPU.
type ProbeKind struct {
	Name         string
	PerSample    float64 // calls per GPU-sample, every column at its normal rate
	PerSampleTop float64 // calls per GPU-sample at the pacer's top level (precursors only, mostly)
	Alone        []ProbeStat
	Together     []ProbeStat
}

// ProbeReport is Probe's result.
type ProbeReport struct {
	Driver, NVML string
	GPUs         []int         // indexes probed
	Hung         []string      // per GPU: "" or the function that did not return in time
	Silent       []ProbeSilent // did not answer at start (no handle): not probed
	Opts         ProbeOptions
	Kinds        []ProbeKind
}

// ProbeSilent is a GPU that did not answer at start.
type ProbeSilent struct {
	GPU int    // its index
	Why string // GPU.StaticProblem: the call it is stuck in, or the error
}

// Stuck lists the indexes of the GPUs silent at start or hung.
func (r ProbeReport) Stuck() []int {
	var out []int
	for _, s := range r.Silent {
		out = append(out, s.GPU)
	}
	for i, f := range r.Hung {
		if f != "" {
			out = append(out, r.GPUs[i])
		}
	}
	slices.Sort(out)
	return out
}

// probeCall is a call of the sample plan to time (fan calls: fan 0 only).
type probeCall struct {
	c    call
	name string
}

// procEvery: the process reader reads about once a second (procs.go).
const procEvery = time.Second

// Probe measures h's GPUs, in about Calls x kinds x GPUs x the call
// latency, twice.
func Probe(h *Host, o ProbeOptions) ProbeReport {
	if o.Calls <= 0 {
		o.Calls = 200
	}
	if o.SlowEvery < 1 {
		o.SlowEvery = 1
	}
	rep := ProbeReport{Driver: h.System.DriverVersion, NVML: h.System.NVMLVersion, Opts: o}
	var gpus []*GPU
	for _, g := range h.GPUs {
		if g.Device() == nil { // never answered at start: nothing to time
			why, _ := g.StaticProblem()
			rep.Silent = append(rep.Silent, ProbeSilent{GPU: g.Info().Index, Why: why})
			continue
		}
		gpus = append(gpus, g)
		rep.GPUs = append(rep.GPUs, g.Info().Index)
	}
	rep.Hung = make([]string, len(gpus))
	p := &prober{o: o, rep: &rep, gpus: gpus, base: time.Now(), st: make([]probeGPU, len(gpus))}
	if o.Deadline <= 0 {
		p.o.Deadline = time.Second
	}
	if len(gpus) > 0 {
		p.phase(0, 1, p.learn)
	}
	p.calls = probeCalls(gpus) // none without GPUs
	for _, pc := range p.calls {
		k := ProbeKind{Name: pc.name, Alone: make([]ProbeStat, len(gpus)), Together: make([]ProbeStat, len(gpus))}
		if pc.c == cProcs {
			k.PerSample = float64(o.Interval) / float64(procEvery) * procCallsPerRead
			k.PerSampleTop = k.PerSample
		} else {
			k.PerSample = perSample(gpus[0], pc.c, o.SlowEvery, 0)
			k.PerSampleTop = perSample(gpus[0], pc.c, o.SlowEvery, len(stretchLevels)-1)
		}
		rep.Kinds = append(rep.Kinds, k)
	}
	for i := range gpus {
		p.phase(i, i+1, func(i int) { p.gpu(i, false) })
	}
	p.phase(0, len(gpus), func(i int) { p.gpu(i, true) })
	for i := range gpus {
		if p.hung(i) {
			rep.Hung[i] = p.st[i].name
		}
	}
	return rep
}

// cProcs stands for the process reader's calls, timed as one kind.
const cProcs = maxCalls

// procCallsPerRead: a process read makes the two process lists' calls and
// nvmlDeviceGetProcessUtilization.
const procCallsPerRead = 3

// probeCalls lists the call kinds the GPUs' plans can make, present in the
// driver, of a reading's calls only the one its samples make (sampleCall).
func probeCalls(gpus []*GPU) []probeCall {
	if len(gpus) == 0 {
		return nil
	}
	g := gpus[0]
	var out []probeCall
	for c := call(0); c < numCalls; c++ {
		d := &callFn[c]
		if !g.knows(d.fn, d.idx) || !g.sampleCall(c) {
			continue
		}
		if d.fan && (d.idx > 0 || g.Info().NumFans == 0) {
			continue // fans 1..: same function as fan 0; no fans: not made
		}
		name := d.name
		if c == cFields {
			name += "(" + strconv.Itoa(len(fieldReadings)) + " fields)"
		}
		out = append(out, probeCall{c, name})
	}
	if g.syms.Has(FnProcesses) {
		out = append(out, probeCall{cProcs, "process lists + utilization (per GPU, ~1/s)"})
	}
	return out
}

// sampleCall reports whether the samples make call c for its readings. Of
// a getter reading's calls that stand in for one another (chainOf), that
// is the first not refused (for its struct version, or as not supported
// by the GPU until its re-probe: learn, as plan picks it; an R550's
// versioned fabric call with the v2 struct, the clocks' throttle reasons
// where the GPU refuses the event reasons), or where each is refused (a
// GPU of no fabric), the newest the driver knows, which the re-probes make
// first. Of a fan's, the newest whose symbol the library has (plan).
func (g *GPU) sampleCall(c call) bool {
	chain := chainOf(c)
	if chain == nil {
		return !g.hasNewer(c)
	}
	i := slices.IndexFunc(chain, func(o call) bool { return g.can(callFn[o].fn, callFn[o].idx) })
	if i < 0 {
		i = slices.IndexFunc(chain, func(o call) bool { return g.knows(callFn[o].fn, callFn[o].idx) })
	}
	return i >= 0 && chain[i] == c
}

// hasNewer reports whether the driver has, and knows the struct of, a
// newer call that older driver's call c stands in for.
func (g *GPU) hasNewer(c call) bool {
	for n := callFn[c].newer; n != 0; n = callFn[n].newer {
		if g.knows(callFn[n].fn, callFn[n].idx) {
			return true
		}
	}
	return false
}

// chainOf returns the calls, newest first, of the getter reading with
// call c whose calls stand in for one another: refused, the batch makes
// the next in the same sample (raw.older); nil: c is no such call (a
// fan's older call is made only where the newer's symbol is missing).
func chainOf(c call) []call {
	for _, gr := range getterReadings {
		if len(gr.calls) > 1 && slices.Contains(gr.calls, c) {
			return gr.calls
		}
	}
	return nil
}

// learn makes once, on GPU i, each of a getter reading's calls that stand
// in for one another (chainOf), newest first, and notes its result as a
// sample does (capCache.note: a struct version refused is off for good, a
// call the GPU does not support off until its re-probe; the batch makes
// the older call instead, raw.older): probeCalls then lists, of each
// reading's calls, the one this driver's samples make on GPU i
// (sampleCall), and perSample counts it (none of a GPU of no fabric, which
// refuses each: they are made at re-probes only). A function the driver
// lacks is found by its symbol.
func (p *prober) learn(i int) {
	g := p.gpus[i]
	x := g.exec.Load()
	if x == nil {
		return
	}
	var r raw
	for c := cFields + 1; c < numCalls; c++ {
		d := &callFn[c]
		if chainOf(c) == nil || !g.can(d.fn, d.idx) {
			continue
		}
		ret, _, ok := p.timed(i, x, &r, c, d.name)
		if !ok {
			return
		}
		g.note(d.fn, &g.off[d.fn][d.idx], ret, g.cfg.Reprobe)
	}
}

// perSample counts how often the plan at level lvl makes call c (for a fan
// call: on every fan), averaged over the slow tier's longest period there.
func perSample(g *GPU, c call, slowEvery, lvl int) float64 {
	l := stretchLevels[lvl]
	period := slowEvery * max(l.slowMult, l.secondary)
	fans := min(g.Info().NumFans, reading.MaxFans)
	var r raw
	n := 0
	// A static reading is read once, not per sample: planned as given.
	carry := g.carry
	defer func() { g.carry = carry }()
	for id := range reading.Table {
		if reading.Table[id].Tier == reading.Static {
			g.carry[id] = reading.Some[uint64](0)
		}
	}
	for s := 1; s <= period; s++ { // sample 0 reads everything: not typical
		slow, second := due(uint64(s), g.Info().Index, slowEvery, lvl)
		g.plan(&r, fans, slow, second)
		if callFn[c].fan && callFn[c].newer == 0 {
			for f := range fans {
				if r.plan&(1<<(c+call(f))) != 0 {
					n++
				}
			}
		} else if r.plan&(1<<c) != 0 {
			n++
		}
	}
	return float64(n) / float64(period)
}

type prober struct {
	o     ProbeOptions
	calls []probeCall
	rep   *ProbeReport
	gpus  []*GPU
	base  time.Time // the origin of probeGPU.since
	st    []probeGPU
}

// probeGPU is a GPU's progress: since is when its call in flight began
// (ns since base, plus one; 0: none; -1: it passed the deadline and the
// GPU is left alone: the one who swaps it decides), name that call's.
type probeGPU struct {
	since atomic.Int64
	name  string
	done  atomic.Bool // the GPU finished the current phase
}

func (p *prober) mono() int64     { return int64(time.Since(p.base)) + 1 }
func (p *prober) hung(i int) bool { return p.st[i].since.Load() < 0 }

// phase runs f (learn, or the timing of every call kind) on GPUs from..to-1
// at once (one goroutine each) and returns when each has finished or has
// a call past the deadline.
func (p *prober) phase(from, to int, f func(i int)) {
	for i := from; i < to; i++ {
		p.st[i].done.Store(p.hung(i))
		if !p.hung(i) {
			go func() {
				f(i)
				p.st[i].done.Store(true)
			}()
		}
	}
	tick := time.NewTicker(max(p.o.Deadline/20, time.Millisecond))
	defer tick.Stop()
	for range tick.C {
		finished := true
		for i := from; i < to; i++ {
			s := &p.st[i]
			if t := s.since.Load(); s.done.Load() || t > 0 && p.mono()-t > int64(p.o.Deadline) && s.since.CompareAndSwap(t, -1) {
				continue // a hung GPU's goroutine stays in the driver; nothing more is asked of it
			}
			finished = false
		}
		if finished {
			return
		}
	}
}

// gpu times every kind on GPU i.
func (p *prober) gpu(i int, together bool) {
	g := p.gpus[i]
	x := g.exec.Load() // the daemon's own executor: the figures are what its calls cost
	buf := make([]time.Duration, 0, p.o.Calls)
	var r raw
	for k, pc := range p.calls {
		st := &p.rep.Kinds[k].Alone[i]
		if together {
			st = &p.rep.Kinds[k].Together[i]
		}
		if x == nil && pc.c != cProcs { // the process reader's calls do not go through it
			*st = ProbeStat{Err: cmp.Or(g.StaticErr(), g.execError())}
			continue
		}
		buf = buf[:0]
		var errText string
		for range p.o.Calls {
			ret, d, ok := p.timed(i, x, &r, pc.c, pc.name)
			if !ok {
				return // too late: the GPU was given up on
			}
			if c := Classify(ret); c.capability() || c == ClassGPULost {
				errText = retText(ret)
				break
			}
			buf = append(buf, d)
		}
		*st = stat(buf)
		st.Err = errText
	}
}

// timed makes call c (named name) once on GPU i and returns its result
// and how long it took; false: it did not return within the deadline, and
// the GPU is given up on.
func (p *prober) timed(i int, x *nativeExec, r *raw, c call, name string) (nvml.Return, time.Duration, bool) {
	s := &p.st[i]
	s.name = name
	start := p.mono()
	s.since.Store(start)
	ret := p.one(p.gpus[i], x, r, c)
	d := time.Duration(p.mono() - start)
	return ret, d, s.since.CompareAndSwap(start, 0)
}

// one makes call c once through the daemon's executor (the process reader's calls
// directly) and returns its result.
func (p *prober) one(g *GPU, x *nativeExec, r *raw, c call) nvml.Return {
	if c == cProcs {
		d := g.Device()
		_, ret := d.GetComputeRunningProcesses()
		d.GetGraphicsRunningProcesses()
		d.GetProcessUtilization(0)
		return ret
	}
	r.plan, r.fallback = 1<<c, 0
	if c == cFields {
		g.buildFields(r, true, true)
	}
	x.run(r)
	return nvml.Return(r.ret[c])
}

func stat(d []time.Duration) ProbeStat {
	if len(d) == 0 {
		return ProbeStat{}
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return ProbeStat{N: len(s), P50: s[len(s)/2], P99: s[min(len(s)*99/100, len(s)-1)]}
}
