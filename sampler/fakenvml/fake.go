// Package fakenvml is an in-memory NVML for tests: devices whose answers,
// return codes and blocking calls are set per function, and a library over
// them.
package fakenvml

import (
	"cmp"
	"encoding/binary"
	"maps"
	"reflect"
	"runtime/cgo"
	"slices"
	"sync"
	"time"
	"unsafe"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// Dev is a Device whose answers are set per function (Set, Block); calls
// are counted.
type Dev struct {
	mu      sync.Mutex
	h       cgo.Handle // the C handle (handle)
	calls   map[string]int
	ret     map[string]nvml.Return
	all     nvml.Return // SetAll's: every call without a ret of its own; 0 none
	block   map[string]chan struct{}
	entered chan string     // receives the function name when a blocking call starts
	missing map[string]bool // the library's Missing less "nvmlDevice" (Lib.dev): calling one panics

	Name, UUID, Serial, Vbios, Bus string
	Fans                           int
	Thresholds                     map[nvml.TemperatureThresholds]uint32
	// Power, Enforced, Energy, MemTemp and Replay answer both their field
	// and their getter (the fallback where the driver refuses the field).
	Power, Enforced uint32
	Energy          uint64
	MemTemp         uint32
	Replay          int
	FanSpeed        []uint32
	FanTarget       []int
	FieldRet        map[uint32]nvml.Return // per-entry return in GetFieldValues
	// Fields answers other field ids (the health counters) with an
	// UNSIGNED_LONG_LONG value at scope 0; LinkFields by field and scope
	// (link). An id in neither is NOT_SUPPORTED.
	Fields        map[uint32]uint64
	LinkFields    map[[2]uint32]uint64
	Procs, GProcs []nvml.ProcessInfo // compute and graphics processes
	ProcUtil      []nvml.ProcessUtilizationSample
	EventTypes    uint64 // GetSupportedEventTypes' mask
	// SramEcc, Repair and Unrepairable answer the health getters of the
	// same names; nil: NOT_SUPPORTED (a GPU without them).
	SramEcc      *nvml.EccSramErrorStatus
	Repair       *nvml.RepairStatus
	Unrepairable *nvml.UnrepairableMemoryStatus_v1
	// Fabric answers GetGpuFabricInfo_v4 and, as its v3 or v2 struct (no
	// summary), GetGpuFabricInfoV and as its original one (no health mask
	// or summary: R535) GetGpuFabricInfo; nil: NOT_SUPPORTED (a GPU of no
	// NVLink fabric). FabricV2Only: GetGpuFabricInfoV knows no v3 struct
	// (an R550's, whose nvml.h has v2 as nvmlGpuFabricInfoV_t).
	Fabric       *nvml.GpuFabricInfo_v4
	FabricV2Only bool
	// Latency is how long every call takes, as on a slow driver.
	Latency time.Duration

	// Hist answers GetRowRemapperHistogram (nil: NOT_SUPPORTED); DL
	// answers GetNvLinkErrorCounter by link and counter (a pair not in it:
	// NOT_SUPPORTED).
	Hist *nvml.RowRemapperHistogramValues
	DL   map[[2]int]uint64

	// Getters answers any getter of the sampler's batch: a plain value
	// (uint32, uint64) or go-nvml's struct (a versioned one with its
	// Version set); NewDev fills those of a healthy GPU. A getter in
	// neither Getters nor the fields above answers zeros with SUCCESS.
	Getters map[Getter]any
	// GetterRet makes one argument of a getter return its result (set it
	// under Update), where Set makes every argument's.
	GetterRet map[Getter]nvml.Return

	// FanMin and FanMax answer GetMinMaxFanSpeed, the range a setter
	// accepts. FanCmd is what the setters left per fan: the speed
	// SetFanSpeed_v2 commanded, -1 (or no entry) while the firmware has it.
	FanMin, FanMax int
	FanCmd         []int
}

// Getter is a getter call: the function's name less "nvmlDevice", and its
// argument (0 for a getter without one).
type Getter struct {
	Fn  string
	Arg uint32
}

// getter writes the answer of getter fn(arg) to out, zeroed by batch.c
// (the caller holds d.mu). A versioned struct is given only to a caller
// that set its version, as NVML does. No answer allocates (the sampler's
// samples do not).
func (d *Dev) getter(fn string, arg uint32, out unsafe.Pointer) nvml.Return {
	if r, ok := d.GetterRet[Getter{fn, arg}]; ok {
		return r
	}
	if v, ok := d.Getters[Getter{fn, arg}]; ok {
		t := reflect.TypeOf(v)
		p := (*[2]unsafe.Pointer)(unsafe.Pointer(&v))[1] // the value
		if t.Kind() == reflect.Struct && t.Field(0).Name == "Version" && *(*uint32)(out) != *(*uint32)(p) {
			return nvml.ERROR_ARGUMENT_VERSION_MISMATCH
		}
		copy(unsafe.Slice((*byte)(out), t.Size()), unsafe.Slice((*byte)(p), t.Size()))
		return nvml.SUCCESS
	}
	switch fn {
	case "GetPowerUsage":
		return put(out, d.Power)
	case "GetEnforcedPowerLimit":
		return put(out, d.Enforced)
	case "GetTotalEnergyConsumption":
		return put(out, d.Energy)
	case "GetPcieReplayCounter":
		return put(out, uint32(d.Replay))
	case "GetFanSpeed":
		return put(out, d.FanSpeed[0])
	case "GetFanSpeed_v2":
		if int(arg) < len(d.FanSpeed) {
			return put(out, d.FanSpeed[arg])
		}
		return nvml.ERROR_NOT_SUPPORTED
	case "GetTargetFanSpeed":
		if int(arg) < len(d.FanTarget) {
			return put(out, uint32(d.FanTarget[arg]))
		}
		return nvml.ERROR_NOT_SUPPORTED
	case "GetSramEccErrorStatus":
		return putOpt(out, d.SramEcc, 1)
	case "GetRepairStatus":
		return putOpt(out, d.Repair, 1)
	case "GetUnrepairableMemoryFlag_v1":
		return putOpt(out, d.Unrepairable, 0)
	case "GetGpuFabricInfo_v4":
		return putOpt(out, d.Fabric, 0)
	case "GetGpuFabricInfoV":
		var v2 *nvml.GpuFabricInfo_v2
		if *(*uint32)(out) == uint32(unsafe.Sizeof(*v2))|2<<24 {
			if f := d.Fabric; f != nil {
				v2 = &nvml.GpuFabricInfo_v2{ClusterUuid: f.ClusterUuid, Status: f.Status, CliqueId: f.Cliques[0].Id, State: f.State, HealthMask: f.HealthMask}
			}
			return putOpt(out, v2, 2)
		}
		var v3 *nvml.GpuFabricInfoV
		if d.FabricV2Only {
			return nvml.ERROR_ARGUMENT_VERSION_MISMATCH
		}
		if f := d.Fabric; f != nil {
			v3 = &nvml.GpuFabricInfoV{Version: uint32(unsafe.Sizeof(*v3)) | 3<<24, ClusterUuid: f.ClusterUuid, Status: f.Status,
				CliqueId: f.Cliques[0].Id, State: f.State, HealthMask: f.HealthMask, HealthSummary: f.HealthSummary}
		}
		return putOpt(out, v3, 3)
	case "GetGpuFabricInfo":
		var v1 *nvml.GpuFabricInfo
		if f := d.Fabric; f != nil {
			v1 = &nvml.GpuFabricInfo{ClusterUuid: f.ClusterUuid, Status: f.Status, CliqueId: f.Cliques[0].Id, State: f.State}
		}
		return putOpt(out, v1, 0)
	}
	return nvml.SUCCESS
}

func put[T any](out unsafe.Pointer, v T) nvml.Return {
	*(*T)(out) = v
	return nvml.SUCCESS
}

// putOpt writes *v (of NVML's version ver, set in its first field; 0:
// unversioned) to out if the caller set that version, or answers
// NOT_SUPPORTED while v is nil (a GPU without the getter).
func putOpt[T any](out unsafe.Pointer, v *T, ver uint32) nvml.Return {
	w := uint32(unsafe.Sizeof(*v)) | ver<<24
	switch {
	case v == nil:
		return nvml.ERROR_NOT_SUPPORTED
	case ver != 0 && *(*uint32)(out) != w:
		return nvml.ERROR_ARGUMENT_VERSION_MISMATCH
	}
	*(*T)(out) = *v
	if ver != 0 {
		*(*uint32)(out) = w
	}
	return nvml.SUCCESS
}

// NewDev returns a healthy two-fan GPU.
func NewDev() *Dev {
	mem := nvml.Memory_v2{Version: uint32(unsafe.Sizeof(nvml.Memory_v2{})) | 2<<24, Used: 40 << 30, Total: 96 << 30}
	return &Dev{
		calls: map[string]int{}, ret: map[string]nvml.Return{}, block: map[string]chan struct{}{},
		FieldRet: map[uint32]nvml.Return{},
		Name:     "NVIDIA RTX PRO 6000 Blackwell", UUID: "GPU-1111", Serial: "1650", Vbios: "98.02", Bus: "00000000:4B:00.0",
		Fans: 2,
		Thresholds: map[nvml.TemperatureThresholds]uint32{
			nvml.TEMPERATURE_THRESHOLD_SHUTDOWN: 98, nvml.TEMPERATURE_THRESHOLD_SLOWDOWN: 95,
			nvml.TEMPERATURE_THRESHOLD_MEM_MAX: 95, nvml.TEMPERATURE_THRESHOLD_GPU_MAX: 90,
		},
		Power: 250_500, Enforced: 600_000, Energy: 123456789, MemTemp: 70, Replay: 3,
		FanSpeed: []uint32{30, 31}, FanTarget: []int{30, 31}, FanMin: 30, FanMax: 100, FanCmd: []int{-1, -1},
		Getters: map[Getter]any{
			{"GetTemperature", 0}: uint32(60), {"GetPowerManagementLimit", 0}: uint32(600_000),
			{"GetPerformanceState", 0}:                    uint32(nvml.PSTATE_2),
			{"GetClockInfo", uint32(nvml.CLOCK_GRAPHICS)}: uint32(2400), {"GetClockInfo", uint32(nvml.CLOCK_SM)}: uint32(2400),
			{"GetClockInfo", uint32(nvml.CLOCK_MEM)}: uint32(14001),
			{"GetUtilizationRates", 0}:               nvml.Utilization{Gpu: 97, Memory: 41},
			{"GetMemoryInfo_v2", 0}:                  mem, {"GetMemoryInfo", 0}: nvml.Memory{Used: mem.Used, Total: mem.Total},
			{"GetCurrentClocksEventReasons", 0}: uint64(0x4), {"GetCurrentClocksThrottleReasons", 0}: uint64(0x4),
			{"GetEncoderUtilization", 0}: uint32(0), {"GetDecoderUtilization", 0}: uint32(12),
			{"GetCurrPcieLinkGeneration", 0}: uint32(5), {"GetCurrPcieLinkWidth", 0}: uint32(16),
			{"GetThermalSettings", 0}: nvml.GpuThermalSettings{Count: 1, Sensor: [3]nvml.GpuThermalSettingsSensor{{Controller: 5, CurrentTemp: 60, Target: 1}}},
		},
		EventTypes: uint64(nvml.EventTypeXidCriticalError | nvml.EventTypePState | nvml.EventTypeClock | nvml.EventTypeGpuRecoveryAction),
	}
}

func (d *Dev) call(fn string) nvml.Return {
	d.mu.Lock()
	d.calls[fn]++ // before the panic: a count of one the library lacks says it was called
	if d.missing[fn] {
		d.mu.Unlock()
		panic("fakenvml: nvmlDevice" + fn + " called, which the library lacks (Lib.Missing): a real process dies here")
	}
	r, ok := d.ret[fn]
	if !ok && d.all != 0 {
		r, ok = d.all, true
	}
	b := d.block[fn]
	entered := d.entered
	lat := d.Latency
	d.mu.Unlock()
	if lat > 0 {
		time.Sleep(lat)
	}
	if b != nil {
		if entered != nil {
			entered <- fn
		}
		<-b
	}
	if !ok {
		return nvml.SUCCESS
	}
	return r
}

// Update changes the device's values under its lock (safe while it is sampled).
func (d *Dev) Update(f func(d *Dev)) {
	d.mu.Lock()
	defer d.mu.Unlock()
	f(d)
}

// Block makes calls of fn wait until release is called; entered, if not
// nil, receives fn each time such a call starts waiting.
func (d *Dev) Block(fn string, entered chan string) (release func()) {
	ch := make(chan struct{})
	d.mu.Lock()
	d.block[fn] = ch
	d.entered = entered
	d.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			d.mu.Lock()
			delete(d.block, fn)
			d.mu.Unlock()
			close(ch)
		})
	}
}

