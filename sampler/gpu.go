package sampler

import (
	"cmp"
	"encoding/binary"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpu-telemetry/gpu-telemetry/internal/counters"
	"github.com/gpu-telemetry/gpu-telemetry/internal/kclock"
	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

// Config tunes the per-GPU sampler.
type Config struct {
	// Reprobe is how long a reading (or a process reader's call) the driver
	// refused (not supported, no permission, function not found) stays off
	// before it is tried again.
	Reprobe time.Duration
	// SlowEvery: the slow tier is read on every SlowEvery-th sample and
	// carried forward in between.
	SlowEvery int
	// FieldWait bounds the wait for the process-wide GetFieldValues lock:
	// when another GPU's call is stuck holding it, this GPU falls back to
	// the individual calls.
	FieldWait time.Duration
	// Interval is the poll interval; > 0 gives the host's GPUs a shared
	// Pacer.
	Interval time.Duration
}

// DefaultConfig returns the defaults for a poll interval: the slow tier is
// read about once a second.
func DefaultConfig(interval time.Duration) Config {
	slow := 1
	if interval > 0 && interval < time.Second {
		slow = int((time.Second + interval/2) / interval)
	}
	return Config{Reprobe: 10 * time.Minute, SlowEvery: slow, FieldWait: 20 * time.Millisecond, Interval: interval}
}

// GPU samples one GPU. Sample must be called from one goroutine at a time (the
// GPU's Worker); InFlight may be called from any goroutine.
type GPU struct {
	info   atomic.Pointer[reading.GPU]
	named  chan struct{} // closed once info holds the GPU's UUID (publish)
	naming sync.Once
	dev    Device
	syms   *Symbols
	cfg    Config
	kclock kclock.Clock
	capCache

	// staticDone is closed once the static facts were read (nil: known from
	// the start); staticErr says why they could not be.
	staticDone  chan struct{}
	staticErr   atomic.Pointer[string]
	lib         Library // for retrying the start-up read
	native      *native // the library's side of the batch (shared)
	startNative func(*native, int, time.Duration) (*nativeExec, error)
	execErr     atomic.Pointer[string] // why the executor could not start; nil: it did
	nextStatic  time.Time              // worker only (reread): when to retry the start-up read
	rereading   atomic.Bool            // Host.Reidentify's read of a GPU --gpu did not select is in flight

	// hmu guards dev for other goroutines (the worker writes it only in
	// readStatic, under hmu).
	hmu sync.Mutex

	// When the sample that made the call in flight (cur) began, for hang
	// reports (one clock read per sample, not per call).
	callStart atomic.Int64 // ns since base

	reg      *counters.Registry
	execTold atomic.Bool // logged that the executor could not start (native_exec_failures)

	off      [maxFns][maxArgs]int64 // capability cache by (fn, fan or argument index)
	fieldOff [maxFields]int64       // and by field reading
	absurd   [maxFns]bool           // logged "absurd value" once
	// carry: each reading's value from the last sample that read its tier,
	// for the samples that do not; sensor0 the same for thermal sensor 0.
	carry   [reading.NumReadings]reading.Opt[uint64]
	sensor0 reading.Opt[reading.Sensor]

	exec atomic.Pointer[nativeExec] // set with the static facts
	raw  raw

	n      uint64 // samples taken
	pacer  *Pacer // nil: every column at its normal rate
	fanPol fanPolicies
	hlt    healthTier

	// Per-sample bookkeeping.
	attempts, fails int
	firstErr        Fn
	firstRet        nvml.Return
	lost            bool
}

// NewGPU wraps a device whose static facts are already known; it counts
// in reg.
func NewGPU(info reading.GPU, dev Device, syms *Symbols, cfg Config, kc kclock.Clock, reg *counters.Registry, log *slog.Logger) *GPU {
	if cfg.SlowEvery < 1 {
		cfg.SlowEvery = 1
	}
	log = cmp.Or(log, slog.New(slog.DiscardHandler))
	if info.NumFans > reading.MaxFans {
		log.Warn("more fans than recorded", "gpu", info.Index, "fans", info.NumFans, "recorded", reading.MaxFans)
	}
	g := &GPU{dev: dev, syms: syms, cfg: cfg, kclock: kc, reg: counters.Need(reg, "sampler.NewGPU's registry"), startNative: newNativeExec,
		capCache: capCache{base: time.Now(), log: log.With("gpu", info.Index), what: "reading"}, named: make(chan struct{})}
	g.publish(&info)
	return g
}

// publish makes info the GPU's facts (Info), closing named once they hold
// its UUID.
func (g *GPU) publish(info *reading.GPU) {
	g.info.Store(info)
	if info.UUID != "" {
		g.naming.Do(func() { close(g.named) })
	}
}

// Info returns the GPU's static facts (only the index until StaticDone).
func (g *GPU) Info() reading.GPU { return *g.info.Load() }

// StaticDone reports whether the static facts have been read (or given up on).
func (g *GPU) StaticDone() bool {
	select {
	case <-g.staticDone:
		return true
	default: // a nil staticDone: known from the start
		return g.staticDone == nil
	}
}

// StaticErr says why the static facts could not be read; "" when they were
// (or are not read yet).
func (g *GPU) StaticErr() string {
	if e := g.staticErr.Load(); e != nil && g.StaticDone() {
		return *e
	}
	return ""
}

func (g *GPU) setStaticErr(e string) { g.staticErr.Store(&e) }

// StaticProblem says why the static facts are not read: "stuck in <NVML
// function>" (stuck) while the start-up read has not returned, else
// StaticErr.
func (g *GPU) StaticProblem() (why string, stuck bool) {
	if !g.StaticDone() {
		fn, _, _ := g.InFlight()
		return "stuck in " + fn.String(), true
	}
	return g.StaticErr(), false
}

// execError says why the GPU has no executor.
func (g *GPU) execError() string {
	if e := g.execErr.Load(); e != nil {
		return *e
	}
	return "no executor (the GPU was not opened through a library)"
}

// Device returns the underlying device (events, snapshots); nil until the
// GPU's handle could be had.
func (g *GPU) Device() Device {
	g.hmu.Lock()
	defer g.hmu.Unlock()
	return g.dev
}

// InFlight reports the NVML function this GPU's goroutine is inside and when
// the sample that made the call began; ok is false when no call is in flight.
func (g *GPU) InFlight() (fn Fn, since time.Time, ok bool) {
	f := Fn(g.cur.Load())
	if x := g.exec.Load(); x != nil {
		if c := x.current(); c > 0 && c <= int32(numCalls) {
			f = callFn[c-1].fn
		}
	}
	if f == FnNone {
		return FnNone, time.Time{}, false
	}
	return f, g.base.Add(time.Duration(g.callStart.Load())), true
}

// can reports whether fn (for fan or sensor index idx) may be called now.
func (g *GPU) can(fn Fn, idx int) bool { return !g.lost && g.syms.Has(fn) && g.on(g.off[fn][idx]) }

// knows reports whether the driver has fn and knows the struct it is asked
// with for argument idx (not refused for its version: offForGood).
func (g *GPU) knows(fn Fn, idx int) bool { return g.syms.Has(fn) && g.off[fn][idx] != offForGood }

// started records when a sample or the start-up read began.
func (g *GPU) started(t time.Time) { g.callStart.Store(int64(t.Sub(g.base))) }

// end classifies the result of fn and reports whether it succeeded.
func (g *GPU) end(fn Fn, idx int, ret nvml.Return) bool {
	g.begin(FnNone)
	c := g.note(fn, &g.off[fn][idx], ret, g.cfg.Reprobe)
	if c.capability() {
		return false
	}
	if g.attempts++; c == ClassOK {
		return true
	}
	g.lost = g.lost || c == ClassGPULost
	g.fails++
	if g.firstErr == FnNone {
		g.firstErr, g.firstRet = fn, ret
	}
	return false
}

// within reports whether v is in [lo, hi]; otherwise the reading is absent
// and the first occurrence is logged. Drivers in trouble report values such
// as 4294967295 C; recording them would poison peaks and detectors.
func (g *GPU) within(fn Fn, v, lo, hi uint64) bool {
	if v >= lo && v <= hi {
		return true
	}
	if !g.absurd[fn] {
		g.absurd[fn] = true
		g.log.Warn("absurd value from driver ignored", "function", fn.String(), "value", v, "min", lo, "max", hi)
	}
	return false
}

// staticRetry is how often a GPU whose handle could not be had at start,
// or whose UUID or bus id could not be read, is tried again.
const staticRetry = 10 * time.Second

// reread reads again, now and then (every staticRetry), not at every
// sample, what the start-up read could not have: all the static facts when
// it had no handle or no executor, else the facts that name the GPU
// (readIdentity) when one is missing. The worker's, or Host.Reidentify's
// for a GPU --gpu did not select.
func (g *GPU) reread(now time.Time) {
	if g.lib == nil || !now.After(g.nextStatic) {
		return
	}
	g.nextStatic = now.Add(staticRetry)
	if g.dev == nil || g.exec.Load() == nil {
		g.readStatic(g.lib)
	} else if info := g.info.Load(); info.UUID == "" || info.BusID == "" {
		g.readIdentity(info)
	}
}

// Bounds for what reading.Table's rows do not bound: generous, they reject
// garbage, not extremes.
const (
	maxTempC   = 200 // no GPU survives 200 C; 4294967295 is a driver error
	maxPercent = 100 // process utilization
)

// Sample reads the GPU's live state into s. It never returns an error: a
// reading that failed is absent in s, and s.Status says whether the sample as
// a whole failed (every call failed) or the GPU is lost.
func (g *GPU) Sample(s *reading.Sample) {
	info := g.info.Load()
	*s = reading.Sample{GPU: info.Index, NumFans: min(info.NumFans, reading.MaxFans)}
	now := time.Now()
	g.started(now)
	s.Time = now
	s.KernelTime = g.kclock.At(now)
	g.attempts, g.fails, g.firstErr, g.lost = 0, 0, FnNone, false
	if g.dev == nil || g.exec.Load() == nil || info.UUID == "" || info.BusID == "" { // not had at start
		g.reread(now)
		if g.dev == nil || g.exec.Load() == nil {
			s.Status, s.Err = reading.StatusFailed, g.execError()
			if g.dev == nil {
				s.Err = g.StaticErr()
			}
			return
		}
		info = g.info.Load()
		s.NumFans = min(info.NumFans, reading.MaxFans)
	}
	r := &g.raw
	slow, second := due(g.n, info.Index, g.cfg.SlowEvery, g.pacer.Level())
	g.plan(r, s.NumFans, slow, second)
	g.exec.Load().run(r)
	g.pacer.Record(now, time.Now()) // a nil pacer records nothing
	g.interpret(r, s, info)
	g.n++

	// A lost GPU's sample, or one whose every call failed, is meaningless;
	// so is one whose health counters found the GPU lost.
	if g.lost || (g.attempts > 0 && g.fails == g.attempts) {
		g.discard(s)
	} else if slow {
		if g.readHealth(s); g.lost {
			g.discard(s)
		}
	}
	if s.Status != reading.StatusAnswered {
		g.hlt.vals = [reading.NumReadings]reading.Opt[uint64]{}
	}
	for _, id := range reading.HealthIDs {
		s.Values[id] = g.hlt.vals[id]
	}
	reading.FabricCliqueChecked(&s.Values)
	g.readFanPolicies(s)
}

// discard empties sample s, lost or failed as a whole (the first failed
// call says why), and forgets the values carried to the next samples.
func (g *GPU) discard(s *reading.Sample) {
	st, err := reading.StatusLost, "GPU is lost"
	if !g.lost {
		st, err = reading.StatusFailed, g.firstErr.String()+": "+retText(g.firstRet)
	}
	*s = reading.Sample{GPU: s.GPU, Time: s.Time, KernelTime: s.KernelTime, NumFans: s.NumFans, Status: st, Err: err}
	g.carry, g.sensor0 = [reading.NumReadings]reading.Opt[uint64]{}, reading.Opt[reading.Sensor]{}
}

// fieldUint decodes a field value of an unsigned or non-negative type.
func fieldUint(fv *nvml.FieldValue) (uint64, bool) {
	b := fv.Value[:]
	switch fv.ValueType {
	case uint32(nvml.VALUE_TYPE_UNSIGNED_INT):
		return uint64(binary.LittleEndian.Uint32(b)), true
	case uint32(nvml.VALUE_TYPE_UNSIGNED_LONG), uint32(nvml.VALUE_TYPE_UNSIGNED_LONG_LONG):
		return binary.LittleEndian.Uint64(b), true
	case uint32(nvml.VALUE_TYPE_SIGNED_LONG_LONG):
		v := int64(binary.LittleEndian.Uint64(b))
		return uint64(v), v >= 0
	case uint32(nvml.VALUE_TYPE_SIGNED_INT):
		v := int32(binary.LittleEndian.Uint32(b))
		return uint64(v), v >= 0
	case uint32(nvml.VALUE_TYPE_UNSIGNED_SHORT):
		return uint64(binary.LittleEndian.Uint16(b)), true
	case uint32(nvml.VALUE_TYPE_DOUBLE):
		f := math.Float64frombits(binary.LittleEndian.Uint64(b))
		if f < 0 || math.IsNaN(f) || f > math.MaxInt64 {
			return 0, false
		}
		return uint64(f), true
	}
	return 0, false
}

// fanPolicyEvery is how often the fans' control policies (reading.FanTable's
// Seldom row) are read, with a sample: they change when someone takes
// manual control of the fans, not worth a call per fan every sample.
const fanPolicyEvery = 30 * time.Second

// fanPolicies holds the fans' control policies as last read (worker only).
type fanPolicies struct {
	pol  [reading.MaxFans]reading.Opt[uint32] // absent when the policy could not be read
	at   time.Time                            // the sample that read them; zero: never read
	next int64                                // mono() from which the next sample reads them
	last time.Time                            // the latest sample's time
}

// readFanPolicies reads each fan's control policy when due, after sample s
// if it succeeded, and gives s the policies as last read (carried forward);
// a policy that could not be read is absent.
func (g *GPU) readFanPolicies(s *reading.Sample) {
	p := &g.fanPol
	p.last = s.Time
	if s.Status != reading.StatusAnswered {
		return
	}
	if g.mono() >= p.next {
		p.next = g.mono() + int64(fanPolicyEvery)
		p.at = s.Time
		for i := range min(s.NumFans, reading.MaxFans) {
			p.pol[i] = reading.Opt[uint32]{}
			pol, ok := ask(g, FnFanPolicy, i, func() (nvml.FanControlPolicy, nvml.Return) { return g.dev.GetFanControlPolicy_v2(i) })
			if ok && uint32(pol) <= math.MaxUint8 {
				p.pol[i] = reading.Some(uint32(pol))
			}
		}
	}
	for i := range min(s.NumFans, reading.MaxFans) {
		s.Fans[i].Policy = p.pol[i]
	}
}

// FanPolicies returns each fan's control policy as text ("auto
// (temperature-controlled)", "manual", "n/a"), saying how long before the
// latest sample it was read. No NVML call; call it from the GPU's worker.
func (g *GPU) FanPolicies() []string {
	p := &g.fanPol
	n := min(g.Info().NumFans, reading.MaxFans)
	out := make([]string, n)
	for i := range out {
		pol, ok := p.pol[i].Get()
		text := reading.FanPolicyText(pol)
		switch pol {
		case reading.FanPolicyAuto:
			text = "auto (temperature-controlled)"
		case reading.FanPolicyManual:
		default:
			text = "unknown (" + text + ")"
		}
		switch {
		case p.at.IsZero() || !ok:
			out[i] = "n/a"
		case p.at.Equal(p.last):
			out[i] = text
		default:
			out[i] = text + " (read " + p.last.Sub(p.at).Round(time.Millisecond).String() + " before this sample)"
		}
	}
	return out
}
