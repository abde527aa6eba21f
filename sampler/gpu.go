package sampler

import (
	"encoding/binary"
	"log/slog"
	"math"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

// Config tunes the per-GPU sampler.
type Config struct {
	// Reprobe is how long a reading the driver refused (not supported, no
	// permission, function not found) stays off before it is tried again.
	Reprobe time.Duration
	// SlowEvery: the slow tier (encoder/decoder utilization, PCIe link
	// generation and width, thermal sensor 0) is read on every SlowEvery-th
	// sample and carried forward in between. 1 reads everything every sample.
	SlowEvery int
	// FieldWait bounds the wait for the process-wide GetFieldValues lock. When
	// another GPU's batched call is stuck holding it, this GPU falls back to
	// the individual calls instead of waiting.
	FieldWait time.Duration
}

// DefaultConfig returns the defaults for a poll interval: the slow tier is
// read about once a second.
func DefaultConfig(interval time.Duration) Config {
	slow := 1
	if interval > 0 && interval < time.Second {
		slow = int((time.Second + interval/2) / interval)
	}
	return Config{Reprobe: 10 * time.Minute, SlowEvery: slow, FieldWait: 20 * time.Millisecond}
}

// fieldSem serializes GetFieldValues across GPUs: NVML has been seen to
// misbehave when it is called concurrently. It is a channel rather than a
// mutex so that a waiter can give up (a GSP fault can keep the holder inside
// the driver for 45 s).
var fieldSem = make(chan struct{}, 1)

// Quantities read through GetFieldValues, each with an individual fallback.
const (
	qPower = iota
	qEnforced
	qEnergy
	qMemTemp
	qReplay
	numQ
)

var qField = [numQ]uint32{
	qPower:    nvml.FI_DEV_POWER_INSTANT,
	qEnforced: nvml.FI_DEV_POWER_CURRENT_LIMIT,
	qEnergy:   nvml.FI_DEV_TOTAL_ENERGY_CONSUMPTION,
	qMemTemp:  nvml.FI_DEV_MEMORY_TEMP,
	qReplay:   nvml.FI_DEV_PCIE_REPLAY_COUNTER,
}

// qFallback is the individual call for each quantity; FnNone has none.
var qFallback = [numQ]Fn{
	qPower:    FnPowerUsage,
	qEnforced: FnEnforcedLimit,
	qEnergy:   FnEnergy,
	qMemTemp:  FnNone,
	qReplay:   FnPcieReplay,
}

// GPU samples one GPU. Sample must be called from one goroutine at a time (the
// GPU's Worker); InFlight may be called from any goroutine.
type GPU struct {
	info   atomic.Pointer[reading.GPU]
	dev    Device
	handle any
	syms   *Symbols
	cfg    Config
	kclock KernelClock
	log    *slog.Logger
	base   time.Time // origin of the monotonic nanoseconds below

	// staticDone is closed once the static facts were read (nil: known from
	// the start). staticErr says why they could not be read.
	staticDone chan struct{}
	staticErr  string

	// What is in flight, for hang reports from other goroutines: the
	// function and when the sample (or start-up read) that called it began.
	// One clock read per sample, not per call: calls are ~15 per sample.
	cur       atomic.Int32 // Fn
	callStart atomic.Int64 // ns since base

	// Capability cache: ns since base until which (fn, index) stays off.
	off      [numFns][reading.MaxFans]int64
	told     [numFns]bool // logged "not available" once
	absurd   [numFns]bool // logged "absurd value" once
	fieldOff [numQ]int64

	fieldTimer *time.Timer
	fields     [numQ]nvml.FieldValue
	fieldQ     [numQ]int
	nfields    int

	n    uint64 // samples taken
	slow slowTier

	// Per-sample bookkeeping.
	attempts, fails int
	firstErr        Fn
	firstRet        nvml.Return
	lost            bool
}

type slowTier struct {
	enc, dec       reading.Opt[uint32]
	pcieGen, pcieW reading.Opt[uint32]
	sensor0        reading.Opt[reading.Sensor]
}

// NewGPU wraps a device whose static facts are already known.
func NewGPU(info reading.GPU, dev Device, handle any, syms *Symbols, cfg Config, kc KernelClock, log *slog.Logger) *GPU {
	if cfg.SlowEvery < 1 {
		cfg.SlowEvery = 1
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if info.NumFans > reading.MaxFans {
		log.Warn("more fans than recorded", "gpu", info.Index, "fans", info.NumFans, "recorded", reading.MaxFans)
	}
	t := time.NewTimer(time.Hour)
	t.Stop()
	g := &GPU{dev: dev, handle: handle, syms: syms, cfg: cfg, kclock: kc,
		log: log.With("gpu", info.Index), base: time.Now(), fieldTimer: t}
	g.info.Store(&info)
	return g
}

// Info returns the GPU's static facts (only the index until StaticDone).
func (g *GPU) Info() reading.GPU { return *g.info.Load() }

func (g *GPU) setInfo(info reading.GPU) { g.info.Store(&info) }

// StaticDone reports whether the static facts have been read (or given up on).
func (g *GPU) StaticDone() bool {
	if g.staticDone == nil {
		return true
	}
	select {
	case <-g.staticDone:
		return true
	default:
		return false
	}
}

// StaticErr says why the static facts could not be read; empty when they were.
// Valid once StaticDone.
func (g *GPU) StaticErr() string {
	if !g.StaticDone() {
		return ""
	}
	return g.staticErr
}

// Device returns the underlying device (events, snapshots).
func (g *GPU) Device() Device { return g.dev }

// Handle returns the handle NVML events carry for this GPU.
func (g *GPU) Handle() any { return g.handle }

// InFlight reports the NVML function this GPU's goroutine is inside and when
// the sample that made the call began; ok is false when no call is in flight.
func (g *GPU) InFlight() (fn Fn, since time.Time, ok bool) {
	f := Fn(g.cur.Load())
	if f == FnNone {
		return FnNone, time.Time{}, false
	}
	return f, g.base.Add(time.Duration(g.callStart.Load())), true
}

func (g *GPU) mono() int64 { return int64(time.Since(g.base)) }

// can reports whether fn (for fan or sensor index idx) may be called now.
func (g *GPU) can(fn Fn, idx int) bool {
	if g.lost || !g.syms.Has(fn) {
		return false
	}
	return g.off[fn][idx] == 0 || g.mono() >= g.off[fn][idx]
}

// begin marks fn as in flight.
func (g *GPU) begin(fn Fn) { g.cur.Store(int32(fn)) }

// started records when a sample or the start-up read began.
func (g *GPU) started(t time.Time) { g.callStart.Store(int64(t.Sub(g.base))) }

// end classifies the result of fn and reports whether it succeeded.
func (g *GPU) end(fn Fn, idx int, ret nvml.Return) bool {
	g.cur.Store(int32(FnNone))
	c := Classify(ret)
	switch {
	case c == ClassOK:
		g.attempts++
		g.off[fn][idx] = 0
		return true
	case c.capability():
		g.disable(fn, idx, c)
	case c == ClassGPULost:
		g.lost = true
		g.noteFail(fn, ret)
	default:
		g.noteFail(fn, ret)
	}
	return false
}

func (g *GPU) noteFail(fn Fn, ret nvml.Return) {
	g.attempts++
	g.fails++
	if g.firstErr == FnNone {
		g.firstErr, g.firstRet = fn, ret
	}
}

func (g *GPU) disable(fn Fn, idx int, c Class) {
	g.off[fn][idx] = g.mono() + int64(g.cfg.Reprobe)
	if !g.told[fn] {
		g.told[fn] = true
		g.log.Info("reading not available; will re-probe", "function", fn.String(), "reason", c.String(), "reprobe", g.cfg.Reprobe)
	}
}

// sane returns v when it is at most max; otherwise the reading is absent and
// the first occurrence is logged. Drivers in trouble report values such as
// 4294967295 C; recording them would poison peaks and detectors.
func (g *GPU) sane(fn Fn, v uint64, max uint64) bool {
	return g.within(fn, v, 0, max)
}

// within is sane with a lower bound too.
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

// Bounds for sane values. Generous: they reject garbage, not extremes.
const (
	maxTempC     = 200       // no GPU survives 200 C; 4294967295 is a driver error
	maxPowerMW   = 5_000_000 // 5 kW: more than any single GPU board draws
	maxClockMHz  = 20_000    // far above any shipping GPU clock
	maxPercent   = 100       // utilization and fan targets
	maxFanPct    = 200       // NVML documents fan speed may exceed 100 %
	maxPState    = 15        // P0..P15; 32 means unknown
	maxPCIeGen   = 16        // generous; Gen 6 ships today
	maxPCIeWidth = 32        // x32 is the widest link defined
	maxVRAM      = 1 << 50   // 1 PiB
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
	if g.dev == nil {
		s.Status, s.Err = reading.StatusFailed, g.staticErr
		return
	}

	g.readFields(s)
	dev := g.dev

	if g.can(FnTemperature, 0) {
		g.begin(FnTemperature)
		v, ret := dev.GetTemperature(nvml.TEMPERATURE_GPU)
		if g.end(FnTemperature, 0, ret) && g.sane(FnTemperature, uint64(v), maxTempC) {
			s.TempC = reading.Some(v)
			if m, ok := info.Thresholds.GPUMax.Get(); ok {
				s.TLimitC = reading.Some(int32(m) - int32(v))
			}
		}
	}
	if g.can(FnPowerLimit, 0) {
		g.begin(FnPowerLimit)
		v, ret := dev.GetPowerManagementLimit()
		// A limit of 0 W is a driver error (and would divide by zero).
		if g.end(FnPowerLimit, 0, ret) && g.within(FnPowerLimit, uint64(v), 1, maxPowerMW) {
			s.PowerLimitMW = reading.Some(v)
		}
	}
	if g.can(FnPState, 0) {
		g.begin(FnPState)
		v, ret := dev.GetPerformanceState()
		if g.end(FnPState, 0, ret) && v >= 0 && g.sane(FnPState, uint64(v), maxPState) {
			s.PState = reading.Some(uint32(v))
		}
	}
	s.GraphicsMHz = g.clock(nvml.CLOCK_GRAPHICS, 0)
	s.SMMHz = g.clock(nvml.CLOCK_SM, 1)
	s.MemMHz = g.clock(nvml.CLOCK_MEM, 2)
	if g.can(FnUtilization, 0) {
		g.begin(FnUtilization)
		u, ret := dev.GetUtilizationRates()
		if g.end(FnUtilization, 0, ret) {
			if g.sane(FnUtilization, uint64(u.Gpu), maxPercent) {
				s.GPUUtil = reading.Some(u.Gpu)
			}
			if g.sane(FnUtilization, uint64(u.Memory), maxPercent) {
				s.MemUtil = reading.Some(u.Memory)
			}
		}
	}
	g.readMemory(s)
	g.readThrottle(s)
	g.readFans(s)

	if g.n%uint64(g.cfg.SlowEvery) == 0 {
		g.readSlow()
	}
	s.EncUtil, s.DecUtil = g.slow.enc, g.slow.dec
	s.PCIeGen, s.PCIeWidth = g.slow.pcieGen, g.slow.pcieW
	s.Sensor0 = g.slow.sensor0
	g.n++

	switch {
	case g.lost:
		// The rest of the sample is meaningless: a lost GPU answers nothing.
		*s = reading.Sample{GPU: s.GPU, Time: s.Time, KernelTime: s.KernelTime, NumFans: s.NumFans,
			Status: reading.StatusLost, Err: "GPU is lost"}
		g.slow = slowTier{}
	case g.attempts > 0 && g.fails == g.attempts:
		*s = reading.Sample{GPU: s.GPU, Time: s.Time, KernelTime: s.KernelTime, NumFans: s.NumFans,
			Status: reading.StatusFailed, Err: g.firstErr.String() + ": " + retText(g.firstRet)}
		g.slow = slowTier{}
	}
}

// clock reads one clock domain; idx separates the domains in the cache.
func (g *GPU) clock(t nvml.ClockType, idx int) reading.Opt[uint32] {
	if !g.can(FnClock, idx) {
		return reading.Opt[uint32]{}
	}
	g.begin(FnClock)
	v, ret := g.dev.GetClockInfo(t)
	if g.end(FnClock, idx, ret) && g.sane(FnClock, uint64(v), maxClockMHz) {
		return reading.Some(v)
	}
	return reading.Opt[uint32]{}
}

func (g *GPU) readMemory(s *reading.Sample) {
	if g.can(FnMemoryInfoV2, 0) {
		g.begin(FnMemoryInfoV2)
		m, ret := g.dev.GetMemoryInfo_v2()
		if g.end(FnMemoryInfoV2, 0, ret) {
			if g.sane(FnMemoryInfoV2, m.Used, maxVRAM) {
				s.VRAMUsedBytes = reading.Some(m.Used)
			}
			return
		}
		if g.can(FnMemoryInfoV2, 0) || g.lost {
			return // a real failure, not a missing capability: don't double the calls
		}
	}
	if g.can(FnMemoryInfo, 0) {
		g.begin(FnMemoryInfo)
		m, ret := g.dev.GetMemoryInfo()
		if g.end(FnMemoryInfo, 0, ret) && g.sane(FnMemoryInfo, m.Used, maxVRAM) {
			s.VRAMUsedBytes = reading.Some(m.Used)
		}
	}
}

func (g *GPU) readThrottle(s *reading.Sample) {
	if g.can(FnClocksEventReasons, 0) {
		g.begin(FnClocksEventReasons)
		v, ret := g.dev.GetCurrentClocksEventReasons()
		if g.end(FnClocksEventReasons, 0, ret) {
			s.Throttle = reading.Some(v)
			return
		}
		if g.can(FnClocksEventReasons, 0) || g.lost {
			return
		}
	}
	if g.can(FnClocksThrottleReasons, 0) {
		g.begin(FnClocksThrottleReasons)
		v, ret := g.dev.GetCurrentClocksThrottleReasons()
		if g.end(FnClocksThrottleReasons, 0, ret) {
			s.Throttle = reading.Some(v)
		}
	}
}

func (g *GPU) readFans(s *reading.Sample) {
	for i := 0; i < s.NumFans; i++ {
		f := &s.Fans[i]
		switch {
		case g.can(FnFanSpeedV2, i):
			g.begin(FnFanSpeedV2)
			v, ret := g.dev.GetFanSpeed_v2(i)
			if g.end(FnFanSpeedV2, i, ret) && g.sane(FnFanSpeedV2, uint64(v), maxFanPct) {
				f.Speed = reading.Some(v)
			}
		case i == 0 && !g.syms.Has(FnFanSpeedV2) && g.can(FnFanSpeed, 0):
			// Old drivers: nvmlDeviceGetFanSpeed reports fan 0 only.
			g.begin(FnFanSpeed)
			v, ret := g.dev.GetFanSpeed()
			if g.end(FnFanSpeed, 0, ret) && g.sane(FnFanSpeed, uint64(v), maxFanPct) {
				f.Speed = reading.Some(v)
			}
		}
		if g.can(FnTargetFanSpeed, i) {
			g.begin(FnTargetFanSpeed)
			v, ret := g.dev.GetTargetFanSpeed(i)
			// go-nvml returns the driver's unsigned value as int: a
			// "negative" target arrives as 4294967295.
			if g.end(FnTargetFanSpeed, i, ret) && v >= 0 && g.sane(FnTargetFanSpeed, uint64(v), maxPercent) {
				f.Target = reading.Some(uint32(v))
			}
		}
	}
}

func (g *GPU) readSlow() {
	t := &g.slow
	*t = slowTier{}
	if g.can(FnEncoderUtil, 0) {
		g.begin(FnEncoderUtil)
		v, _, ret := g.dev.GetEncoderUtilization()
		if g.end(FnEncoderUtil, 0, ret) && g.sane(FnEncoderUtil, uint64(v), maxPercent) {
			t.enc = reading.Some(v)
		}
	}
	if g.can(FnDecoderUtil, 0) {
		g.begin(FnDecoderUtil)
		v, _, ret := g.dev.GetDecoderUtilization()
		if g.end(FnDecoderUtil, 0, ret) && g.sane(FnDecoderUtil, uint64(v), maxPercent) {
			t.dec = reading.Some(v)
		}
	}
	if g.can(FnPcieGen, 0) {
		g.begin(FnPcieGen)
		v, ret := g.dev.GetCurrPcieLinkGeneration()
		// Generation 0 or width 0 is no link at all: not a reading.
		if g.end(FnPcieGen, 0, ret) && v >= 0 && g.within(FnPcieGen, uint64(v), 1, maxPCIeGen) {
			t.pcieGen = reading.Some(uint32(v))
		}
	}
	if g.can(FnPcieWidth, 0) {
		g.begin(FnPcieWidth)
		v, ret := g.dev.GetCurrPcieLinkWidth()
		if g.end(FnPcieWidth, 0, ret) && v >= 0 && g.within(FnPcieWidth, uint64(v), 1, maxPCIeWidth) {
			t.pcieW = reading.Some(uint32(v))
		}
	}
	if g.can(FnThermalSettings, 0) {
		g.begin(FnThermalSettings)
		ts, ret := g.dev.GetThermalSettings(0)
		if g.end(FnThermalSettings, 0, ret) && ts.Count > 0 {
			s0 := ts.Sensor[0]
			if s0.CurrentTemp > -100 && g.sane(FnThermalSettings, uint64(max(s0.CurrentTemp, 0)), maxTempC) {
				t.sensor0 = reading.Some(reading.Sensor{Temp: s0.CurrentTemp, Target: s0.Target, Controller: s0.Controller})
			}
		}
	}
}

// readFields reads the batched quantities with one GetFieldValues call, and
// each quantity the batch cannot deliver with its individual call.
func (g *GPU) readFields(s *reading.Sample) {
	var got [numQ]bool
	var val [numQ]uint64
	if g.can(FnFieldValues, 0) && g.buildFields() > 0 && g.lockFields() {
		g.begin(FnFieldValues)
		ret := g.dev.GetFieldValues(g.fields[:g.nfields])
		<-fieldSem
		if g.end(FnFieldValues, 0, ret) {
			now := g.mono()
			for i := 0; i < g.nfields; i++ {
				fv := &g.fields[i]
				q := g.fieldQ[i]
				c := Classify(nvml.Return(fv.NvmlReturn))
				switch {
				case c == ClassOK:
					if v, ok := fieldUint(fv); ok {
						val[q], got[q] = v, true
					}
				case c.capability():
					g.fieldOff[q] = now + int64(g.cfg.Reprobe)
				case c == ClassGPULost:
					g.lost = true
				}
			}
		}
	}
	if g.lost {
		return
	}
	dev := g.dev
	for q := 0; q < numQ; q++ {
		if got[q] || qFallback[q] == FnNone || !g.can(qFallback[q], 0) {
			continue
		}
		fn := qFallback[q]
		g.begin(fn)
		var ret nvml.Return
		switch q {
		case qPower:
			var v uint32
			v, ret = dev.GetPowerUsage()
			val[q] = uint64(v)
		case qEnforced:
			var v uint32
			v, ret = dev.GetEnforcedPowerLimit()
			val[q] = uint64(v)
		case qEnergy:
			val[q], ret = dev.GetTotalEnergyConsumption()
		case qReplay:
			var v int
			v, ret = dev.GetPcieReplayCounter()
			val[q] = uint64(max(v, 0))
		}
		got[q] = g.end(fn, 0, ret)
		if g.lost {
			return
		}
	}
	if got[qPower] && g.sane(FnPowerUsage, val[qPower], maxPowerMW) {
		s.PowerMW = reading.Some(uint32(val[qPower]))
	}
	if got[qEnforced] && g.within(FnEnforcedLimit, val[qEnforced], 1, maxPowerMW) {
		s.EnforcedLimitMW = reading.Some(uint32(val[qEnforced]))
	}
	if got[qEnergy] {
		s.EnergyMJ = reading.Some(val[qEnergy])
	}
	if got[qMemTemp] && g.sane(FnFieldValues, val[qMemTemp], maxTempC) {
		s.MemTempC = reading.Some(uint32(val[qMemTemp]))
	}
	if got[qReplay] {
		s.PCIeReplay = reading.Some(val[qReplay])
	}
}

// buildFields fills the batch with the quantities whose field is not switched
// off and returns how many there are.
func (g *GPU) buildFields() int {
	var now int64
	n := 0
	for q := 0; q < numQ; q++ {
		if g.fieldOff[q] != 0 {
			if now == 0 {
				now = g.mono()
			}
			if now < g.fieldOff[q] {
				continue
			}
		}
		g.fields[n] = nvml.FieldValue{FieldId: qField[q]}
		g.fieldQ[n] = q
		n++
	}
	g.nfields = n
	return n
}

// lockFields takes the process-wide GetFieldValues lock, waiting at most
// FieldWait.
func (g *GPU) lockFields() bool {
	select {
	case fieldSem <- struct{}{}:
		return true
	default:
	}
	// One timer per GPU, reused: Reset on a stopped timer does not allocate.
	g.fieldTimer.Reset(g.cfg.FieldWait)
	defer g.fieldTimer.Stop()
	select {
	case fieldSem <- struct{}{}:
		return true
	case <-g.fieldTimer.C:
		return false
	}
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

// FanPolicies returns each fan's control policy as text ("auto", "manual",
// "n/a"), for spike snapshots. Call it from the GPU's worker goroutine.
func (g *GPU) FanPolicies() []string {
	info := g.Info()
	n := min(info.NumFans, reading.MaxFans)
	out := make([]string, n)
	for i := range n {
		out[i] = "n/a"
		if g.dev == nil || !g.can(FnFanPolicy, i) {
			continue
		}
		g.begin(FnFanPolicy)
		p, ret := g.dev.GetFanControlPolicy_v2(i)
		if !g.end(FnFanPolicy, i, ret) {
			continue
		}
		switch p {
		case nvml.FAN_POLICY_TEMPERATURE_CONTINOUS_SW:
			out[i] = "auto (temperature-controlled)"
		case nvml.FAN_POLICY_MANUAL:
			out[i] = "manual"
		default:
			out[i] = "unknown (" + strconv.Itoa(int(p)) + ")"
		}
	}
	return out
}
