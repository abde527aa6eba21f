package sampler

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"unsafe"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

// A sample is taken in three steps: plan decides which NVML calls to make
// (capability cache, missing symbols, slow tier, field batch), an executor
// makes them all and records each result and value in a raw, and interpret
// classifies the results and turns the values into a reading.Sample. The
// executor makes every call of a sample in one cgo call (batch.c): crossing
// into C costs far more than a simulated call, and about as much as a real
// one. It calls the driver's functions, or in tests fakenvml's.

// call identifies one NVML call of a sample. The order is the order calls are
// made in (batch.c is handed callFn's descriptions).
type call uint8

const (
	cFields       call                          = iota // nvmlDeviceGetFieldValues: the batched quantities
	cTemp                                              // nvmlDeviceGetTemperature
	cPowerLim                                          // nvmlDeviceGetPowerManagementLimit
	cPState                                            // nvmlDeviceGetPerformanceState
	cClockGfx                                          // nvmlDeviceGetClockInfo(graphics)
	cClockSM                                           // nvmlDeviceGetClockInfo(SM)
	cClockMem                                          // nvmlDeviceGetClockInfo(memory)
	cUtil                                              // nvmlDeviceGetUtilizationRates
	cMemV2                                             // nvmlDeviceGetMemoryInfo_v2
	cMem                                               // nvmlDeviceGetMemoryInfo (old drivers)
	cReasons                                           // nvmlDeviceGetCurrentClocksEventReasons
	cThrottle                                          // nvmlDeviceGetCurrentClocksThrottleReasons (old drivers)
	cEnc                                               // slow tier: nvmlDeviceGetEncoderUtilization
	cDec                                               // slow tier: nvmlDeviceGetDecoderUtilization
	cPcieGen                                           // slow tier: nvmlDeviceGetCurrPcieLinkGeneration
	cPcieWidth                                         // slow tier: nvmlDeviceGetCurrPcieLinkWidth
	cThermal                                           // slow tier: nvmlDeviceGetThermalSettings(0)
	cSramEcc                                           // slow tier, health: nvmlDeviceGetSramEccErrorStatus
	cRepair                                            // slow tier, health: nvmlDeviceGetRepairStatus
	cUnrepairable                                      // slow tier, health: nvmlDeviceGetUnrepairableMemoryFlag_v1
	cPower                                             // field fallback: nvmlDeviceGetPowerUsage
	cEnforced                                          // field fallback: nvmlDeviceGetEnforcedPowerLimit
	cEnergy                                            // field fallback: nvmlDeviceGetTotalEnergyConsumption
	cReplay                                            // field fallback: nvmlDeviceGetPcieReplayCounter
	cFanSpeed                                          // nvmlDeviceGetFanSpeed_v2(fan), + fan index
	cTarget       = cFanSpeed + reading.MaxFans        // nvmlDeviceGetTargetFanSpeed(fan), + fan index
	cFanSpeed1    = cTarget + reading.MaxFans          // nvmlDeviceGetFanSpeed: fan 0 on old drivers
	numCalls      = cFanSpeed1 + 1
)

// callDef is one call: its function and capability index, how batch.c
// makes it and the readings of reading.Table it gives (by name; value i of
// the call is reads[i]; "fan." and a reading.FanTable name: that per-fan
// reading of fan idx). A reading given by several calls takes the first
// that answers, in call order: the later ones are old drivers'. A field
// reading needs none of this: its ID is data.
type callDef struct {
	fn    Fn
	idx   int
	cc    cCall
	reads []string
}

// cShape is how batch.c calls a getter (batch.h's GT_SHAPE_*).
type cShape uint32

const (
	shapeOut    cShape = iota // f(dev, out)
	shapeArgOut               // f(dev, arg, out)
	shapeOutOut               // f(dev, out, out2): the values are in out
)

// cCall is how batch.c makes a call (batch.h's gt_call, less the function,
// which each library gives by fnInfo's symbol): its shape and argument, the
// struct it fills (size and version: go-nvml's type, generated from
// nvml.h) and where each value is in it.
type cCall struct {
	shape   cShape
	arg     uint32
	size    uintptr
	version uint32 // written as NVML_STRUCT_VERSION(size, version); 0 none
	vals    []cVal
}

// cVal is where one value of a call is in its struct: offset and size
// (4 or 8 bytes, unsigned).
type cVal struct{ off, size uintptr }

// maxVals bounds the values of a call, maxOut the struct it fills (batch.h
// GT_MAXVALS, GT_MAXOUT).
const (
	maxVals = 4
	maxOut  = 128
)

// outLimit is the most bytes a call of shape s may fill: batch.c hands an
// f(dev, out, out2) call the two halves of its buffer, so its first struct
// (where its values are) must fit in the first half.
func outLimit(s cShape) uintptr {
	if s == shapeOutOut {
		return maxOut / 2
	}
	return maxOut
}

