package sampler

import (
	"encoding/binary"
	"sync"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// fakeDev is a Device whose answers are set per function. Unset functions
// return their value with SUCCESS; ret[fn] overrides the return code; block[fn]
// makes the call wait until the channel is closed. Calls are counted.
type fakeDev struct {
	mu      sync.Mutex
	calls   map[string]int
	ret     map[string]nvml.Return
	block   map[string]chan struct{}
	entered chan string // receives the function name when a blocking call starts

	name, uuid, serial, vbios, bus string
	fans                           int
	temp                           uint32
	thresholds                     map[nvml.TemperatureThresholds]uint32
	power, limit, enforced         uint32
	energy                         uint64
	memTemp                        uint32
	replay                         int
	pstate                         nvml.Pstates
	clocks                         map[nvml.ClockType]uint32
	util                           nvml.Utilization
	memUsed                        uint64
	gen, width                     int
	throttle                       uint64
	fanSpeed                       []uint32
	fanTarget                      []int
	sensor                         nvml.GpuThermalSettingsSensor
	enc, dec                       uint32
	fieldRet                       map[uint32]nvml.Return // per-entry return in GetFieldValues
}

func newFakeDev() *fakeDev {
	return &fakeDev{
		calls: map[string]int{}, ret: map[string]nvml.Return{}, block: map[string]chan struct{}{},
		fieldRet: map[uint32]nvml.Return{},
		name:     "NVIDIA RTX PRO 6000 Blackwell", uuid: "GPU-1111", serial: "1650", vbios: "98.02", bus: "00000000:4B:00.0",
		fans: 2, temp: 60,
		thresholds: map[nvml.TemperatureThresholds]uint32{
			nvml.TEMPERATURE_THRESHOLD_SHUTDOWN: 98, nvml.TEMPERATURE_THRESHOLD_SLOWDOWN: 95,
			nvml.TEMPERATURE_THRESHOLD_MEM_MAX: 95, nvml.TEMPERATURE_THRESHOLD_GPU_MAX: 90,
		},
		power: 250_500, limit: 600_000, enforced: 600_000, energy: 123456789, memTemp: 70, replay: 3,
		pstate: nvml.PSTATE_2,
		clocks: map[nvml.ClockType]uint32{nvml.CLOCK_GRAPHICS: 2400, nvml.CLOCK_SM: 2400, nvml.CLOCK_MEM: 14001},
		util:   nvml.Utilization{Gpu: 97, Memory: 41}, memUsed: 40 << 30, gen: 5, width: 16,
		throttle: 0x4, fanSpeed: []uint32{30, 31}, fanTarget: []int{30, 31},
		sensor: nvml.GpuThermalSettingsSensor{Controller: 5, CurrentTemp: 60, Target: 1},
		enc:    0, dec: 12,
	}
}

func (d *fakeDev) call(fn string) nvml.Return {
	d.mu.Lock()
	d.calls[fn]++
	r, ok := d.ret[fn]
	b := d.block[fn]
	d.mu.Unlock()
	if b != nil {
		if d.entered != nil {
			d.entered <- fn
		}
		<-b
	}
	if !ok {
		return nvml.SUCCESS
	}
	return r
}

func (d *fakeDev) count(fn string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.calls[fn]
}

func (d *fakeDev) total() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := 0
	for _, c := range d.calls {
		n += c
	}
	return n
}

func (d *fakeDev) set(fn string, r nvml.Return) {
	d.mu.Lock()
	d.ret[fn] = r
	d.mu.Unlock()
}