// Count returns how many times fn was called.
func (d *Dev) Count(fn string) int { return d.Calls()[fn] }

// Calls returns a copy of the call counts by function.
func (d *Dev) Calls() map[string]int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return maps.Clone(d.calls)
}

// Total returns the number of calls of all functions.
func (d *Dev) Total() (n int) {
	for _, c := range d.Calls() {
		n += c
	}
	return n
}

// Set makes fn return r from now on.
func (d *Dev) Set(fn string, r nvml.Return) {
	d.mu.Lock()
	d.ret[fn] = r
	d.mu.Unlock()
}

// SetAll makes every function without a return set of its own (Set)
// return r from now on.
func (d *Dev) SetAll(r nvml.Return) {
	d.mu.Lock()
	d.all = r
	d.mu.Unlock()
}

// answer is a device query: the call to fn is counted and scripted
// (Dev.call), then get reads the answer under the device's lock.
func answer[T any](d *Dev, fn string, get func() T) (T, nvml.Return) {
	r := d.call(fn)
	d.mu.Lock()
	defer d.mu.Unlock()
	return get(), r
}

func (d *Dev) GetName() (string, nvml.Return) {
	return answer(d, "GetName", func() string { return d.Name })
}
func (d *Dev) GetUUID() (string, nvml.Return) {
	return answer(d, "GetUUID", func() string { return d.UUID })
}
func (d *Dev) GetSerial() (string, nvml.Return) {
	return answer(d, "GetSerial", func() string { return d.Serial })
}
func (d *Dev) GetVbiosVersion() (string, nvml.Return) {
	return answer(d, "GetVbiosVersion", func() string { return d.Vbios })
}
func (d *Dev) GetPciInfo() (nvml.PciInfo, nvml.Return) {
	return answer(d, "GetPciInfo", func() nvml.PciInfo {
		var p nvml.PciInfo
		for i := 0; i < len(d.Bus); i++ {
			p.BusId[i] = int8(d.Bus[i])
		}
		return p
	})
}
func (d *Dev) GetMinorNumber() (int, nvml.Return) {
	return answer(d, "GetMinorNumber", func() int { return 3 })
}
func (d *Dev) GetNumFans() (int, nvml.Return) {
	return answer(d, "GetNumFans", func() int { return d.Fans })
}
func (d *Dev) GetTemperatureThreshold(t nvml.TemperatureThresholds) (uint32, nvml.Return) {
	return optional(d, "GetTemperatureThreshold", func() *uint32 { return lookup(d.Thresholds, t) })
}
func (d *Dev) GetGspFirmwareVersion() (string, nvml.Return) {
	return answer(d, "GetGspFirmwareVersion", func() string { return "570.124.06" })
}
func (d *Dev) GetGspFirmwareMode() (bool, bool, nvml.Return) {
	on, r := answer(d, "GetGspFirmwareMode", func() bool { return true })
	return on, on, r
}
func (d *Dev) GetPowerManagementDefaultLimit() (uint32, nvml.Return) {
	return answer(d, "GetPowerManagementDefaultLimit", func() uint32 { return 600_000 })
}