// fits reports whether call d's description fits what batch.c holds: its
// struct in the buffer its shape is given, at most maxVals values, each of
// 4 or 8 bytes inside the struct.
func (d *callDef) fits() error {
	cc := &d.cc
	if cc.size > outLimit(cc.shape) || len(cc.vals) > maxVals {
		return fmt.Errorf("call %s fills more than batch.c holds", fnInfo[d.fn].name)
	}
	for _, v := range cc.vals {
		if v.off+v.size > cc.size || (v.size != 4 && v.size != 8) {
			return fmt.Errorf("a value of call %s is outside its struct", fnInfo[d.fn].name)
		}
	}
	return nil
}

// u32 and u64 are a getter of one value: f(dev, *v).
var (
	u32 = cCall{size: 4, vals: []cVal{{0, 4}}}
	u64 = cCall{size: 8, vals: []cVal{{0, 8}}}
)

// withArg makes batch.c call f(dev, arg, out); outOut f(dev, out, out2).
func (c cCall) withArg(arg uint32) cCall { c.shape, c.arg = shapeArgOut, arg; return c }
func (c cCall) outOut() cCall            { c.shape = shapeOutOut; return c }

// structOf is a getter filling a struct T (go-nvml's type) of the version
// given (0: unversioned), whose values are at vals (at).
func structOf[T any](version uint32, vals ...cVal) cCall {
	var z T
	return cCall{size: unsafe.Sizeof(z), version: version, vals: vals}
}

// at is where field f of the struct at base is.
func at[F uint32 | uint64 | int32](base unsafe.Pointer, f *F) cVal {
	return cVal{uintptr(unsafe.Pointer(f)) - uintptr(base), unsafe.Sizeof(*f)}
}

// callFn is every call of a sample.
var callFn = func() (t [numCalls]callDef) {
	set := func(c call, fn Fn, idx int, cc cCall, reads ...string) { t[c] = callDef{fn, idx, cc, reads} }
	set(cFields, FnFieldValues, 0, cCall{})
	set(cTemp, FnTemperature, 0, u32.withArg(uint32(nvml.TEMPERATURE_GPU)), "TempC")
	set(cPowerLim, FnPowerLimit, 0, u32, "PowerLimitMW")
	set(cPState, FnPState, 0, u32, "PState")
	for i, ct := range [3]nvml.ClockType{nvml.CLOCK_GRAPHICS, nvml.CLOCK_SM, nvml.CLOCK_MEM} {
		set(cClockGfx+call(i), FnClock, i, u32.withArg(uint32(ct)), [3]string{"GraphicsMHz", "SMMHz", "MemMHz"}[i])
	}
	var u nvml.Utilization
	set(cUtil, FnUtilization, 0, structOf[nvml.Utilization](0, at(unsafe.Pointer(&u), &u.Gpu), at(unsafe.Pointer(&u), &u.Memory)), "GPUUtil", "MemUtil")
	var m2 nvml.Memory_v2
	set(cMemV2, FnMemoryInfoV2, 0, structOf[nvml.Memory_v2](2, at(unsafe.Pointer(&m2), &m2.Used), at(unsafe.Pointer(&m2), &m2.Total)), "VRAMUsedBytes", "VRAMTotalBytes")
	var m1 nvml.Memory
	set(cMem, FnMemoryInfo, 0, structOf[nvml.Memory](0, at(unsafe.Pointer(&m1), &m1.Used), at(unsafe.Pointer(&m1), &m1.Total)), "VRAMUsedBytes", "VRAMTotalBytes")
	set(cReasons, FnClocksEventReasons, 0, u64, "Throttle")
	set(cThrottle, FnClocksThrottleReasons, 0, u64, "Throttle")
	// (utilization, sampling period)
	set(cEnc, FnEncoderUtil, 0, u32.outOut(), "EncUtil")
	set(cDec, FnDecoderUtil, 0, u32.outOut(), "DecUtil")
	set(cPcieGen, FnPcieGen, 0, u32, "PCIeGen")
	set(cPcieWidth, FnPcieWidth, 0, u32, "PCIeWidth")
	// Sensor 0 (thCount ...): the count, then sensor 0's controller, temperature and target.
	var th nvml.GpuThermalSettings
	b := unsafe.Pointer(&th)
	set(cThermal, FnThermalSettings, 0, structOf[nvml.GpuThermalSettings](0,
		at(b, &th.Count), at(b, &th.Sensor[0].Controller), at(b, &th.Sensor[0].CurrentTemp), at(b, &th.Sensor[0].Target)).withArg(0))
	// Hardware health getters (reading.Health rows naming them).
	var sram nvml.EccSramErrorStatus
	b = unsafe.Pointer(&sram)
	set(cSramEcc, FnSramEcc, 0, structOf[nvml.EccSramErrorStatus](1,
		at(b, &sram.VolatileCor), at(b, &sram.VolatileUncSecDed), at(b, &sram.VolatileUncParity), at(b, &sram.BThresholdExceeded)),
		"sram_correctable", "sram_uncorrectable_secded", "sram_uncorrectable_parity", "sram_threshold_exceeded")
	var rep nvml.RepairStatus
	b = unsafe.Pointer(&rep)
	set(cRepair, FnRepairStatus, 0, structOf[nvml.RepairStatus](1, at(b, &rep.BChannelRepairPending), at(b, &rep.BTpcRepairPending)),
		"channel_repair_pending", "tpc_repair_pending")
	var unr nvml.UnrepairableMemoryStatus_v1
	set(cUnrepairable, FnUnrepairable, 0, structOf[nvml.UnrepairableMemoryStatus_v1](0, at(unsafe.Pointer(&unr), &unr.BUnrepairableMemory)),
		"memory_unrepairable")
	// Field fallbacks (reading.Def.Getter of a field reading).
	set(cPower, FnPowerUsage, 0, u32)
	set(cEnforced, FnEnforcedLimit, 0, u32)
	set(cEnergy, FnEnergy, 0, u64)
	set(cReplay, FnPcieReplay, 0, u32)
	for i := range reading.MaxFans {
		set(cFanSpeed+call(i), FnFanSpeedV2, i, u32.withArg(uint32(i)), "fan.Speed")
		set(cTarget+call(i), FnTargetFanSpeed, i, u32.withArg(uint32(i)), "fan.Target")
	}
	set(cFanSpeed1, FnFanSpeed, 0, u32, "fan.Speed")
	return t
}()

