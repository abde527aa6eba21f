package sampler

import (
	"math"

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

// callDef is one call: its function and capability index, how the Go
// executor makes it (the C one, batch.c, has its own copy of each getter
// call; a field reading needs neither: its ID is data), and the readings of
// reading.Table it gives (by name; value part
// i of the call is reads[i]). A reading given by several calls takes the
// first that answers, in call order: the later ones are old drivers'.
type callDef struct {
	fn    Fn
	idx   int
	run   func(d Device, r *raw, c call) nvml.Return
	reads []string
}

// callFn is every call of a sample.
var callFn = func() (t [numCalls]callDef) {
	set := func(c call, fn Fn, idx int, run func(Device, *raw, call) nvml.Return, reads ...string) {
		t[c] = callDef{fn, idx, run, reads}
	}
	set(cFields, FnFieldValues, 0, func(d Device, r *raw, _ call) nvml.Return { return d.GetFieldValues(r.fields[:r.nfields]) })
	set(cTemp, FnTemperature, 0, u32(func(d Device) (uint32, nvml.Return) { return d.GetTemperature(nvml.TEMPERATURE_GPU) }), "TempC")
	set(cPowerLim, FnPowerLimit, 0, u32(Device.GetPowerManagementLimit), "PowerLimitMW")
	set(cPState, FnPState, 0, u32(func(d Device) (uint32, nvml.Return) { v, r := d.GetPerformanceState(); return uint32(v), r }), "PState")
	for i, ct := range [3]nvml.ClockType{nvml.CLOCK_GRAPHICS, nvml.CLOCK_SM, nvml.CLOCK_MEM} {
		set(cClockGfx+call(i), FnClock, i, u32(func(d Device) (uint32, nvml.Return) { return d.GetClockInfo(ct) }), [3]string{"GraphicsMHz", "SMMHz", "MemMHz"}[i])
	}
	set(cUtil, FnUtilization, 0, func(d Device, r *raw, c call) nvml.Return {
		u, ret := d.GetUtilizationRates()
		r.v[c] = [2]uint64{uint64(u.Gpu), uint64(u.Memory)}
		return ret
	}, "GPUUtil", "MemUtil")
	set(cMemV2, FnMemoryInfoV2, 0, u64(func(d Device) (uint64, nvml.Return) { m, r := d.GetMemoryInfo_v2(); return m.Used, r }), "VRAMUsedBytes")
	set(cMem, FnMemoryInfo, 0, u64(func(d Device) (uint64, nvml.Return) { m, r := d.GetMemoryInfo(); return m.Used, r }), "VRAMUsedBytes")
	set(cReasons, FnClocksEventReasons, 0, u64(Device.GetCurrentClocksEventReasons), "Throttle")
	set(cThrottle, FnClocksThrottleReasons, 0, u64(Device.GetCurrentClocksThrottleReasons), "Throttle")
	set(cFanSpeed1, FnFanSpeed, 0, u32(Device.GetFanSpeed))
	set(cEnc, FnEncoderUtil, 0, u32(func(d Device) (uint32, nvml.Return) { v, _, r := d.GetEncoderUtilization(); return v, r }), "EncUtil")
	set(cDec, FnDecoderUtil, 0, u32(func(d Device) (uint32, nvml.Return) { v, _, r := d.GetDecoderUtilization(); return v, r }), "DecUtil")
	set(cPcieGen, FnPcieGen, 0, u32(func(d Device) (uint32, nvml.Return) { v, r := d.GetCurrPcieLinkGeneration(); return uint32(v), r }), "PCIeGen")
	set(cPcieWidth, FnPcieWidth, 0, u32(func(d Device) (uint32, nvml.Return) { v, r := d.GetCurrPcieLinkWidth(); return uint32(v), r }), "PCIeWidth")
	set(cThermal, FnThermalSettings, 0, func(d Device, r *raw, _ call) nvml.Return {
		th, ret := d.GetThermalSettings(0)
		r.thCount, r.th = th.Count, th.Sensor[0]
		return ret
	})
	// Field fallbacks (reading.Def.Getter of a field reading).
	set(cPower, FnPowerUsage, 0, u32(Device.GetPowerUsage))
	set(cEnforced, FnEnforcedLimit, 0, u32(Device.GetEnforcedPowerLimit))
	set(cEnergy, FnEnergy, 0, u64(Device.GetTotalEnergyConsumption))
	set(cReplay, FnPcieReplay, 0, u32(func(d Device) (uint32, nvml.Return) { v, r := d.GetPcieReplayCounter(); return uint32(v), r }))
	for i := range reading.MaxFans {
		set(cFanSpeed+call(i), FnFanSpeedV2, i, u32(func(d Device) (uint32, nvml.Return) { return d.GetFanSpeed_v2(i) }))
		set(cTarget+call(i), FnTargetFanSpeed, i, u32(func(d Device) (uint32, nvml.Return) { v, r := d.GetTargetFanSpeed(i); return uint32(v), r }))
	}
	return t
}()

// u32 and u64 make a call of a getter returning one value, left in r.v[c][0].
func u32(f func(Device) (uint32, nvml.Return)) func(Device, *raw, call) nvml.Return {
	return func(d Device, r *raw, c call) nvml.Return {
		v, ret := f(d)
		r.v[c][0] = uint64(v)
		return ret
	}
}

func u64(f func(Device) (uint64, nvml.Return)) func(Device, *raw, call) nvml.Return {
	return func(d Device, r *raw, c call) nvml.Return {
		v, ret := f(d)
		r.v[c][0] = v
		return ret
	}
}

// getterReading is a reading of reading.Table read by its own call: the
// calls that give it (the first one planned and answering is used) and
// which of each call's values it is.
type getterReading struct {
	def   *reading.Def
	idx   int // in reading.Table
	calls []call
	part  []int
}

// getterReadings is reading.Table's getter readings, in table order.
var getterReadings = func() (g []getterReading) {
	for i := range reading.Table {
		d := &reading.Table[i]
		if d.Field != 0 {
			continue
		}
		gr := getterReading{def: d, idx: i}
		for c := range callFn {
			for p, name := range callFn[c].reads {
				if name == d.Name {
					gr.calls, gr.part = append(gr.calls, call(c)), append(gr.part, p)
				}
			}
		}
		if len(gr.calls) > 0 {
			g = append(g, gr)
		}
	}
	if len(reading.Table) > maxReadings {
		panic("reading.Table: more readings than maxReadings")
	}
	return g
}()

// fieldReading is a reading of reading.Table that NVML gives as a field
// value: read in the sample's one GetFieldValues, with the getter call made
// instead in the same sample when the driver refuses the field (cFields:
// none), and the function whose "absurd value" it logs.
type fieldReading struct {
	def  *reading.Def
	idx  int // in reading.Table
	call call
	fn   Fn
}

// maxFields bounds the field readings of a sample (the batch's size),
// maxReadings the table.
const (
	maxFields   = 64
	maxReadings = 128
)

// fieldReadings is reading.Table's field readings, in table order; numQ of
// them.
var fieldReadings, numQ = func() ([]fieldReading, int) {
	var f []fieldReading
	for i := range reading.Table {
		d := &reading.Table[i]
		if d.Field == 0 || d.Call != reading.SampleCall {
			continue
		}
		fr := fieldReading{def: d, idx: i, call: cFields, fn: FnFieldValues}
		if d.Getter != "" {
			fr.call = getterCall(d.Getter)
			fr.fn = callFn[fr.call].fn
		}
		f = append(f, fr)
	}
	if len(f) > maxFields {
		panic("reading.Table: more field readings than maxFields")
	}
	return f, len(f)
}()

// getterCall returns the field-fallback call of the NVML function named.
func getterCall(name string) call {
	for c := cPower; c < cFanSpeed; c++ {
		if fnInfo[callFn[c].fn].name == name {
			return c
		}
	}
	panic("reading.Table: no field fallback call for " + name)
}

// tierDue reports whether a reading of tier t is read in a sample.
func tierDue(t reading.Tier, slow, second bool) bool {
	switch t {
	case reading.Slow:
		return slow
	case reading.Secondary:
		return second
	}
	return true
}

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
	fieldFallback [maxFields]uint64
	slow          bool // the slow tier is read in this sample
	second        bool // the secondary columns (P-state, utilization, memory) are read
	ret           [numCalls]int32

	nfields int
	fields  [maxFields]nvml.FieldValue
	fieldQ  [maxFields]int  // the fieldReadings index of each entry
	due     [maxFields]bool // fieldReadings whose tier is read in this sample

	v       [numCalls][2]uint64 // each getter call's values (callDef.reads)
	thCount uint32
	th      nvml.GpuThermalSettingsSensor
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
	// fields makes one GetFieldValues call outside the batch, under the
	// field lock that serializes field calls across GPUs; false: the lock
	// was not had within FieldWait (another GPU is stuck in the driver).
	fields(fv []nvml.FieldValue) (nvml.Return, bool)
}