func (d *Dev) GetFieldValues(v []nvml.FieldValue) nvml.Return {
	r := d.call("GetFieldValues")
	if r != nvml.SUCCESS {
		return r
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for i := range v {
		f := &v[i]
		if fr, ok := d.FieldRet[f.FieldId]; ok {
			f.NvmlReturn = uint32(fr)
			continue
		}
		f.NvmlReturn = uint32(nvml.SUCCESS)
		typ, v := nvml.VALUE_TYPE_UNSIGNED_INT, uint64(0)
		switch f.FieldId {
		case nvml.FI_DEV_POWER_INSTANT:
			v = uint64(d.Power)
		case nvml.FI_DEV_POWER_CURRENT_LIMIT:
			v = uint64(d.Enforced)
		case nvml.FI_DEV_TOTAL_ENERGY_CONSUMPTION:
			typ, v = nvml.VALUE_TYPE_UNSIGNED_LONG_LONG, d.Energy
		case nvml.FI_DEV_MEMORY_TEMP:
			v = uint64(d.MemTemp)
		case nvml.FI_DEV_PCIE_REPLAY_COUNTER:
			v = uint64(uint32(d.Replay))
		default:
			var ok bool
			v, ok = d.LinkFields[[2]uint32{f.FieldId, f.ScopeId}]
			if !ok && f.ScopeId == 0 {
				v, ok = d.Fields[f.FieldId]
			}
			if !ok {
				f.NvmlReturn = uint32(nvml.ERROR_NOT_SUPPORTED)
				continue
			}
			typ = nvml.VALUE_TYPE_UNSIGNED_LONG_LONG
		}
		f.ValueType = uint32(typ)
		if typ == nvml.VALUE_TYPE_UNSIGNED_INT {
			// 4 bytes, the rest left as the caller had them, as NVML does:
			// a reader decoding it as 8 bytes reads what the caller left.
			binary.LittleEndian.PutUint32(f.Value[:], uint32(v))
		} else {
			binary.LittleEndian.PutUint64(f.Value[:], v)
		}
	}
	return r
}

func (d *Dev) GetFanSpeed() (uint32, nvml.Return) {
	return answer(d, "GetFanSpeed", func() uint32 { return d.FanSpeed[0] })
}

// optional answers a getter a GPU may lack: NOT_SUPPORTED while v is nil.
func optional[T any](d *Dev, fn string, v func() *T) (out T, r nvml.Return) {
	ok, r := answer(d, fn, func() bool {
		p := v()
		if p != nil {
			out = *p // copied under the device's lock
		}
		return p != nil
	})
	if !ok && r == nvml.SUCCESS {
		r = nvml.ERROR_NOT_SUPPORTED
	}
	return out, r
}

func (d *Dev) GetFanControlPolicy_v2(fan int) (nvml.FanControlPolicy, nvml.Return) {
	return answer(d, "GetFanControlPolicy_v2", func() nvml.FanControlPolicy {
		if fan < len(d.FanCmd) && d.FanCmd[fan] >= 0 {
			return nvml.FAN_POLICY_MANUAL
		}
		return nvml.FAN_POLICY_TEMPERATURE_CONTINOUS_SW
	})
}

// The fan calls a fan guard makes, each counted; a fan past Fans is an
// invalid argument, a fanless GPU supports none, as in NVML.

func (d *Dev) GetMinMaxFanSpeed() (int, int, nvml.Return) {
	mm, r := fanCall(d, "GetMinMaxFanSpeed", 0, func() [2]int { return [2]int{d.FanMin, d.FanMax} })
	return mm[0], mm[1], r
}

// SetFanSpeed_v2 commands speed (within FanMin..FanMax): the fan runs at it.
func (d *Dev) SetFanSpeed_v2(fan, speed int) nvml.Return {
	_, r := fanCall(d, "SetFanSpeed_v2", fan, func() nvml.Return {
		if speed < d.FanMin || speed > d.FanMax {
			return nvml.ERROR_INVALID_ARGUMENT
		}
		d.command(fan, speed, uint32(speed))
		return nvml.SUCCESS
	})
	return r
}

// SetDefaultFanSpeed_v2 hands fan back to the firmware: it runs at its target.
func (d *Dev) SetDefaultFanSpeed_v2(fan int) nvml.Return {
	_, r := fanCall(d, "SetDefaultFanSpeed_v2", fan, func() nvml.Return {
		d.command(fan, -1, uint32(d.FanTarget[fan]))
		return nvml.SUCCESS
	})
	return r
}

// SetFanControlPolicy: manual holds the fan where it runs, auto hands it back.
func (d *Dev) SetFanControlPolicy(fan int, p nvml.FanControlPolicy) nvml.Return {
	_, r := fanCall(d, "SetFanControlPolicy", fan, func() nvml.Return {
		switch p {
		case nvml.FAN_POLICY_MANUAL:
			d.command(fan, int(d.FanSpeed[fan]), d.FanSpeed[fan])
		case nvml.FAN_POLICY_TEMPERATURE_CONTINOUS_SW:
			d.command(fan, -1, uint32(d.FanTarget[fan]))
		default:
			return nvml.ERROR_INVALID_ARGUMENT
		}
		return nvml.SUCCESS
	})
	return r
}

// command records fan's command cmd and the speed it now runs at (d.mu held).
func (d *Dev) command(fan, cmd int, speed uint32) {
	for len(d.FanCmd) <= fan {
		d.FanCmd = append(d.FanCmd, -1)
	}
	d.FanCmd[fan] = cmd
	d.FanSpeed[fan] = speed
}

// fanCall is a per-fan call: counted and scripted (Dev.call), then checked
// like NVML checks a fan index, then answered by get under the device's
// lock. A get that yields an nvml.Return has it returned as the call's.
func fanCall[T any](d *Dev, fn string, fan int, get func() T) (v T, r nvml.Return) {
	if r = d.call(fn); r != nvml.SUCCESS {
		return v, r
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	switch {
	case d.Fans == 0:
		return v, nvml.ERROR_NOT_SUPPORTED
	case fan < 0 || fan >= d.Fans || fan >= len(d.FanSpeed) || fan >= len(d.FanTarget):
		return v, nvml.ERROR_INVALID_ARGUMENT
	}
	v = get()
	if ret, ok := any(v).(nvml.Return); ok {
		return v, ret
	}
	return v, nvml.SUCCESS
}
func (d *Dev) GetComputeRunningProcesses() ([]nvml.ProcessInfo, nvml.Return) {
	return answer(d, "GetComputeRunningProcesses", func() []nvml.ProcessInfo { return append([]nvml.ProcessInfo(nil), d.Procs...) })
}
func (d *Dev) GetGraphicsRunningProcesses() ([]nvml.ProcessInfo, nvml.Return) {
	return answer(d, "GetGraphicsRunningProcesses", func() []nvml.ProcessInfo { return append([]nvml.ProcessInfo(nil), d.GProcs...) })
}

// GetProcessUtilization returns the samples newer than last, or NOT_FOUND
// (as NVML does).
func (d *Dev) GetProcessUtilization(last uint64) ([]nvml.ProcessUtilizationSample, nvml.Return) {
	out, r := answer(d, "GetProcessUtilization", func() []nvml.ProcessUtilizationSample {
		return slices.DeleteFunc(slices.Clone(d.ProcUtil), func(u nvml.ProcessUtilizationSample) bool { return u.TimeStamp <= last })
	})
	if r != nvml.SUCCESS || len(out) == 0 {
		return nil, cmp.Or(r, nvml.ERROR_NOT_FOUND)
	}
	return out, r
}
func (d *Dev) GetSupportedEventTypes() (uint64, nvml.Return) {
	return answer(d, "GetSupportedEventTypes", func() uint64 { return d.EventTypes })
}

func (d *Dev) GetRowRemapperHistogram() (nvml.RowRemapperHistogramValues, nvml.Return) {
	return optional(d, "GetRowRemapperHistogram", func() *nvml.RowRemapperHistogramValues { return d.Hist })
}

func (d *Dev) GetNvLinkErrorCounter(link int, c nvml.NvLinkErrorCounter) (uint64, nvml.Return) {
	return optional(d, "GetNvLinkErrorCounter", func() *uint64 { return lookup(d.DL, [2]int{link, int(c)}) })
}

// lookup is m[k] for optional: nil when k is not in m.
func lookup[K comparable, V any](m map[K]V, k K) *V {
	if v, ok := m[k]; ok {
		return &v
	}
	return nil
}
