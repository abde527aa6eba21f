package sampler

import (
	"cmp"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"unsafe"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

// A sample is taken in three steps: plan picks the NVML calls to make,
// the executor makes them all in one cgo call (batch.c: crossing into C
// costs about as much as a real NVML call) and records results and values
// in a raw, and interpret turns those into a reading.Sample.

// call is one NVML call of a sample: its index in callFn, the order calls
// are made in. Call 0 is the field batch; the others are built from
// reading.Table and reading.FanTable (buildCalls).
type call uint8

const cFields call = 0 // nvmlDeviceGetFieldValues: the batched quantities

// callDef is one call: its function and capability index, how batch.c
// makes it, and the name the probe gives it.
type callDef struct {
	fn    Fn
	idx   int // its capability-cache index: the fan of a per-fan call, else its argument's rank among fn's calls
	cc    cCall
	fan   bool // a per-fan call: fan idx's of a reading.FanTable row
	newer call // the next newer call an older driver's call stands in for (0: none)
	name  string
}

// cCall is batch.h's gt_call less the function: shape and argument, the
// struct it fills and where each value is in it.
type cCall struct {
	shape   reading.Shape
	arg     uint32
	size    uintptr
	version uint32 // written as NVML_STRUCT_VERSION(size, version); 0 none
	vals    []cVal
}

// cVal is where one unsigned value of 1, 4 or 8 bytes is in a call's struct.
type cVal struct{ off, size uintptr }

// maxVals bounds the values of a call, maxOut the struct it fills, maxCalls
// a sample's calls (batch.h GT_MAXVALS, GT_MAXOUT, GT_MAXCALLS).
const (
	maxVals  = 10
	maxOut   = 640
	maxCalls = 64
)

// fits reports whether call d's description fits what batch.c holds: its
// struct in the buffer its shape is given (an f(dev, out, out2) call gets
// half, its values in the first struct), at most maxVals values, each of
// 1, 4 or 8 bytes inside the struct.
func (d *callDef) fits() error {
	cc := &d.cc
	limit := uintptr(maxOut)
	if cc.shape == reading.ShapeOutOut {
		limit /= 2
	}
	if cc.size > limit || len(cc.vals) > maxVals {
		return fmt.Errorf("call %s fills more than batch.c holds", d.name)
	}
	for _, v := range cc.vals {
		if v.off+v.size > cc.size || (v.size != 1 && v.size != 4 && v.size != 8) {
			return fmt.Errorf("a value of call %s is outside its struct", d.name)
		}
	}
	return nil
}

// layouts is the struct each getter that fills one fills (go-nvml's type,
// generated from nvml.h) and the version NVML wants in it (0: none); a
// reading.Def's Value names its field. A getter of a plain value needs none.
var layouts = map[string]struct {
	t       reflect.Type
	version uint32
}{
	"nvmlDeviceGetUtilizationRates":          {reflect.TypeFor[nvml.Utilization](), 0},
	"nvmlDeviceGetMemoryInfo_v2":             {reflect.TypeFor[nvml.Memory_v2](), 2},
	"nvmlDeviceGetMemoryInfo":                {reflect.TypeFor[nvml.Memory](), 0},
	"nvmlDeviceGetBAR1MemoryInfo":            {reflect.TypeFor[nvml.BAR1Memory](), 0},
	"nvmlDeviceGetSramEccErrorStatus":        {reflect.TypeFor[nvml.EccSramErrorStatus](), 1},
	"nvmlDeviceGetRepairStatus":              {reflect.TypeFor[nvml.RepairStatus](), 1},
	"nvmlDeviceGetUnrepairableMemoryFlag_v1": {reflect.TypeFor[nvml.UnrepairableMemoryStatus_v1](), 0},
	"nvmlDeviceGetGpuFabricInfo_v4":          {reflect.TypeFor[nvml.GpuFabricInfo_v4](), 0},
	"nvmlDeviceGetGpuFabricInfoV":            {reflect.TypeFor[nvml.GpuFabricInfoV](), 3},
	"nvmlDeviceGetGpuFabricInfoV/v2":         {reflect.TypeFor[nvml.GpuFabricInfo_v2](), 2},
	"nvmlDeviceGetGpuFabricInfo":             {reflect.TypeFor[nvml.GpuFabricInfo](), 0},
}

// getterCall is getter fn's call (shape, arg) whose one value is the
// struct field named value of its layout ("": fn gives a plain value of
// type t; "Field+N": the value of type t N bytes into the field).
func getterCall(fn string, shape reading.Shape, arg uint32, value string, t reading.Type) callDef {
	d := callDef{fn: fnOf(fn), name: fn, cc: cCall{shape: shape, arg: arg}}
	cc := &d.cc
	width := uintptr(4)
	if t == reading.U64 {
		width = 8
	}
	if value == "" {
		cc.size = width
		cc.vals = []cVal{{0, cc.size}}
		return d
	}
	l, ok := layouts[fn]
	if !ok {
		panic("sampler: no layout declared for " + fn + ", whose " + value + " a reading reads")
	}
	name, in, part := strings.Cut(value, "+")
	f, ok := l.t.FieldByName(name)
	if !ok {
		panic("sampler: " + l.t.String() + " has no field " + name)
	}
	v := cVal{f.Offset, f.Type.Size()}
	if part {
		n, err := strconv.ParseUint(in, 10, 16)
		if err != nil || uintptr(n)+width > v.size {
			panic("sampler: " + value + " is not inside " + l.t.String() + "." + name)
		}
		v = cVal{v.off + uintptr(n), width}
	}
	cc.size, cc.version = l.t.Size(), l.version
	cc.vals = []cVal{v}
	return d
}

// The values of cThermal (nvmlDeviceGetThermalSettings(sensor 0)).
const (
	thCount = iota
	thController
	thCurrent
	thTarget
)

// getterReading is a reading of reading.Table read by its own call: the
// calls that give it (its Getter's, then each of its Older's: the first one
// planned and answering is used) and which of each call's values it is.
type getterReading struct {
	def   *reading.Def
	calls []call
	part  []int
}

// fanReading is a row of reading.FanTable and, for each fan, the calls
// that give its value (the first one planned and answering is used).
type fanReading struct {
	def   *reading.FanDef
	calls [reading.MaxFans][]call
}

// fieldReading is a reading of reading.Table that NVML gives as a field
// value, and the getter call made instead in the same sample when the
// driver refuses the field (cFields: none).
type fieldReading struct {
	def  *reading.Def
	call call
}

// maxFields bounds the field readings of a sample (the batch's size).
const maxFields = 64

// The sample's numCalls calls and the readings they give, built from the
// tables at start.
var (
	callFn         []callDef
	getterReadings []getterReading
	fanReadings    []fanReading
	fieldReadings  []fieldReading
	cThermal       call
	numCalls       call
)

func init() { buildCalls() }

// maxArgs bounds the capability cache's entries of one function: its fans,
// or its arguments (a getter reading each temperature threshold type, say).
const maxArgs = max(reading.MaxFans, 16)

// buildCalls makes the sample's calls from the tables, in the order they
// are made: the field batch, each getter reading's calls (one per function
// and argument, shared by the readings that read values of the same call;
// older drivers' after the newer, newest first), thermal sensor 0, the
// field readings' fallbacks, then each per-fan reading's calls, fan by fan.
func buildCalls() {
	callFn = []callDef{{fn: FnFieldValues, name: fnInfo[FnFieldValues].name}}
	add := func(d callDef) call {
		// Each argument of a function is switched off on its own: a GPU
		// that refuses NVML_CLOCK_SM still answers the graphics and
		// memory clocks.
		for _, o := range callFn[1:] {
			if d.fan || o.fan || o.fn != d.fn {
				continue
			}
			if o.cc.arg == d.cc.arg {
				d.idx = o.idx
				break
			}
			d.idx = max(d.idx, o.idx+1)
		}
		if d.idx >= maxArgs {
			panic("sampler: more arguments of " + d.name + " than its capability cache holds")
		}
		callFn = append(callFn, d)
		return call(len(callFn) - 1)
	}
	// shared returns the call of fn(arg), made once per sample whatever
	// number of readings read it, with value v added.
	shared := func(fn string, shape reading.Shape, arg uint32, value string, t reading.Type, newer call) (call, int) {
		n := getterCall(fn, shape, arg, value, t)
		v := n.cc.vals[0]
		for c := cFields + 1; c < call(len(callFn)); c++ {
			if d := &callFn[c]; d.fn == n.fn && d.cc.arg == arg && !d.fan {
				if i := slices.Index(d.cc.vals, v); i >= 0 {
					return c, i
				}
				d.cc.vals = append(d.cc.vals, v)
				return c, len(d.cc.vals) - 1
			}
		}
		n.newer = newer
		return add(n), 0
	}
	for i := range reading.Table {
		d := &reading.Table[i]
		if d.Field != 0 || d.Getter == "" {
			continue
		}
		c, p := shared(d.Getter, d.Shape, d.Arg, d.Value, d.Type, 0)
		gr := getterReading{def: d, calls: []call{c}, part: []int{p}}
		for _, fn := range d.Older {
			o, p := shared(fn, d.Shape, d.Arg, cmp.Or(d.OlderValue, d.Value), d.Type, c)
			if o <= c { // the batch makes an older call after the one it stands in for (raw.older)
				panic("sampler: " + fn + " would be made before " + callFn[c].name)
			}
			c = o
			gr.calls, gr.part = append(gr.calls, c), append(gr.part, p)
		}
		getterReadings = append(getterReadings, gr)
	}
	var th nvml.GpuThermalSettings
	b, s0 := unsafe.Pointer(&th), &th.Sensor[0]
	cThermal = add(callDef{fn: FnThermalSettings, name: fnInfo[FnThermalSettings].name, cc: cCall{
		shape: reading.ShapeArgOut, size: unsafe.Sizeof(th),
		vals: []cVal{at(b, &th.Count), at(b, &s0.Controller), at(b, &s0.CurrentTemp), at(b, &s0.Target)},
	}})
	for i := range reading.Table {
		d := &reading.Table[i]
		if d.Field == 0 || d.Call != reading.SampleCall {
			continue
		}
		fr := fieldReading{def: d, call: cFields}
		if d.Getter != "" {
			fr.call = add(getterCall(d.Getter, d.Shape, d.Arg, d.Value, d.Type))
		}
		fieldReadings = append(fieldReadings, fr)
	}
	for i := range reading.FanTable {
		d := &reading.FanTable[i]
		if d.Seldom {
			continue // readFanPolicies (gpu.go)
		}
		fr := fanReading{def: d}
		for fan := range reading.MaxFans {
			c := getterCall(d.Getter, reading.ShapeArgOut, uint32(fan), "", reading.U32)
			c.idx, c.fan = fan, true
			fr.calls[fan] = []call{add(c)}
		}
		if d.Fan0 != "" {
			c := getterCall(d.Fan0, reading.ShapeOut, 0, "", reading.U32)
			c.newer = fr.calls[0][0]
			fr.calls[0] = append(fr.calls[0], add(c))
		}
		fanReadings = append(fanReadings, fr)
	}
	// Calls of one function with different arguments are named by their
	// reading's label (nvmlDeviceGetClockInfo(graphics)).
	for _, gr := range getterReadings {
		c := gr.calls[0]
		for o := range callFn {
			if o != int(c) && callFn[o].fn == callFn[c].fn && !callFn[o].fan {
				callFn[c].name = gr.def.Getter + "(" + gr.def.Metric.Label[1] + ")"
			}
		}
	}
	numCalls = call(len(callFn))
	switch {
	case numCalls > maxCalls:
		panic("sampler: more calls than a sample's batch holds")
	case len(fieldReadings) > maxFields:
		panic("reading.Table: more field readings than maxFields")
	}
	for c := cFields + 1; c < numCalls; c++ {
		if err := callFn[c].fits(); err != nil {
			panic("sampler: " + err.Error())
		}
	}
}

// at is where field f of the struct at base is.
func at[F uint32 | uint64 | int32](base unsafe.Pointer, f *F) cVal {
	return cVal{uintptr(unsafe.Pointer(f)) - uintptr(base), unsafe.Sizeof(*f)}
}

// tierDue reports whether a reading of tier t is read in a sample (a
// static one: on the slow tier, while it has no value: readDue).
func tierDue(t reading.Tier, slow, second bool) bool {
	return (t < reading.Slow || slow) && (t != reading.Secondary || second)
}

// readDue reports whether getter reading d is read in this sample: as its
// tier says, and a static one only until it has a value, which is carried
// from then on (a failed sample clears it: read again).
func (g *GPU) readDue(d *reading.Def, slow, second bool) bool {
	return tierDue(d.Tier, slow, second) && (d.Tier != reading.Static || !g.carry[d.ID()].OK)
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
	// older[c]: the older driver's call of the same readings to make, in
	// the same sample, when the driver does not know call c (function not
	// found, struct version unknown) or the GPU does not support it; later
	// in call order than c.
	older  [maxCalls]uint64
	slow   bool // the slow tier is read in this sample
	second bool // the secondary columns (P-state, utilization, memory) are read
	ret    [maxCalls]int32

	nfields int
	fields  [maxFields]nvml.FieldValue
	fieldQ  [maxFields]int  // the fieldReadings index of each entry
	due     [maxFields]bool // fieldReadings whose tier is read in this sample

	v [maxCalls][maxVals]uint64 // each getter call's values
}

// plan fills r.plan for the next sample.
func (g *GPU) plan(r *raw, fans int, slow, second bool) {
	r.plan, r.fallback, r.slow, r.second = 0, 0, slow, second
	r.fieldFallback, r.older = [maxFields]uint64{}, [maxCalls]uint64{}
	add := func(c call) bool {
		ok := g.can(callFn[c].fn, callFn[c].idx)
		if ok {
			r.plan |= 1 << c
		}
		return ok
	}
	entry := [maxFields]int{} // field entry + 1 of each field reading in the batch
	if g.buildFields(r, slow, second) > 0 && add(cFields) {
		for i := range r.nfields {
			entry[r.fieldQ[i]] = i + 1
		}
	} else {
		r.nfields = 0
	}
	for q, fr := range fieldReadings {
		c := fr.call
		if c == cFields || !r.due[q] || !g.can(callFn[c].fn, callFn[c].idx) {
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
		if !g.readDue(gr.def, slow, second) {
			continue
		}
		// The first of the reading's calls the driver has and has not
		// refused; each next one, if the driver turns out not to know
		// the one before (an R550 asked for a struct version it lacks)
		// or the GPU not to support it.
		prev := call(0)
		for _, c := range gr.calls {
			if !g.can(callFn[c].fn, callFn[c].idx) {
				continue
			}
			if prev == 0 {
				r.plan |= 1 << c
			} else {
				r.older[prev] |= 1 << c
			}
			prev = c
		}
	}
	// A fan's reading takes the first of its calls whose function the
	// library has: the old drivers' nvmlDeviceGetFanSpeed (fan 0 only) is
	// made where nvmlDeviceGetFanSpeed_v2 is missing, not where it refuses
	// a fan (that fan's cell stays empty: TestUnsupportedReadingsAreEmptyCells).
	for i := range fans {
		for j := range fanReadings {
			calls := fanReadings[j].calls[i]
			if k := slices.IndexFunc(calls, func(c call) bool { return g.syms.Has(callFn[c].fn) }); k >= 0 {
				add(calls[k])
			}
		}
	}
	if slow {
		add(cThermal)
	}
}

// buildFields marks the field readings due in this sample, fills the field
// batch with those whose field is not switched off and returns how many.
func (g *GPU) buildFields(r *raw, slow, second bool) int {
	n := 0
	for q, fr := range fieldReadings {
		r.due[q] = tierDue(fr.def.Tier, slow, second)
		if !r.due[q] || !g.on(g.fieldOff[q]) {
			continue
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
	return ret != retNotRun && ret != retLockTimeout && g.end(callFn[c].fn, callFn[c].idx, nvml.Return(ret))
}

// keep sets reading d to v in s, and carries it forward, when v is within
// d's bounds (fn: the function logged for an absurd value).
func (g *GPU) keep(s *reading.Sample, d *reading.Def, fn Fn, v uint64) {
	if g.within(fn, v, d.Min, cmp.Or(d.Max, math.MaxUint64)) {
		d.Set(s, v)
		g.carry[d.ID()] = reading.Some(v)
	}
}

// carried sets reading d in s to the value carried from the last sample
// that read its tier, and reports whether its tier is not read in this one.
func (g *GPU) carried(r *raw, s *reading.Sample, d *reading.Def) bool {
	if g.readDue(d, r.slow, r.second) {
		g.carry[d.ID()] = reading.Opt[uint64]{}
		return false
	}
	if v, ok := g.carry[d.ID()].Get(); ok {
		d.Set(s, v)
	}
	return true
}

// interpret turns r into s. s already holds the time and the fan count.
func (g *GPU) interpret(r *raw, s *reading.Sample, info *reading.GPU) {
	var got [maxFields]bool
	var val [maxFields]uint64
	if r.plan&(1<<cFields) != 0 && g.result(r, cFields) {
		for i := range r.nfields {
			q := r.fieldQ[i]
			val[q], got[q] = g.fieldEntry(&r.fields[i], &g.fieldOff[q])
		}
	}
	for q, fr := range fieldReadings {
		if g.carried(r, s, fr.def) {
			continue
		}
		if c := fr.call; !got[q] && c != cFields && g.result(r, c) {
			val[q], got[q] = r.v[c][0], true
		}
		if got[q] {
			g.keep(s, fr.def, callFn[fr.call].fn, val[q])
		}
	}
	for _, gr := range getterReadings {
		if g.carried(r, s, gr.def) {
			continue
		}
		for j, c := range gr.calls {
			if g.result(r, c) {
				g.keep(s, gr.def, callFn[c].fn, r.v[c][gr.part[j]])
				break
			}
		}
	}
	if t, ok := s.Get(reading.TempC); ok {
		if m, ok := info.Thresholds.GPUMax.Get(); ok {
			reading.Table[reading.TLimitC].Set(s, uint64(int64(int32(m)-int32(t))))
		}
	}
	for i := range s.NumFans {
		for j := range fanReadings {
			fr := &fanReadings[j]
			for _, c := range fr.calls[i] {
				if g.result(r, c) {
					if v := r.v[c][0]; g.within(callFn[c].fn, v, 0, fr.def.Max) {
						fr.def.Set(s, i, uint32(v))
					}
					break
				}
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
