package sampler

import (
	"cmp"
	"fmt"
	"math"
	"reflect"
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

// call identifies one NVML call of a sample: its index in callFn, which
// is the order calls are made in (batch.c is handed callFn's descriptions).
// Call 0 is the field batch; the getter calls are built from reading.Table
// and reading.FanTable (buildCalls).
type call uint8

const cFields call = 0 // nvmlDeviceGetFieldValues: the batched quantities

// callDef is one call: its function and capability index, how batch.c
// makes it, and the name the probe gives it.
type callDef struct {
	fn    Fn
	idx   int // the fan of a per-fan call; 0 otherwise
	cc    cCall
	fan   bool // a per-fan call: fan idx's of a reading.FanTable row
	newer call // the call an older driver's call stands in for (0: none)
	name  string
}

// cCall is how batch.c makes a call (batch.h's gt_call, less the function,
// which each library gives by fnInfo's symbol): its shape and argument, the
// struct it fills (size and version: go-nvml's type, generated from
// nvml.h) and where each value is in it.
type cCall struct {
	shape   reading.Shape
	arg     uint32
	size    uintptr
	version uint32 // written as NVML_STRUCT_VERSION(size, version); 0 none
	vals    []cVal
}

// cVal is where one value of a call is in its struct: offset and size
// (4 or 8 bytes, unsigned).
type cVal struct{ off, size uintptr }

// maxVals bounds the values of a call, maxOut the struct it fills, maxCalls
// a sample's calls (batch.h GT_MAXVALS, GT_MAXOUT, GT_MAXCALLS).
const (
	maxVals  = 4
	maxOut   = 128
	maxCalls = 64
)

// outLimit is the most bytes a call of shape s may fill: batch.c hands an
// f(dev, out, out2) call the two halves of its buffer, so its first struct
// (where its values are) must fit in the first half.
func outLimit(s reading.Shape) uintptr {
	if s == reading.ShapeOutOut {
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
		return fmt.Errorf("call %s fills more than batch.c holds", d.name)
	}
	for _, v := range cc.vals {
		if v.off+v.size > cc.size || (v.size != 4 && v.size != 8) {
			return fmt.Errorf("a value of call %s is outside its struct", d.name)
		}
	}
	return nil
}

// layout is a struct a getter fills: go-nvml's type for it (generated from
// nvml.h) and the version NVML wants written in it (0: unversioned).
type layout struct {
	t       reflect.Type
	version uint32
}

// layouts is the struct each getter that fills one fills, declared once per
// function; a reading.Def's Value names the field that holds its value. A
// getter of a plain unsigned value needs none.
var layouts = map[string]layout{
	"nvmlDeviceGetUtilizationRates":          {reflect.TypeFor[nvml.Utilization](), 0},
	"nvmlDeviceGetMemoryInfo_v2":             {reflect.TypeFor[nvml.Memory_v2](), 2},
	"nvmlDeviceGetMemoryInfo":                {reflect.TypeFor[nvml.Memory](), 0},
	"nvmlDeviceGetSramEccErrorStatus":        {reflect.TypeFor[nvml.EccSramErrorStatus](), 1},
	"nvmlDeviceGetRepairStatus":              {reflect.TypeFor[nvml.RepairStatus](), 1},
	"nvmlDeviceGetUnrepairableMemoryFlag_v1": {reflect.TypeFor[nvml.UnrepairableMemoryStatus_v1](), 0},
}

// getterCall describes getter fn's call (shape, arg) whose value is the
// struct field named value of its layout ("": fn gives a plain value of
// type t).
func getterCall(fn string, shape reading.Shape, arg uint32, value string, t reading.Type) (cCall, cVal) {
	cc := cCall{shape: shape, arg: arg}
	if value == "" {
		cc.size = 4
		if t == reading.U64 {
			cc.size = 8
		}
		return cc, cVal{0, cc.size}
	}
	l, ok := layouts[fn]
	if !ok {
		panic("sampler: no layout declared for " + fn + ", whose " + value + " a reading reads")
	}
	f, ok := l.t.FieldByName(value)
	if !ok {
		panic("sampler: " + l.t.String() + " has no field " + value)
	}
	cc.size, cc.version = l.t.Size(), l.version
	return cc, cVal{f.Offset, f.Type.Size()}
}

// Thermal settings (cThermal, nvmlDeviceGetThermalSettings(sensor 0)):
// the sensor count, then sensor 0's values.
const (
	thCount = iota
	thController
	thCurrent
	thTarget
)

// getterReading is a reading of reading.Table read by its own call: the
// calls that give it (its Getter's, then its Older's: the first one planned
// and answering is used) and which of each call's values it is.
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
// value: read in the sample's one GetFieldValues, with the getter call made
// instead in the same sample when the driver refuses the field (cFields:
// none), and the function whose "absurd value" it logs.
type fieldReading struct {
	def  *reading.Def
	call call
	fn   Fn
}

// maxFields bounds the field readings of a sample (the batch's size).
const maxFields = 64

// The sample's calls and the readings they give, built from the tables at
// start: numCalls calls, numQ field readings.
var (
	callFn         []callDef
	getterReadings []getterReading
	fanReadings    []fanReading
	fieldReadings  []fieldReading
	cThermal       call
	numCalls       call
	numQ           int
)

func init() { buildCalls() }

// buildCalls makes the sample's calls from the tables, in the order they
// are made: the field batch, each getter reading's calls (one per function
// and argument, shared by the readings that read values of the same call;
// an older driver's after the newer), thermal sensor 0, the field readings'
// fallbacks, then each per-fan reading's calls, fan by fan.
func buildCalls() {
	callFn = []callDef{{fn: FnFieldValues, name: fnInfo[FnFieldValues].name}}
	add := func(d callDef) call {
		callFn = append(callFn, d)
		return call(len(callFn) - 1)
	}
	// shared returns the call of fn(arg), made once per sample whatever
	// number of readings read it, with value v added.
	shared := func(fn string, shape reading.Shape, arg uint32, value string, t reading.Type, newer call) (call, int) {
		cc, v := getterCall(fn, shape, arg, value, t)
		f := fnOf(fn)
		for c := cFields + 1; c < call(len(callFn)); c++ {
			d := &callFn[c]
			if d.fn == f && d.cc.arg == arg && !d.fan {
				if i := slices.Index(d.cc.vals, v); i >= 0 {
					return c, i
				}
				d.cc.vals = append(d.cc.vals, v)
				return c, len(d.cc.vals) - 1
			}
		}
		cc.vals = []cVal{v}
		return add(callDef{fn: f, cc: cc, newer: newer, name: fn}), 0
	}
	for i := range reading.Table {
		d := &reading.Table[i]
		if d.Field != 0 || d.Getter == "" {
			continue
		}
		gr := getterReading{def: d}
		c, p := shared(d.Getter, d.Shape, d.Arg, d.Value, d.Type, 0)
		gr.calls, gr.part = append(gr.calls, c), append(gr.part, p)
		if d.Older != "" {
			o, p := shared(d.Older, d.Shape, d.Arg, d.Value, d.Type, c)
			gr.calls, gr.part = append(gr.calls, o), append(gr.part, p)
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
		fr := fieldReading{def: d, call: cFields, fn: FnFieldValues}
		if d.Getter != "" {
			cc, v := getterCall(d.Getter, d.Shape, d.Arg, d.Value, d.Type)
			cc.vals = []cVal{v}
			fr.fn = fnOf(d.Getter)
			fr.call = add(callDef{fn: fr.fn, cc: cc, name: d.Getter})
		}
		fieldReadings = append(fieldReadings, fr)
	}
	for i := range reading.FanTable {
		d := &reading.FanTable[i]
		fr := fanReading{def: d}
		for fan := range reading.MaxFans {
			cc, v := getterCall(d.Getter, reading.ShapeArgOut, uint32(fan), "", reading.U32)
			cc.vals = []cVal{v}
			fr.calls[fan] = []call{add(callDef{fn: fnOf(d.Getter), idx: fan, cc: cc, fan: true, name: d.Getter})}
		}
		if d.Fan0 != "" {
			cc, v := getterCall(d.Fan0, reading.ShapeOut, 0, "", reading.U32)
			cc.vals = []cVal{v}
			fr.calls[0] = append(fr.calls[0], add(callDef{fn: fnOf(d.Fan0), cc: cc, newer: fr.calls[0][0], name: d.Fan0}))
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
	numCalls, numQ = call(len(callFn)), len(fieldReadings)
	switch {
	case numCalls > maxCalls:
		panic("sampler: more calls than a sample's batch holds")
	case numQ > maxFields:
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
	ret           [maxCalls]int32

	nfields int
	fields  [maxFields]nvml.FieldValue
	fieldQ  [maxFields]int  // the fieldReadings index of each entry
	due     [maxFields]bool // fieldReadings whose tier is read in this sample

	v [maxCalls][maxVals]uint64 // each getter call's values
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
			if v, ok := g.carry[fr.def.ID()].Get(); ok {
				fr.def.Set(s, v)
			}
			continue
		}
		if c := fr.call; !got[q] && c != cFields && g.result(r, c) {
			val[q], got[q] = r.v[c][0], true
		}
		g.carry[fr.def.ID()] = reading.Opt[uint64]{}
		if d := fr.def; got[q] && g.within(fr.fn, val[q], d.Min, cmp.Or(d.Max, math.MaxUint64)) {
			d.Set(s, val[q])
			g.carry[d.ID()] = reading.Some(val[q])
		}
	}

	for _, gr := range getterReadings {
		d := gr.def
		if !tierDue(d.Tier, r.slow, r.second) { // carried forward
			if v, ok := g.carry[d.ID()].Get(); ok {
				d.Set(s, v)
			}
			continue
		}
		g.carry[d.ID()] = reading.Opt[uint64]{}
		for j, c := range gr.calls {
			if !g.result(r, c) {
				continue
			}
			if v := r.v[c][gr.part[j]]; g.within(callFn[c].fn, v, d.Min, cmp.Or(d.Max, math.MaxUint64)) {
				d.Set(s, v)
				g.carry[d.ID()] = reading.Some(v)
			}
			break
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