func (d *fakeDev) GetName() (string, nvml.Return)   { return d.name, d.call("GetName") }
func (d *fakeDev) GetUUID() (string, nvml.Return)   { return d.uuid, d.call("GetUUID") }
func (d *fakeDev) GetSerial() (string, nvml.Return) { return d.serial, d.call("GetSerial") }
func (d *fakeDev) GetVbiosVersion() (string, nvml.Return) {
	return d.vbios, d.call("GetVbiosVersion")
}
func (d *fakeDev) GetPciInfo() (nvml.PciInfo, nvml.Return) {
	var p nvml.PciInfo
	for i := 0; i < len(d.bus); i++ {
		p.BusId[i] = int8(d.bus[i])
	}
	return p, d.call("GetPciInfo")
}
func (d *fakeDev) GetMinorNumber() (int, nvml.Return) { return 3, d.call("GetMinorNumber") }
func (d *fakeDev) GetNumFans() (int, nvml.Return)     { return d.fans, d.call("GetNumFans") }
func (d *fakeDev) GetTemperatureThreshold(t nvml.TemperatureThresholds) (uint32, nvml.Return) {
	v, ok := d.thresholds[t]
	r := d.call("GetTemperatureThreshold")
	if !ok && r == nvml.SUCCESS {
		return 0, nvml.ERROR_NOT_SUPPORTED
	}
	return v, r
}
func (d *fakeDev) GetGspFirmwareVersion() (string, nvml.Return) {
	return "570.124.06", d.call("GetGspFirmwareVersion")
}
func (d *fakeDev) GetGspFirmwareMode() (bool, bool, nvml.Return) {
	return true, true, d.call("GetGspFirmwareMode")
}
func (d *fakeDev) GetPowerManagementDefaultLimit() (uint32, nvml.Return) {
	return 600_000, d.call("GetPowerManagementDefaultLimit")
}

func (d *fakeDev) GetFieldValues(v []nvml.FieldValue) nvml.Return {
	r := d.call("GetFieldValues")
	if r != nvml.SUCCESS {
		return r
	}
	for i := range v {
		f := &v[i]
		if fr, ok := d.fieldRet[f.FieldId]; ok {
			f.NvmlReturn = uint32(fr)
			continue
		}
		f.NvmlReturn = uint32(nvml.SUCCESS)
		switch f.FieldId {
		case nvml.FI_DEV_POWER_INSTANT:
			putU32(f, d.power)
		case nvml.FI_DEV_POWER_CURRENT_LIMIT:
			putU32(f, d.enforced)
		case nvml.FI_DEV_TOTAL_ENERGY_CONSUMPTION:
			f.ValueType = uint32(nvml.VALUE_TYPE_UNSIGNED_LONG_LONG)
			binary.LittleEndian.PutUint64(f.Value[:], d.energy)
		case nvml.FI_DEV_MEMORY_TEMP:
			putU32(f, d.memTemp)
		case nvml.FI_DEV_PCIE_REPLAY_COUNTER:
			putU32(f, uint32(d.replay))
		default:
			f.NvmlReturn = uint32(nvml.ERROR_NOT_SUPPORTED)
		}
	}
	return r
}

func putU32(f *nvml.FieldValue, v uint32) {
	f.ValueType = uint32(nvml.VALUE_TYPE_UNSIGNED_INT)
	binary.LittleEndian.PutUint32(f.Value[:], v)
}

