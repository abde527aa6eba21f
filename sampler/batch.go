package sampler

import (
	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

// A sample is taken in three steps: plan decides which NVML calls to make
// (capability cache, missing symbols, slow tier, field batch), an executor
// makes them all and records each result and value in a raw, and interpret
// classifies the results and turns the values into a reading.Sample. The
// executor for the real driver makes every call of a sample in one cgo call
// (batch.c): crossing into C costs far more than a simulated call, and about
// as much as a real one. Tests use the Go executor over fake devices; both
// feed the same interpret.

// call identifies one NVML call of a sample. The order is the order calls are
// made in; the C executor (batch.h) uses the same numbering.
type call uint8

const (
	cFields    call                          = iota // nvmlDeviceGetFieldValues: the batched quantities
	cTemp                                           // nvmlDeviceGetTemperature
	cPowerLim                                       // nvmlDeviceGetPowerManagementLimit
	cPState                                         // nvmlDeviceGetPerformanceState
	cClockGfx                                       // nvmlDeviceGetClockInfo(graphics)
	cClockSM                                        // nvmlDeviceGetClockInfo(SM)
	cClockMem                                       // nvmlDeviceGetClockInfo(memory)
	cUtil                                           // nvmlDeviceGetUtilizationRates
	cMemV2                                          // nvmlDeviceGetMemoryInfo_v2
	cMem                                            // nvmlDeviceGetMemoryInfo (old drivers)
	cReasons                                        // nvmlDeviceGetCurrentClocksEventReasons
	cThrottle                                       // nvmlDeviceGetCurrentClocksThrottleReasons (old drivers)
	cFanSpeed1                                      // nvmlDeviceGetFanSpeed: fan 0 on old drivers
	cEnc                                            // slow tier: nvmlDeviceGetEncoderUtilization
	cDec                                            // slow tier: nvmlDeviceGetDecoderUtilization
	cPcieGen                                        // slow tier: nvmlDeviceGetCurrPcieLinkGeneration
	cPcieWidth                                      // slow tier: nvmlDeviceGetCurrPcieLinkWidth
	cThermal                                        // slow tier: nvmlDeviceGetThermalSettings(0)
	cPower                                          // field fallback: nvmlDeviceGetPowerUsage
	cEnforced                                       // field fallback: nvmlDeviceGetEnforcedPowerLimit
	cEnergy                                         // field fallback: nvmlDeviceGetTotalEnergyConsumption
	cReplay                                         // field fallback: nvmlDeviceGetPcieReplayCounter
	cFanSpeed                                       // nvmlDeviceGetFanSpeed_v2(fan), + fan index
	cTarget    = cFanSpeed + reading.MaxFans        // nvmlDeviceGetTargetFanSpeed(fan), + fan index
	numCalls   = cTarget + reading.MaxFans
)

// callFn maps each call to its function and capability index.
var callFn = func() (t [numCalls]struct {
	fn  Fn
	idx int
}) {
	set := func(c call, fn Fn, idx int) { t[c].fn, t[c].idx = fn, idx }
	set(cFields, FnFieldValues, 0)
	set(cTemp, FnTemperature, 0)
	set(cPowerLim, FnPowerLimit, 0)
	set(cPState, FnPState, 0)
	set(cClockGfx, FnClock, 0)
	set(cClockSM, FnClock, 1)
	set(cClockMem, FnClock, 2)
	set(cUtil, FnUtilization, 0)
	set(cMemV2, FnMemoryInfoV2, 0)
	set(cMem, FnMemoryInfo, 0)
	set(cReasons, FnClocksEventReasons, 0)
	set(cThrottle, FnClocksThrottleReasons, 0)
	set(cFanSpeed1, FnFanSpeed, 0)
	set(cEnc, FnEncoderUtil, 0)
	set(cDec, FnDecoderUtil, 0)
	set(cPcieGen, FnPcieGen, 0)
	set(cPcieWidth, FnPcieWidth, 0)
	set(cThermal, FnThermalSettings, 0)
	set(cPower, FnPowerUsage, 0)
	set(cEnforced, FnEnforcedLimit, 0)
	set(cEnergy, FnEnergy, 0)
	set(cReplay, FnPcieReplay, 0)
	for i := range reading.MaxFans {
		set(cFanSpeed+call(i), FnFanSpeedV2, i)
		set(cTarget+call(i), FnTargetFanSpeed, i)
	}
	return t
}()

// qCall is each batched quantity's fallback call; cFields means none.
var qCall = [numQ]call{qPower: cPower, qEnforced: cEnforced, qEnergy: cEnergy, qMemTemp: cFields, qReplay: cReplay}

// Result codes an executor records besides NVML's.
const (
	retNotRun      = -1 // not attempted: not planned, or the GPU was lost earlier in the batch
	retLockTimeout = -2 // cFields only: another GPU holds the field lock (stuck in the driver)
)

// raw is one sample's calls and results, before interpretation.
type raw struct {
	plan     uint64 // calls to make
	fallback uint64 // calls to make only if cFields did not succeed
	// fieldFallback[i]: the call to make, in the same sample, when the
	// driver refuses field i alone (cFields succeeded, the entry did not).
	fieldFallback [numQ]uint64
	slow          bool // the slow tier is read in this sample
	second        bool // the secondary columns (P-state, utilization, memory) are read
	ret           [numCalls]int32

	nfields int
	fields  [numQ]nvml.FieldValue
	fieldQ  [numQ]int

	temp, powerLim, pstate uint32
	clk                    [3]uint32
	utilGPU, utilMem       uint32
	memUsed                uint64
	reasons                uint64
	fan1                   uint32
	enc, dec               uint32
	pcieGen, pcieWidth     uint32
	thCount                uint32
	th                     nvml.GpuThermalSettingsSensor
	power, enforced        uint32
	energy                 uint64
	replay                 uint32
	fan                    [reading.MaxFans]uint32
	target                 [reading.MaxFans]uint32
}

func (r *raw) planned(c call) bool { return r.plan&(1<<c) != 0 }

// executor makes a planned sample's calls.
type executor interface {
	// run makes the calls in r.plan in call order (and r.fallback when the
	// field batch did not succeed, r.fieldFallback[i] when it succeeded but
	// entry i did not), records every result in r.ret. After a
	// NVML_ERROR_GPU_IS_LOST it makes no more calls.
	run(r *raw)
	// current returns the call in flight + 1, or 0; safe from any goroutine.
	current() int32
}

// plan fills r.plan for the next sample.
func (g *GPU) plan(r *raw, fans int, slow, second bool) {
	r.plan, r.fallback, r.slow, r.second = 0, 0, slow, second
	r.fieldFallback = [numQ]uint64{}
	for i := range r.ret {
		r.ret[i] = retNotRun
	}
	add := func(c call) bool {
		if g.can(callFn[c].fn, callFn[c].idx) {
			r.plan |= 1 << c
			return true
		}
		return false
	}
	entry := [numQ]int{} // field entry + 1 of each quantity in the batch
	if g.can(FnFieldValues, 0) && g.buildFields(r) > 0 {
		r.plan |= 1 << cFields
		for i := 0; i < r.nfields; i++ {
			entry[r.fieldQ[i]] = i + 1
		}
	}
	for q := 0; q < numQ; q++ {
		c := qCall[q]
		if c == cFields || !g.can(callFn[c].fn, 0) {
			continue
		}
		if i := entry[q] - 1; i >= 0 {
			// Only if the batch fails, its lock is held, or the driver
			// refuses this entry.
			r.fallback |= 1 << c
			r.fieldFallback[i] = 1 << c
		} else {
			r.plan |= 1 << c
		}
	}
	add(cTemp)
	add(cPowerLim)
	add(cClockGfx)
	add(cClockSM)
	add(cClockMem)
	if second {
		add(cPState)
		add(cUtil)
		if !add(cMemV2) {
			add(cMem)
		}
	}
	if !add(cReasons) {
		add(cThrottle)
	}
	for i := 0; i < fans; i++ {
		if g.syms.Has(FnFanSpeedV2) {
			add(cFanSpeed + call(i))
		} else if i == 0 {
			add(cFanSpeed1) // old drivers: fan 0 only
		}
		add(cTarget + call(i))
	}
	if slow {
		add(cEnc)
		add(cDec)
		add(cPcieGen)
		add(cPcieWidth)
		add(cThermal)
	}
}

// buildFields fills the field batch with the quantities whose field is not
// switched off and returns how many there are.
func (g *GPU) buildFields(r *raw) int {
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
		r.fields[n] = nvml.FieldValue{FieldId: qField[q]}
		r.fieldQ[n] = q
		n++
	}
	r.nfields = n
	return n
}