// Thermal settings' values (cThermal): sensor count, then sensor 0's.
const (
	thCount = iota
	thController
	thCurrent
	thTarget
)

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

// fanReading is a row of reading.FanTable and, for each fan, the calls
// that give its value (the first one planned and answering is used;
// TestTableIsRead checks every fan has one).
type fanReading struct {
	def   *reading.FanDef
	calls [reading.MaxFans][]call
}

// fanReadings is reading.FanTable's readings, in table order.
var fanReadings = func() (f []fanReading) {
	for i := range reading.FanTable {
		fr := fanReading{def: &reading.FanTable[i]}
		for c := range callFn {
			if slices.Contains(callFn[c].reads, "fan."+fr.def.Name) {
				fr.calls[callFn[c].idx] = append(fr.calls[callFn[c].idx], call(c))
			}
		}
		f = append(f, fr)
	}
	return f
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

	v [numCalls][maxVals]uint64 // each getter call's values (callDef.reads)
}

func (r *raw) planned(c call) bool { return r.plan&(1<<c) != 0 }

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
	// A fan's reading takes the first of its calls whose function the
	// library has: the old drivers' nvmlDeviceGetFanSpeed (fan 0 only) is
	// made where nvmlDeviceGetFanSpeed_v2 is missing, not where it refuses
	// a fan (that fan's cell stays empty: TestUnsupportedReadingsAreEmptyCells).
	for i := range fans {
		for j := range fanReadings {
			for _, c := range fanReadings[j].calls[i] {
				if g.syms.Has(callFn[c].fn) {
					add(c)
					break
				}
			}
		}
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
		for i := 0; i < r.nfields; i++ {
			q := r.fieldQ[i]
			val[q], got[q] = g.fieldEntry(&r.fields[i], &g.fieldOff[q])
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
		if d := fr.def; got[q] && g.within(fr.fn, val[q], d.Min, cmp.Or(d.Max, math.MaxUint64)) {
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
			if v := r.v[c][gr.part[j]]; g.within(callFn[c].fn, v, d.Min, cmp.Or(d.Max, math.MaxUint64)) {
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
	for i := range s.NumFans {
		for j := range fanReadings {
			fr := &fanReadings[j]
			for _, c := range fr.calls[i] {
				if !g.result(r, c) {
					continue
				}
				if v := r.v[c][0]; g.within(callFn[c].fn, v, 0, fr.def.Max) {
					fr.def.Set(s, i, uint32(v))
				}
				break
			}
		}
	}
	if r.slow { // the slow tier was read: replace the carried value
		g.sensor0 = reading.Opt[reading.Sensor]{}
		if th := &r.v[cThermal]; g.result(r, cThermal) && th[thCount] > 0 {
			cur := int32(uint32(th[thCurrent]))
			if cur > -100 && g.within(FnThermalSettings, uint64(max(cur, 0)), 0, maxTempC) {
				g.sensor0 = reading.Some(reading.Sensor{Temp: cur, Target: int32(uint32(th[thTarget])), Controller: int32(uint32(th[thController]))})
			}
		}
	}
	s.Sensor0 = g.sensor0
}