func (d *fakeDev) GetTemperature(nvml.TemperatureSensors) (uint32, nvml.Return) {
	return d.temp, d.call("GetTemperature")
}
func (d *fakeDev) GetPowerManagementLimit() (uint32, nvml.Return) {
	return d.limit, d.call("GetPowerManagementLimit")
}
func (d *fakeDev) GetPerformanceState() (nvml.Pstates, nvml.Return) {
	return d.pstate, d.call("GetPerformanceState")
}
func (d *fakeDev) GetClockInfo(t nvml.ClockType) (uint32, nvml.Return) {
	return d.clocks[t], d.call("GetClockInfo")
}
func (d *fakeDev) GetUtilizationRates() (nvml.Utilization, nvml.Return) {
	return d.util, d.call("GetUtilizationRates")
}
func (d *fakeDev) GetMemoryInfo_v2() (nvml.Memory_v2, nvml.Return) {
	return nvml.Memory_v2{Used: d.memUsed}, d.call("GetMemoryInfo_v2")
}
func (d *fakeDev) GetMemoryInfo() (nvml.Memory, nvml.Return) {
	return nvml.Memory{Used: d.memUsed}, d.call("GetMemoryInfo")
}
func (d *fakeDev) GetCurrPcieLinkGeneration() (int, nvml.Return) {
	return d.gen, d.call("GetCurrPcieLinkGeneration")
}
func (d *fakeDev) GetCurrPcieLinkWidth() (int, nvml.Return) {
	return d.width, d.call("GetCurrPcieLinkWidth")
}
func (d *fakeDev) GetCurrentClocksEventReasons() (uint64, nvml.Return) {
	return d.throttle, d.call("GetCurrentClocksEventReasons")
}
func (d *fakeDev) GetCurrentClocksThrottleReasons() (uint64, nvml.Return) {
	return d.throttle, d.call("GetCurrentClocksThrottleReasons")
}
func (d *fakeDev) GetFanSpeed() (uint32, nvml.Return) { return d.fanSpeed[0], d.call("GetFanSpeed") }
func (d *fakeDev) GetFanSpeed_v2(i int) (uint32, nvml.Return) {
	return d.fanSpeed[i], d.call("GetFanSpeed_v2")
}
func (d *fakeDev) GetTargetFanSpeed(i int) (int, nvml.Return) {
	return d.fanTarget[i], d.call("GetTargetFanSpeed")
}
func (d *fakeDev) GetThermalSettings(uint32) (nvml.GpuThermalSettings, nvml.Return) {
	return nvml.GpuThermalSettings{Count: 1, Sensor: [3]nvml.GpuThermalSettingsSensor{d.sensor}}, d.call("GetThermalSettings")
}
func (d *fakeDev) GetEncoderUtilization() (uint32, uint32, nvml.Return) {
	return d.enc, 1000, d.call("GetEncoderUtilization")
}
func (d *fakeDev) GetDecoderUtilization() (uint32, uint32, nvml.Return) {
	return d.dec, 1000, d.call("GetDecoderUtilization")
}
func (d *fakeDev) GetPowerUsage() (uint32, nvml.Return) { return d.power, d.call("GetPowerUsage") }
func (d *fakeDev) GetEnforcedPowerLimit() (uint32, nvml.Return) {
	return d.enforced, d.call("GetEnforcedPowerLimit")
}
func (d *fakeDev) GetTotalEnergyConsumption() (uint64, nvml.Return) {
	return d.energy, d.call("GetTotalEnergyConsumption")
}
func (d *fakeDev) GetPcieReplayCounter() (int, nvml.Return) {
	return d.replay, d.call("GetPcieReplayCounter")
}
func (d *fakeDev) GetFanControlPolicy_v2(int) (nvml.FanControlPolicy, nvml.Return) {
	return 0, d.call("GetFanControlPolicy_v2")
}
func (d *fakeDev) GetComputeRunningProcesses() ([]nvml.ProcessInfo, nvml.Return) {
	return nil, d.call("GetComputeRunningProcesses")
}
func (d *fakeDev) GetSupportedEventTypes() (uint64, nvml.Return) {
	return WatchedEvents, d.call("GetSupportedEventTypes")
}
func (d *fakeDev) RegisterEvents(uint64, nvml.EventSet) nvml.Return {
	return d.call("RegisterEvents")
}

// fakeLib is a Library over fake devices.
type fakeLib struct {
	initRet nvml.Return
	devs    []*fakeDev
	missing map[string]bool
	shut    int
}

func (l *fakeLib) Init() nvml.Return     { return l.initRet }
func (l *fakeLib) Shutdown() nvml.Return { l.shut++; return nvml.SUCCESS }
func (l *fakeLib) SystemGetDriverVersion() (string, nvml.Return) {
	return "580.95.05", nvml.SUCCESS
}
func (l *fakeLib) SystemGetNVMLVersion() (string, nvml.Return) { return "13.580.95.05", nvml.SUCCESS }
func (l *fakeLib) SystemGetCudaDriverVersion() (int, nvml.Return) {
	return 13000, nvml.SUCCESS
}
func (l *fakeLib) DeviceGetCount() (int, nvml.Return) { return len(l.devs), nvml.SUCCESS }
func (l *fakeLib) DeviceGetHandleByIndex(i int) (Device, any, nvml.Return) {
	return l.devs[i], l.devs[i], nvml.SUCCESS
}
func (l *fakeLib) EventSetCreate() (EventSet, nvml.Return) { return nil, nvml.ERROR_NOT_SUPPORTED }
func (l *fakeLib) LookupSymbol(s string) error {
	if l.missing[s] {
		return nvml.ERROR_FUNCTION_NOT_FOUND
	}
	return nil
}