// result classifies call c's result; true means its value may be used.
func (g *GPU) result(r *raw, c call) bool {
	ret := r.ret[c]
	if ret == retNotRun || ret == retLockTimeout {
		return false
	}
	return g.end(callFn[c].fn, callFn[c].idx, nvml.Return(ret))
}

// interpret turns r into s. s already holds the time and the fan count.
func (g *GPU) interpret(r *raw, s *reading.Sample, info *reading.GPU) {
	var got [numQ]bool
	var val [numQ]uint64
	if r.planned(cFields) && g.result(r, cFields) {
		now := g.mono()
		for i := 0; i < r.nfields; i++ {
			fv := &r.fields[i]
			q := r.fieldQ[i]
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
	fallback := [numQ]uint64{qPower: uint64(r.power), qEnforced: uint64(r.enforced), qEnergy: r.energy, qReplay: uint64(r.replay)}
	for q := 0; q < numQ; q++ {
		if c := qCall[q]; !got[q] && c != cFields && g.result(r, c) {
			val[q], got[q] = fallback[q], true
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

	if g.result(r, cTemp) && g.sane(FnTemperature, uint64(r.temp), maxTempC) {
		s.TempC = reading.Some(r.temp)
		if m, ok := info.Thresholds.GPUMax.Get(); ok {
			s.TLimitC = reading.Some(int32(m) - int32(r.temp))
		}
	}
	// A limit of 0 W is a driver error (and would divide by zero).
	if g.result(r, cPowerLim) && g.within(FnPowerLimit, uint64(r.powerLim), 1, maxPowerMW) {
		s.PowerLimitMW = reading.Some(r.powerLim)
	}
	clocks := [3]*reading.Opt[uint32]{&s.GraphicsMHz, &s.SMMHz, &s.MemMHz}
	for i, c := range [3]call{cClockGfx, cClockSM, cClockMem} {
		if g.result(r, c) && g.sane(FnClock, uint64(r.clk[i]), maxClockMHz) {
			*clocks[i] = reading.Some(r.clk[i])
		}
	}
	if r.second { // the secondary columns were read: replace the carried values
		t := &g.second
		*t = secondTier{}
		if g.result(r, cPState) && g.sane(FnPState, uint64(r.pstate), maxPState) {
			t.pstate = reading.Some(r.pstate)
		}
		if g.result(r, cUtil) {
			if g.sane(FnUtilization, uint64(r.utilGPU), maxPercent) {
				t.gpuUtil = reading.Some(r.utilGPU)
			}
			if g.sane(FnUtilization, uint64(r.utilMem), maxPercent) {
				t.memUtil = reading.Some(r.utilMem)
			}
		}
		if (g.result(r, cMemV2) || g.result(r, cMem)) && g.sane(FnMemoryInfo, r.memUsed, maxVRAM) {
			t.vram = reading.Some(r.memUsed)
		}
	}
	s.PState, s.GPUUtil, s.MemUtil, s.VRAMUsedBytes = g.second.pstate, g.second.gpuUtil, g.second.memUtil, g.second.vram
	if g.result(r, cReasons) || g.result(r, cThrottle) {
		s.Throttle = reading.Some(r.reasons)
	}
	if g.result(r, cFanSpeed1) && g.sane(FnFanSpeed, uint64(r.fan1), maxFanPct) {
		s.Fans[0].Speed = reading.Some(r.fan1)
	}
	for i := 0; i < s.NumFans; i++ {
		if g.result(r, cFanSpeed+call(i)) && g.sane(FnFanSpeedV2, uint64(r.fan[i]), maxFanPct) {
			s.Fans[i].Speed = reading.Some(r.fan[i])
		}
		// A "negative" target arrives as 4294967295: out of range, absent.
		if g.result(r, cTarget+call(i)) && g.sane(FnTargetFanSpeed, uint64(r.target[i]), maxPercent) {
			s.Fans[i].Target = reading.Some(r.target[i])
		}
	}
	if r.slow { // the slow tier was read: replace the carried values
		t := &g.slow
		*t = slowTier{}
		if g.result(r, cEnc) && g.sane(FnEncoderUtil, uint64(r.enc), maxPercent) {
			t.enc = reading.Some(r.enc)
		}
		if g.result(r, cDec) && g.sane(FnDecoderUtil, uint64(r.dec), maxPercent) {
			t.dec = reading.Some(r.dec)
		}
		// Generation 0 or width 0 is no link at all: not a reading.
		if g.result(r, cPcieGen) && g.within(FnPcieGen, uint64(r.pcieGen), 1, maxPCIeGen) {
			t.pcieGen = reading.Some(r.pcieGen)
		}
		if g.result(r, cPcieWidth) && g.within(FnPcieWidth, uint64(r.pcieWidth), 1, maxPCIeWidth) {
			t.pcieW = reading.Some(r.pcieWidth)
		}
		if g.result(r, cThermal) && r.thCount > 0 {
			s0 := r.th
			if s0.CurrentTemp > -100 && g.sane(FnThermalSettings, uint64(max(s0.CurrentTemp, 0)), maxTempC) {
				t.sensor0 = reading.Some(reading.Sensor{Temp: s0.CurrentTemp, Target: s0.Target, Controller: s0.Controller})
			}
		}
	}
	s.EncUtil, s.DecUtil = g.slow.enc, g.slow.dec
	s.PCIeGen, s.PCIeWidth = g.slow.pcieGen, g.slow.pcieW
	s.Sensor0 = g.slow.sensor0
}