// plan fills r.plan for the next sample.
func (g *GPU) plan(r *raw, fans int, slow, second bool) {
	r.plan, r.fallback, r.slow, r.second = 0, 0, slow, second
	r.fieldFallback = [maxFields]uint64{}
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
	entry := [maxFields]int{} // field entry + 1 of each field reading in the batch
	if g.can(FnFieldValues, 0) && g.buildFields(r, slow, second) > 0 {
		r.plan |= 1 << cFields
		for i := 0; i < r.nfields; i++ {
			entry[r.fieldQ[i]] = i + 1
		}
	} else {
		g.fieldsDue(r, slow, second)
	}
	for q, fr := range fieldReadings {
		c := fr.call
		if c == cFields || !r.due[q] || !g.can(callFn[c].fn, 0) {
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
	for _, gr := range getterReadings {
		if tierDue(gr.def.Tier, slow, second) {
			for _, c := range gr.calls {
				if add(c) {
					break
				}
			}
		}
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
		add(cThermal)
	}
}

// fieldsDue marks the field readings whose tier is read in this sample.
func (g *GPU) fieldsDue(r *raw, slow, second bool) {
	for q, fr := range fieldReadings {
		r.due[q] = tierDue(fr.def.Tier, slow, second)
	}
}

// buildFields fills the field batch with the field readings due in this
// sample whose field is not switched off and returns how many there are.
func (g *GPU) buildFields(r *raw, slow, second bool) int {
	g.fieldsDue(r, slow, second)
	var now int64
	n := 0
	for q, fr := range fieldReadings {
		if !r.due[q] {
			continue
		}
		if g.fieldOff[q] != 0 {
			if now == 0 {
				now = g.mono()
			}
			if now < g.fieldOff[q] {
				continue
			}
		}
		r.fields[n] = nvml.FieldValue{FieldId: fr.def.Field}
		r.fieldQ[n] = q
		n++
	}
	r.nfields = n
	return n
}

// bound is a table's Max: 0 is unbounded.
func bound(max uint64) uint64 {
	if max == 0 {
		return math.MaxUint64
	}
	return max
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
	var got [maxFields]bool
	var val [maxFields]uint64
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
	for q, fr := range fieldReadings {
		if !r.due[q] { // another tier's sample: carried forward
			if v, ok := g.carry[fr.idx].Get(); ok {
				fr.def.Set(s, v)
			}
			continue
		}
		if c := fr.call; !got[q] && c != cFields && g.result(r, c) {
			val[q], got[q] = r.v[c][0], true
		}
		g.carry[fr.idx] = reading.Opt[uint64]{}
		if d := fr.def; got[q] && g.within(fr.fn, val[q], d.Min, bound(d.Max)) {
			d.Set(s, val[q])
			g.carry[fr.idx] = reading.Some(val[q])
		}
	}

	for _, gr := range getterReadings {
		d := gr.def
		if !tierDue(d.Tier, r.slow, r.second) { // carried forward
			if v, ok := g.carry[gr.idx].Get(); ok {
				d.Set(s, v)
			}
			continue
		}
		g.carry[gr.idx] = reading.Opt[uint64]{}
		for j, c := range gr.calls {
			if !g.result(r, c) {
				continue
			}
			if v := r.v[c][gr.part[j]]; g.within(callFn[c].fn, v, d.Min, bound(d.Max)) {
				d.Set(s, v)
				g.carry[gr.idx] = reading.Some(v)
			}
			break
		}
	}
	if t, ok := s.TempC.Get(); ok {
		if m, ok := info.Thresholds.GPUMax.Get(); ok {
			s.TLimitC = reading.Some(int32(m) - int32(t))
		}
	}
	if g.result(r, cFanSpeed1) && g.sane(FnFanSpeed, r.v[cFanSpeed1][0], maxFanPct) {
		s.Fans[0].Speed = reading.Some(uint32(r.v[cFanSpeed1][0]))
	}
	for i := 0; i < s.NumFans; i++ {
		if c := cFanSpeed + call(i); g.result(r, c) && g.sane(FnFanSpeedV2, r.v[c][0], maxFanPct) {
			s.Fans[i].Speed = reading.Some(uint32(r.v[c][0]))
		}
		// A "negative" target arrives as 4294967295: out of range, absent.
		if c := cTarget + call(i); g.result(r, c) && g.sane(FnTargetFanSpeed, r.v[c][0], maxPercent) {
			s.Fans[i].Target = reading.Some(uint32(r.v[c][0]))
		}
	}
	if r.slow { // the slow tier was read: replace the carried value
		g.sensor0 = reading.Opt[reading.Sensor]{}
		if g.result(r, cThermal) && r.thCount > 0 {
			s0 := r.th
			if s0.CurrentTemp > -100 && g.sane(FnThermalSettings, uint64(max(s0.CurrentTemp, 0)), maxTempC) {
				g.sensor0 = reading.Some(reading.Sensor{Temp: s0.CurrentTemp, Target: s0.Target, Controller: s0.Controller})
			}
		}
	}
	s.Sensor0 = g.sensor0
}
