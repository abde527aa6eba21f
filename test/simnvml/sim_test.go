package simnvml_test

import (
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpu-telemetry/gpu-telemetry/test/simnvml/internal/nvmlsyms"
	"github.com/gpu-telemetry/gpu-telemetry/test/simnvml/internal/rawnvml"
)

func TestDefaults(t *testing.T) {
	t.Parallel()
	simulate(t, opts{}, func(_ clock, l nvml.Interface) {
		n, r := l.DeviceGetCount()
		ok(t, r, "count")
		if n != 1 {
			t.Fatalf("count %d, want 1", n)
		}
		drv, r := l.SystemGetDriverVersion()
		ok(t, r, "driver")
		nv, r := l.SystemGetNVMLVersion()
		ok(t, r, "nvml version")
		cuda, r := l.SystemGetCudaDriverVersion()
		ok(t, r, "cuda")
		if drv != "580.95.05" || nv != "13.580.95.05" || cuda != 13000 {
			t.Fatalf("versions %q %q %d", drv, nv, cuda)
		}
		d := dev(t, l, 0)
		name, r := d.GetName()
		ok(t, r, "name")
		if name != "NVIDIA RTX PRO 6000 Blackwell Workstation Edition" {
			t.Fatalf("name %q", name)
		}
		uuid, r := d.GetUUID()
		ok(t, r, "uuid")
		if !regexp.MustCompile(`^GPU-[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`).MatchString(uuid) {
			t.Fatalf("uuid %q", uuid)
		}
		pci, r := d.GetPciInfo()
		ok(t, r, "pci")
		busID := cstr(pci.BusId[:])
		legacy := cstr(pci.BusIdLegacy[:])
		if busID != "00000000:01:00.0" || legacy != "0000:01:00.0" || pci.Bus != 1 || pci.Domain != 0 ||
			pci.Device != 0 || pci.PciDeviceId != 0x2BB110DE || pci.PciSubSystemId != 0x204B10DE {
			t.Fatalf("pci %+v %q %q", pci, busID, legacy)
		}
		for _, id := range []string{"00000000:01:00.0", "0000:01:00.0", "00000000:01:00.0"} {
			h, r := l.DeviceGetHandleByPciBusId(id)
			ok(t, r, "by bus id "+id)
			got(h.GetUUID()).want(t, "uuid by bus id "+id, uuid)
		}
		wantRet(t, ret(l.DeviceGetHandleByPciBusId("00000000:02:00.0")), nvml.ERROR_NOT_FOUND, "unknown bus id")
		if h, r := l.DeviceGetHandleByUUID(strings.ToUpper(uuid[4:]) + ""); r == nvml.SUCCESS {
			_ = h
			t.Fatalf("partial uuid matched")
		}
		h, r := l.DeviceGetHandleByUUID(uuid)
		ok(t, r, "by uuid")
		got(h.GetIndex()).want(t, "index", 0)
		got(d.GetNumFans()).want(t, "fans", 2)
		got(d.GetPowerManagementLimit()).want(t, "limit", 600000)
		got(d.GetEnforcedPowerLimit()).want(t, "enforced", 600000)
		if mn, mx, r := d.GetPowerManagementLimitConstraints(); r != nvml.SUCCESS || mn != 150000 || mx != 600000 {
			t.Fatalf("constraints %d %d %v", mn, mx, r)
		}
		got(d.GetArchitecture()).want(t, "arch", nvml.DEVICE_ARCH_BLACKWELL)
		got(d.GetGspFirmwareVersion()).want(t, "gsp", "580.95.05")
		if en, def, r := d.GetGspFirmwareMode(); r != nvml.SUCCESS || !en || !def {
			t.Fatalf("gsp mode %v %v %v", en, def, r)
		}
		got(d.GetTemperatureThreshold(nvml.TEMPERATURE_THRESHOLD_SLOWDOWN)).want(t, "slowdown", 95)
		wantRet(t, ret(d.GetTemperatureThreshold(nvml.TEMPERATURE_THRESHOLD_GPS_CURR)), nvml.ERROR_NOT_SUPPORTED, "gps threshold")
		m2, r := d.GetMemoryInfo_v2()
		ok(t, r, "memory v2")
		m1, r := d.GetMemoryInfo()
		ok(t, r, "memory v1")
		if m2.Total != 97887<<20 || m2.Reserved != 512<<20 || m2.Used != 14<<20 ||
			m2.Free != m2.Total-m2.Reserved-m2.Used || m1.Used != m2.Used+m2.Reserved || m1.Free != m2.Free {
			t.Fatalf("memory %+v %+v", m1, m2)
		}
		ts, r := d.GetThermalSettings(uint32(nvml.THERMAL_TARGET_ALL))
		ok(t, r, "thermal settings")
		if ts.Count != 1 || ts.Sensor[0].Target != int32(nvml.THERMAL_TARGET_GPU) ||
			ts.Sensor[0].Controller != int32(nvml.THERMAL_CONTROLLER_GPU_INTERNAL) || ts.Sensor[0].CurrentTemp != 38 {
			t.Fatalf("thermal %+v", ts)
		}
		// An unmodelled function is a stub.
		if _, _, r := d.GetEccMode(); r != nvml.ERROR_NOT_SUPPORTED {
			t.Fatalf("stub: %v", r)
		}
		for r, want := range map[nvml.Return]string{
			nvml.ERROR_NOT_SUPPORTED:      "Not Supported",
			nvml.ERROR_GPU_IS_LOST:        "GPU is lost",
			nvml.ERROR_TIMEOUT:            "Timeout",
			nvml.ERROR_NO_PERMISSION:      "Insufficient Permissions",
			nvml.ERROR_FUNCTION_NOT_FOUND: "Function Not Found",
			nvml.ERROR_DRIVER_NOT_LOADED:  "Driver Not Loaded",
			nvml.ERROR_UNKNOWN:            "Unknown Error",
		} {
			if got := l.ErrorString(r); got != want {
				t.Errorf("ErrorString(%d) = %q, want %q", r, got, want)
			}
		}
		e1, r := d.GetTotalEnergyConsumption()
		ok(t, r, "energy")
		time.Sleep(50 * time.Millisecond)
		e2, _ := d.GetTotalEnergyConsumption()
		if e2 <= e1 {
			t.Fatalf("energy not increasing: %d then %d", e1, e2)
		}
	})
}

// cstr converts a NUL-terminated C char array.
func cstr(b []int8) string {
	var out []byte
	for _, c := range b {
		if c == 0 {
			break
		}
		out = append(out, byte(c))
	}
	return string(out)
}

func TestValuesOverTime(t *testing.T) {
	t.Parallel()
	simulate(t, opts{scenario: `
gpus 2
gpu all temp 41
gpu 1 noise temp 2
gpu 0 ramp temp 40 80 1s
at 300ms gpu 1 set power 250
at 0 gpu 1 ramp clk_sm 1000 2000 100
gpu 0 fan 55
gpu 0 fan_target 60
at 0.5 gpu 0 fan1 70
gpu 0 reasons sw_power_cap|hw_slowdown
gpu 0 pstate P2
at 1 gpu 0 plimit 450
gpu 1 enforced 300
gpu 0 util_gpu 97
gpu 0 util_mem 40
gpu 0 pcie_replay 12
`}, func(c clock, l nvml.Interface) {
		d0, d1 := dev(t, l, 0), dev(t, l, 1)
		temp := func(d nvml.Device) uint32 {
			v, r := d.GetTemperature(nvml.TEMPERATURE_GPU)
			ok(t, r, "temp")
			return v
		}
		if v := temp(d0); v < 40 || v > 55 {
			t.Fatalf("gpu0 temp early %d, want ramp start near 40", v)
		}
		if v := temp(d1); v < 39 || v > 43 {
			t.Fatalf("gpu1 temp %d, want 41 +- 2", v)
		}
		got(d1.GetPowerUsage()).want(t, "gpu1 power before set", 32000)
		got(d0.GetFanSpeed_v2(0)).want(t, "fan0", 55)
		got(d0.GetTargetFanSpeed(1)).want(t, "fan1 target", 60)
		got(d0.GetCurrentClocksEventReasons()).want(t, "reasons", 0xC)
		got(d0.GetCurrentClocksThrottleReasons()).want(t, "throttle reasons", 0xC)
		got(d0.GetPerformanceState()).want(t, "pstate", nvml.PSTATE_2)
		// ramp midpoint: 40 + 40*t/1s
		c.sleepUntil(500 * time.Millisecond)
		el := c.since().Seconds()
		if v := float64(temp(d0)); v < 40+40*(el-0.25) || v > 40+40*(el+0.05)+1 {
			t.Fatalf("gpu0 temp %v at %.2fs", v, el)
		}
		c.sleepUntil(1200 * time.Millisecond)
		if v := temp(d0); v != 80 {
			t.Fatalf("gpu0 temp after ramp %d", v)
		}
		got(d1.GetPowerUsage()).want(t, "gpu1 power after set", 250000)
		got(d0.GetFanSpeed_v2(1)).want(t, "fan1 after set", 70)
		got(d0.GetFanSpeed()).want(t, "fan (v1)", 55)
		got(d0.GetPowerManagementLimit()).want(t, "limit", 450000)
		got(d0.GetEnforcedPowerLimit()).want(t, "enforced follows limit", 450000)
		got(d1.GetEnforcedPowerLimit()).want(t, "explicit enforced", 300000)
		got(d1.GetPowerManagementLimit()).want(t, "gpu1 limit", 600000)
		// energy: 32 W until 0.3 s, then 250 W.
		e, _ := d1.GetTotalEnergyConsumption()
		el = c.since().Seconds()
		want := 32000*0.3 + 250000*(el-0.3)
		if math.Abs(float64(e)-want) > 250000*0.15 {
			t.Fatalf("energy %d mJ at %.2fs, want about %.0f", e, el, want)
		}
		// slow ramp on clocks: 1000 + 10 MHz/s
		v, _ := d1.GetClockInfo(nvml.CLOCK_SM)
		if v < 1000 || v > 1000+uint32(10*el)+2 {
			t.Fatalf("clk_sm %d at %.2f", v, el)
		}
		got(d1.GetClockInfo(nvml.CLOCK_MEM)).want(t, "clk_mem default", 405)
		u, _ := d0.GetUtilizationRates()
		if u.Gpu != 97 || u.Memory != 40 {
			t.Fatalf("util %+v", u)
		}
		got(d0.GetPcieReplayCounter()).want(t, "replay", 12)
		// noise stays within its amplitude around the base value
		for i := 0; i < 20; i++ {
			if v := temp(d1); v < 39 || v > 43 {
				t.Fatalf("noisy temp %d", v)
			}
		}
	})
}

func TestFieldValues(t *testing.T) {
	t.Parallel()
	simulate(t, opts{scenario: `
gpu 0 power 321
gpu 0 plimit 500
gpu 0 memtemp 71
gpu 0 pcie_replay 3
gpu 0 fail field 82 no_permission
`}, func(_ clock, l nvml.Interface) {
		d := dev(t, l, 0)
		ids := []uint32{186, 190, 185, 187, 188, 189, 192, 83, 191, 82, 94, 9999, 186}
		vals := make([]nvml.FieldValue, len(ids))
		for i, id := range ids {
			vals[i].FieldId = id
		}
		vals[len(vals)-1].ScopeId = 1 // module scope: not modelled
		ok(t, d.GetFieldValues(vals), "GetFieldValues")
		now := time.Now().UnixMicro()
		u32 := func(v nvml.FieldValue) uint64 { return uint64(binary.LittleEndian.Uint32(v.Value[:4])) }
		u64 := func(v nvml.FieldValue) uint64 { return binary.LittleEndian.Uint64(v.Value[:]) }
		want := map[int]uint64{0: 321000, 1: 500000, 2: 321000, 3: 150000, 4: 600000, 5: 600000, 6: 500000, 9: 71, 10: 3}
		for i, v := range vals {
			if d := now - v.Timestamp; d < 0 || d > 5e6 {
				t.Errorf("field %d timestamp %d, now %d", v.FieldId, v.Timestamp, now)
			}
			switch i {
			case 11, 12:
				if nvml.Return(v.NvmlReturn) != nvml.ERROR_NOT_SUPPORTED {
					t.Errorf("entry %d (field %d scope %d): return %d, want NOT_SUPPORTED", i, v.FieldId, v.ScopeId, v.NvmlReturn)
				}
				continue
			case 9:
				if nvml.Return(v.NvmlReturn) != nvml.ERROR_NO_PERMISSION {
					t.Errorf("memory temp return %d, want NO_PERMISSION (injected)", v.NvmlReturn)
				}
				continue
			}
			if v.NvmlReturn != 0 {
				t.Errorf("field %d: return %d", v.FieldId, v.NvmlReturn)
				continue
			}
			switch v.FieldId {
			case 83, 191, 94:
				if v.ValueType != uint32(nvml.VALUE_TYPE_UNSIGNED_LONG_LONG) {
					t.Errorf("field %d type %d", v.FieldId, v.ValueType)
				}
				if v.FieldId == 94 && u64(v) != 3 {
					t.Errorf("replay %d", u64(v))
				}
				if v.FieldId != 94 && u64(v) == 0 {
					t.Errorf("energy 0")
				}
			default:
				if v.ValueType != uint32(nvml.VALUE_TYPE_UNSIGNED_INT) {
					t.Errorf("field %d type %d", v.FieldId, v.ValueType)
				}
				if w, ok := want[i]; ok && u32(v) != w {
					t.Errorf("field %d = %d, want %d", v.FieldId, u32(v), w)
				}
			}
		}
		wantRet(t, d.GetFieldValues(nil), nvml.ERROR_INVALID_ARGUMENT, "empty")
	})
}

func TestProcesses(t *testing.T) {
	t.Parallel()
	simulate(t, opts{scenario: "gpus 2\ngpu 0 procs 5\ngpu 0 gprocs 1\ngpu 0 proc_mem 2048\n"}, func(_ clock, l nvml.Interface) {
		d0, d1 := dev(t, l, 0), dev(t, l, 1)
		ps, r := d0.GetComputeRunningProcesses()
		ok(t, r, "compute procs")
		if len(ps) != 5 || ps[0].Pid != 4000 || ps[4].Pid != 4004 || ps[0].UsedGpuMemory != 2048<<20 ||
			ps[0].GpuInstanceId != 0xFFFFFFFF {
			t.Fatalf("procs %+v", ps)
		}
		gp, r := d0.GetGraphicsRunningProcesses()
		ok(t, r, "graphics procs")
		if len(gp) != 1 || gp[0].Pid != 4050 {
			t.Fatalf("graphics %+v", gp)
		}
		if ps, r := d1.GetComputeRunningProcesses(); r != nvml.SUCCESS || len(ps) != 0 {
			t.Fatalf("gpu1 procs %+v %v", ps, r)
		}

		// The raw protocol, which go-nvml hides.
		if err := rawnvml.Open(os.Getenv(envLib)); err != nil {
			t.Fatal(err)
		}
		h, rr := rawnvml.HandleByIndex(0)
		if rr != 0 {
			t.Fatalf("raw handle %d", rr)
		}
		for _, fn := range []string{"nvmlDeviceGetComputeRunningProcesses", "nvmlDeviceGetComputeRunningProcesses_v2",
			"nvmlDeviceGetComputeRunningProcesses_v3"} {
			v1 := !strings.Contains(fn, "_v")
			// count-only query: NULL buffer, *infoCount == 0
			if r, n, _ := rawnvml.Procs(fn, h, 0, -1, v1); r != int(nvml.ERROR_INSUFFICIENT_SIZE) || n != 5 {
				t.Fatalf("%s count query: ret %d count %d", fn, r, n)
			}
			if r, _, _ := rawnvml.Procs(fn, h, 3, -1, v1); r != int(nvml.ERROR_INVALID_ARGUMENT) {
				t.Fatalf("%s NULL buffer with count 3: %d", fn, r)
			}
			if r, n, _ := rawnvml.Procs(fn, h, 2, 2, v1); r != int(nvml.ERROR_INSUFFICIENT_SIZE) || n != 5 {
				t.Fatalf("%s small buffer: ret %d count %d", fn, r, n)
			}
			r, n, pids := rawnvml.Procs(fn, h, 8, 8, v1)
			if r != 0 || n != 5 || len(pids) != 5 || pids[1] != 4001 {
				t.Fatalf("%s: ret %d count %d pids %v", fn, r, n, pids)
			}
		}
		h1, _ := rawnvml.HandleByIndex(1)
		if r, n, _ := rawnvml.Procs("nvmlDeviceGetGraphicsRunningProcesses_v3", h1, 0, -1, false); r != 0 || n != 0 {
			t.Fatalf("no processes count query: ret %d count %d", r, n)
		}
	})
}

func TestEvents(t *testing.T) {
	t.Parallel()
	simulate(t, opts{scenario: `
gpus 2
at 0.2 gpu 0 xid 43
at 0.8 gpu 1 xid 31
at 1.0 gpu 0 xid 13
at 1.2 gpu 0 xid 154 action 1
at 1.3 gpu 0 event clock repeat 3 over 300ms
at 1.7 gpu 1 event pstate
at 1.7 gpu 0 event pstate
`}, func(c clock, l nvml.Interface) {
		d0, d1 := dev(t, l, 0), dev(t, l, 1)
		uuid0, _ := d0.GetUUID()
		types, r := d0.GetSupportedEventTypes()
		ok(t, r, "supported")
		if types&nvml.EventTypeXidCriticalError == 0 || types&nvml.EventTypePowerSourceChange != 0 {
			t.Fatalf("supported %#x", types)
		}
		c.sleepUntil(500 * time.Millisecond)
		set, r := l.EventSetCreate()
		ok(t, r, "create")
		defer set.Free()
		wantRet(t, d0.RegisterEvents(nvml.EventTypePowerSourceChange, set), nvml.ERROR_NOT_SUPPORTED, "register unsupported")
		ok(t, d0.RegisterEvents(nvml.EventTypeXidCriticalError|nvml.EventTypeGpuRecoveryAction|nvml.EventTypeClock, set), "register")
		ok(t, d1.RegisterEvents(nvml.EventTypePState, set), "register gpu1")

		// Xid 43 at 0.2 s happened before registration; gpu 1's Xid 31 at
		// 0.8 s is not registered for: nothing until 1.0 s.
		_, r = set.Wait(100)
		wantRet(t, r, nvml.ERROR_TIMEOUT, "wait with nothing pending")

		t0 := time.Now()
		e, r := set.Wait(5000)
		ok(t, r, "wait xid")
		waited, at := time.Since(t0), c.since()
		if waited > 2*time.Second || at < 900*time.Millisecond {
			t.Fatalf("woke after %v at %v, want early wake-up at about 1 s", waited, at)
		}
		if u, _ := e.Device.GetUUID(); u != uuid0 || e.EventType != nvml.EventTypeXidCriticalError || e.EventData != 13 ||
			e.GpuInstanceId != 0xFFFFFFFF {
			t.Fatalf("event %+v (uuid %s)", e, u)
		}
		expect := []struct{ typ, data uint64 }{
			{nvml.EventTypeXidCriticalError, 154},
			{nvml.EventTypeGpuRecoveryAction, 1},
			{nvml.EventTypeClock, 0},
			{nvml.EventTypeClock, 0},
			{nvml.EventTypeClock, 0},
		}
		for i, x := range expect {
			e, r := set.Wait(3000)
			ok(t, r, "wait "+strconv.Itoa(i))
			if e.EventType != x.typ || e.EventData != x.data {
				t.Fatalf("event %d: %+v, want type %#x data %d", i, e, x.typ, x.data)
			}
		}
		e, r = set.Wait(3000)
		ok(t, r, "pstate on gpu 1")
		if e.EventType != nvml.EventTypePState {
			t.Fatalf("pstate event %+v", e)
		}
		if u, _ := e.Device.GetUUID(); u == uuid0 {
			t.Fatal("pstate event on the wrong device")
		}
		_, r = set.Wait(200)
		wantRet(t, r, nvml.ERROR_TIMEOUT, "final wait")
	})
}

func TestEventWaitV1Layout(t *testing.T) {
	if child(t) {
		if err := rawnvml.Open(os.Getenv(envLib)); err != nil {
			t.Fatal(err)
		}
		if r := rawnvml.Init(); r != 0 {
			t.Fatalf("init %d", r)
		}
		defer rawnvml.Shutdown()
		h, _ := rawnvml.HandleByIndex(0)
		set, r := rawnvml.EventSetCreate()
		if r != 0 {
			t.Fatalf("create %d", r)
		}
		if r := rawnvml.Register(h, uint64(nvml.EventTypeXidCriticalError), set); r != 0 {
			t.Fatalf("register %d", r)
		}
		e, r := rawnvml.Wait(false, set, 3000)
		if r != 0 || e.Device != h || e.Type != uint64(nvml.EventTypeXidCriticalError) || e.Data != 48 {
			t.Fatalf("v1 wait %d %+v", r, e)
		}
		if e.GpuInstanceId != 0xABABABAB {
			t.Fatalf("v1 wrote past the v1 struct: %#x", e.GpuInstanceId)
		}
		e, r = rawnvml.Wait(true, set, 3000)
		if r != 0 || e.Data != 48 || e.GpuInstanceId != 0xFFFFFFFF || e.ComputeInstanceId != 0xFFFFFFFF {
			t.Fatalf("v2 wait %d %+v", r, e)
		}
		return
	}
	t.Parallel()
	runChild(t, opts{scenario: "at 0.3 gpu 0 xid 48 repeat 2 over 0.2\n"})
}

func TestXidFlood(t *testing.T) {
	t.Parallel()
	// start 0.8 s into the scenario: the flood runs from 1 s to 3 s
	simulate(t, opts{scenarioFile: shipped(t, "xid-flood.scn"), env: []string{"SIMNVML_TIME_OFFSET=0.8"}}, func(c clock, l nvml.Interface) {
		set, r := l.EventSetCreate()
		ok(t, r, "create")
		ok(t, dev(t, l, 0).RegisterEvents(nvml.EventTypeXidCriticalError, set), "register")
		n := 0
		var first, last time.Duration
		for n < 50 && c.since() < 8*time.Second {
			e, r := set.Wait(1000)
			if r == nvml.ERROR_TIMEOUT {
				continue
			}
			ok(t, r, "wait")
			if e.EventType != nvml.EventTypeXidCriticalError || e.EventData == 0 {
				t.Fatalf("event %+v", e)
			}
			if n == 0 {
				first = c.since()
			}
			last = c.since()
			n++
		}
		if n != 50 {
			t.Fatalf("got %d Xid events, want 50", n)
		}
		if last-first > 3*time.Second {
			t.Fatalf("flood spread over %v", last-first)
		}
		_, r = set.Wait(100)
		wantRet(t, r, nvml.ERROR_TIMEOUT, "after the flood")
	})
}

func shipped(t *testing.T, name string) string {
	p, err := filepath.Abs(filepath.Join("scenarios", name))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLostAndRemoved(t *testing.T) {
	t.Parallel()
	simulate(t, opts{scenario: "gpus 3\nat 0.3 gpu 1 lost\nat 0.3 gpu 2 removed\n"}, func(c clock, l nvml.Interface) {
		d0, d1, d2 := dev(t, l, 0), dev(t, l, 1), dev(t, l, 2)
		uuid2, _ := d2.GetUUID()
		got(l.DeviceGetCount()).want(t, "count", 3)
		wantRet(t, ret(d1.GetTemperature(nvml.TEMPERATURE_GPU)), nvml.SUCCESS, "before lost")
		c.sleepUntil(400 * time.Millisecond)
		got(l.DeviceGetCount()).want(t, "count after removal", 2)
		for _, d := range []nvml.Device{d1, d2} {
			wantRet(t, ret(d.GetTemperature(nvml.TEMPERATURE_GPU)), nvml.ERROR_GPU_IS_LOST, "temp on lost/removed")
			wantRet(t, ret(d.GetName()), nvml.ERROR_GPU_IS_LOST, "name on lost/removed")
			wantRet(t, d.GetFieldValues(make([]nvml.FieldValue, 1)), nvml.ERROR_GPU_IS_LOST, "fields on lost/removed")
		}
		wantRet(t, ret(l.DeviceGetHandleByIndex(1)), nvml.ERROR_GPU_IS_LOST, "handle of lost GPU")
		wantRet(t, ret(l.DeviceGetHandleByIndex(2)), nvml.ERROR_INVALID_ARGUMENT, "index past removed GPU")
		wantRet(t, ret(l.DeviceGetHandleByUUID(uuid2)), nvml.ERROR_NOT_FOUND, "uuid of removed GPU")
		wantRet(t, ret(d0.GetTemperature(nvml.TEMPERATURE_GPU)), nvml.SUCCESS, "healthy GPU")
		if l.ErrorString(nvml.ERROR_GPU_IS_LOST) != "GPU is lost" {
			t.Fatal("error string")
		}
	})
}

func TestHang(t *testing.T) {
	t.Parallel()
	simulate(t, opts{scenario: `
gpus 2
at 0.3 gpu 1 hang 1500ms
at 0.3 gpu 0 hang 1s fn DeviceGetPowerUsage ret timeout
`}, func(c clock, l nvml.Interface) {
		d0, d1 := dev(t, l, 0), dev(t, l, 1)
		c.sleepUntil(400 * time.Millisecond)

		type res struct {
			took time.Duration
			r    nvml.Return
		}
		var wg sync.WaitGroup
		hung := make([]res, 3)
		start := func(i int, f func() nvml.Return) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				t0 := time.Now()
				r := f()
				hung[i] = res{time.Since(t0), r}
			}()
		}
		start(0, func() nvml.Return { _, r := d1.GetTemperature(nvml.TEMPERATURE_GPU); return r })
		start(1, func() nvml.Return { _, r := d1.GetFanSpeed_v2(0); return r })
		start(2, func() nvml.Return { _, r := d0.GetPowerUsage(); return r })

		// Meanwhile GPU 0 (other functions) and the library keep answering.
		time.Sleep(50 * time.Millisecond)
		var worst time.Duration
		for end := time.Now().Add(600 * time.Millisecond); time.Now().Before(end); {
			t0 := time.Now()
			_, r := d0.GetTemperature(nvml.TEMPERATURE_GPU)
			ok(t, r, "gpu0 temp during hang")
			_, r = l.DeviceGetCount()
			ok(t, r, "count during hang")
			worst = max(worst, time.Since(t0))
			time.Sleep(10 * time.Millisecond)
		}
		if worst > 300*time.Millisecond {
			t.Fatalf("gpu 0 calls took up to %v while gpu 1 hung", worst)
		}
		wg.Wait()
		for i, h := range hung[:2] {
			if h.r != nvml.SUCCESS || h.took < 800*time.Millisecond || h.took > 6*time.Second {
				t.Fatalf("gpu1 hung call %d: %v after %v, want success after ~1.5 s", i, h.r, h.took)
			}
		}
		if h := hung[2]; h.r != nvml.ERROR_TIMEOUT || h.took < 400*time.Millisecond || h.took > 6*time.Second {
			t.Fatalf("gpu0 power: %v after %v, want TIMEOUT after ~0.9 s", h.r, h.took)
		}
		// after the hang everything answers at once
		t0 := time.Now()
		_, r := d1.GetTemperature(nvml.TEMPERATURE_GPU)
		ok(t, r, "after hang")
		if _, r := d0.GetPowerUsage(); r != nvml.SUCCESS || time.Since(t0) > 300*time.Millisecond {
			t.Fatalf("after hang: %v %v", r, time.Since(t0))
		}
	})
}

func TestFailInjection(t *testing.T) {
	t.Parallel()
	simulate(t, opts{scenario: `
gpus 2
gpu 0 fail nvmlDeviceGetPowerUsage not_supported
gpu 0 fail nvmlDeviceGetPciInfo no_permission
at 0.3 gpu 0 fail DeviceGetTemperature 4 for 0.4s
`}, func(c clock, l nvml.Interface) {
		d := dev(t, l, 0)
		wantRet(t, ret(d.GetPowerUsage()), nvml.ERROR_NOT_SUPPORTED, "power")
		wantRet(t, ret(d.GetPciInfo()), nvml.ERROR_NO_PERMISSION, "pci (family match of _v3)")
		wantRet(t, ret(d.GetTemperature(nvml.TEMPERATURE_GPU)), nvml.SUCCESS, "temp before window")
		c.sleepUntil(450 * time.Millisecond)
		wantRet(t, ret(d.GetTemperature(nvml.TEMPERATURE_GPU)), nvml.ERROR_NO_PERMISSION, "temp in window")
		if l.ErrorString(nvml.ERROR_NO_PERMISSION) != "Insufficient Permissions" {
			t.Fatal("error string")
		}
		c.sleepUntil(900 * time.Millisecond)
		wantRet(t, ret(d.GetTemperature(nvml.TEMPERATURE_GPU)), nvml.SUCCESS, "temp after window")
		wantRet(t, ret(dev(t, l, 1).GetPowerUsage()), nvml.SUCCESS, "other GPU")
	})
}

func TestFanlessAndAbsurd(t *testing.T) {
	t.Parallel()
	simulate(t, opts{scenario: `
gpus 2
gpu 0 name "NVIDIA B200"
gpu 0 fans 0
gpu 0 temp 88
gpu 1 temp 4294967295
gpu 1 fan1_target -1
gpu 1 plimit 0
gpu 1 fan0_policy manual
gpu 1 sensor_target -1
`}, func(_ clock, l nvml.Interface) {
		d0, d1 := dev(t, l, 0), dev(t, l, 1)
		got(d0.GetNumFans()).want(t, "fanless numfans", 0)
		wantRet(t, ret(d0.GetFanSpeed()), nvml.ERROR_NOT_SUPPORTED, "fanless fan speed")
		wantRet(t, ret(d0.GetFanSpeed_v2(0)), nvml.ERROR_NOT_SUPPORTED, "fanless fan speed v2")
		wantRet(t, ret(d0.GetTargetFanSpeed(0)), nvml.ERROR_NOT_SUPPORTED, "fanless target")
		wantRet(t, ret(d0.GetFanControlPolicy_v2(0)), nvml.ERROR_NOT_SUPPORTED, "fanless policy")
		got(d0.GetTemperature(nvml.TEMPERATURE_GPU)).want(t, "fanless temp", 88)
		got(d1.GetTemperature(nvml.TEMPERATURE_GPU)).want(t, "absurd temp", 4294967295)
		if v, r := d1.GetTargetFanSpeed(1); r != nvml.SUCCESS || uint32(v) != 0xFFFFFFFF {
			t.Fatalf("absurd target %d %v", v, r)
		}
		wantRet(t, ret(d1.GetTargetFanSpeed(2)), nvml.ERROR_INVALID_ARGUMENT, "fan index past count")
		got(d1.GetPowerManagementLimit()).want(t, "zero limit", 0)
		got(d1.GetFanControlPolicy_v2(0)).want(t, "policy", nvml.FAN_POLICY_MANUAL)
		ts, r := d1.GetThermalSettings(0)
		ok(t, r, "thermal")
		if ts.Count != 1 || ts.Sensor[0].Target != -1 {
			t.Fatalf("thermal %+v", ts)
		}
		wantRet(t, ret(d1.GetThermalSettings(5)), nvml.ERROR_INVALID_ARGUMENT, "bad sensor index")
	})
}

// TestInitResults covers init failures, driver not loaded, zero GPUs and
// scenario parse errors, each in its own process.
func TestInitResults(t *testing.T) {
	if child(t) {
		want, _ := strconv.Atoi(os.Getenv(envWant))
		l := newLib(t)
		r := l.Init()
		if int(r) != want {
			t.Fatalf("Init: %d, want %d", r, want)
		}
		if r == nvml.SUCCESS {
			defer l.Shutdown()
			n, r := l.DeviceGetCount()
			ok(t, r, "count")
			t.Logf("count=%d", n)
			if n != 0 {
				t.Fatalf("count %d", n)
			}
			wantRet(t, ret(l.DeviceGetHandleByIndex(0)), nvml.ERROR_INVALID_ARGUMENT, "handle 0 on zero GPUs")
		} else {
			wantRet(t, ret(l.DeviceGetCount()), nvml.ERROR_UNINITIALIZED, "count after failed init")
		}
		return
	}
	t.Parallel()
	cases := []struct {
		name, scenario, file string
		want                 nvml.Return
		stderr               string
	}{
		{name: "nodriver", file: "nodriver.scn", want: nvml.ERROR_DRIVER_NOT_LOADED},
		{name: "zero", file: "zero-gpus.scn", want: nvml.SUCCESS},
		{name: "initfail", scenario: "init fail no_permission\n", want: nvml.ERROR_NO_PERMISSION},
		{name: "unknown-metric", scenario: "gpus 2\n\ngpu 1 tmp 40\n", want: nvml.ERROR_UNKNOWN,
			stderr: `test.scn:3: unknown statement or metric "tmp"`},
		{name: "gpu-range", scenario: "gpu 3 temp 40\n", want: nvml.ERROR_UNKNOWN,
			stderr: `test.scn:1: GPU 3 out of range`},
		{name: "bad-ramp", scenario: "# c\ngpu 0 ramp temp 40 x 5\n", want: nvml.ERROR_UNKNOWN,
			stderr: `test.scn:2: bad number "x"`},
		{name: "bad-fn", scenario: "gpu 0 hang 1s fn nvmlDeviceGetBogus\n", want: nvml.ERROR_UNKNOWN,
			stderr: `test.scn:1: unknown or unmodelled NVML function "nvmlDeviceGetBogus"`},
		{name: "quote", scenario: "gpu 0 name \"unterminated\n", want: nvml.ERROR_UNKNOWN,
			stderr: `test.scn:1: unterminated "quoted string"`},
		{name: "eventset-ok", scenario: "gpus 0\nat 1 eventset fail unknown for 2s\nat 3 eventset hang 1s ret timeout\neventset fail gpu_is_lost\n", want: nvml.SUCCESS},
		{name: "eventset-code", scenario: "at 1 eventset fail bogus\n", want: nvml.ERROR_UNKNOWN,
			stderr: `test.scn:1: unknown NVML return code "bogus"`},
		{name: "eventset-syntax", scenario: "\nat 1 eventset stall 2s\n", want: nvml.ERROR_UNKNOWN,
			stderr: `test.scn:2: expected: eventset fail CODE [for DURATION]  or  eventset hang DURATION [ret CODE]`},
		{name: "thermal-timed", scenario: "at 5 gpu 0 thermal on\n", want: nvml.ERROR_UNKNOWN,
			stderr: `test.scn:1: "thermal" describes the GPU and cannot change over time`},
		{name: "thermal-word", scenario: "gpu 0 thermal firmware slow 53\n", want: nvml.ERROR_UNKNOWN,
			stderr: `test.scn:1: unexpected "firmware" in thermal statement`},
		{name: "thermal-curve", scenario: "gpu 0 thermal firmware curve 85:100,50:30\n", want: nvml.ERROR_UNKNOWN,
			stderr: `test.scn:1: bad firmware curve (two points C:PCT, rising temperature); expected: gpu SEL thermal`},
		{name: "thermal-crash", scenario: "gpu 0 thermal crash 90 for 10ms\n", want: nvml.ERROR_UNKNOWN,
			stderr: `test.scn:1: bad crash rule (a temperature, for at least 100ms)`},
		{name: "user", scenario: "user admin\n", want: nvml.ERROR_UNKNOWN,
			stderr: `test.scn:1: expected: user root|nonroot`},
		{name: "fabric-versions", scenario: "fabric_versions v2 v5\n", want: nvml.ERROR_UNKNOWN,
			stderr: `test.scn:1: expected: fabric_versions v4|v3|v2|v1...`},
		{name: "missing-file", file: "/nonexistent/x.scn", want: nvml.ERROR_UNKNOWN,
			stderr: `simnvml: /nonexistent/x.scn: cannot open scenario`},
	}
	for _, tc := range cases {
		tc := tc
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			o := opts{scenario: tc.scenario, env: []string{envWant + "=" + strconv.Itoa(int(tc.want))}}
			if tc.file != "" {
				o.scenarioFile = tc.file
				if !filepath.IsAbs(tc.file) {
					o.scenarioFile = shipped(t, tc.file)
				}
			}
			out := runChildAs(t, "TestInitResults", o)
			if tc.stderr != "" {
				if !strings.Contains(out, tc.stderr) {
					t.Fatalf("stderr lacks %q:\n%s", tc.stderr, out)
				}
				if n := strings.Count(out, "simnvml:"); n != 1 {
					t.Fatalf("want one simnvml error line, got %d:\n%s", n, out)
				}
			}
		})
	}
}

func TestKmsg(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "kmsg")
	if !simulate(t, opts{env: []string{"SIMNVML_KMSG=" + path}, scenario: `
gpus 2
at 0.2 gpu 0 xid 79
at 0.3 gpu 0 xid 154 action 1
at 0.4 gpu 1 xid 119
at 0.5 gpu 0 xid 13 to events
at 0.6 gpu 1 xid 62 to kmsg msg "custom text"
at 0.7 gpu 0 xid 154 action 2 to kmsg
`}, func(c clock, l nvml.Interface) {
		_ = dev(t, l, 0)
		// No NVML calls while the records are due: a background thread
		// writes them.
		c.sleepUntil(1200 * time.Millisecond)
	}) {
		return
	}
	recs := kmsgRecords(t, path)
	want := []string{
		`NVRM: Xid (PCI:0000:01:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.`,
		`NVRM: Xid (PCI:0000:01:00): 154, GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset Required)`,
		`NVRM: Xid (PCI:0000:21:00): 119, pid=1234, name=python3, Timeout after 45s of waiting for RPC response from GPU1 GSP! Expected function 76 (GSP_RM_CONTROL) (0x20800a4c 0x4).`,
		`NVRM: Xid (PCI:0000:21:00): 62, custom text`,
		`NVRM: Xid (PCI:0000:01:00): 154, GPU recovery action changed from 0x1 (GPU Reset Required) to 0x2 (Node Reboot Required)`,
	}
	if len(recs) != len(want) {
		t.Fatalf("kmsg has %d records, want %d: %+v", len(recs), len(want), recs)
	}
	for i, rec := range recs {
		if rec.Message != want[i] {
			t.Errorf("record %d:\n got %s\nwant %s", i, rec.Message, want[i])
		}
		if i == 0 {
			continue
		}
		prev := recs[i-1]
		if rec.Seq != prev.Seq+1 || rec.Time <= prev.Time {
			t.Errorf("record %d: seq %d at %v after seq %d at %v", i, rec.Seq, rec.Time, prev.Seq, prev.Time)
		}
		if i == 1 && rec.Time-prev.Time != 100*time.Millisecond {
			t.Errorf("records 0.1 s apart differ by %v", rec.Time-prev.Time)
		}
	}
}

func TestCallCounts(t *testing.T) {
	path := os.Getenv("SIMNVML_CALLS")
	if child(t) {
		l := openLib(t)
		d := dev(t, l, 0)
		for i := 0; i < 7; i++ {
			d.GetTemperature(nvml.TEMPERATURE_GPU)
		}
		d.GetEccMode()
		d.GetEccMode()
		time.Sleep(1300 * time.Millisecond)
		mid, err := os.ReadFile(path)
		if err != nil || !strings.Contains(string(mid), "nvmlDeviceGetTemperature 7\n") {
			t.Fatalf("mid-run calls file: %v %q", err, mid)
		}
		d.GetTemperature(nvml.TEMPERATURE_GPU)
		ok(t, l.Shutdown(), "shutdown")
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		want := "nvmlDeviceGetEccMode 2\nnvmlDeviceGetHandleByIndex_v2 1\nnvmlDeviceGetTemperature 8\nnvmlInit_v2 1\nnvmlShutdown 1\n"
		if string(got) != want {
			t.Fatalf("calls file:\n%s\nwant:\n%s", got, want)
		}
		l.Init() // for the Cleanup's Shutdown
		return
	}
	t.Parallel()
	p := filepath.Join(t.TempDir(), "calls")
	runChild(t, opts{env: []string{"SIMNVML_CALLS=" + p}})
}

func TestOldDriver(t *testing.T) {
	t.Parallel()
	if !simulate(t, opts{old: true, scenarioFile: shipped(t, "old-driver.scn")}, func(_ clock, l nvml.Interface) {
		d := dev(t, l, 0)
		if err := l.Extensions().LookupSymbol("nvmlDeviceGetNumFans"); err == nil {
			t.Fatal("old driver exports nvmlDeviceGetNumFans")
		}
		if err := l.Extensions().LookupSymbol("nvmlDeviceGetCurrentClocksThrottleReasons"); err != nil {
			t.Fatal(err)
		}
		if _, r := d.GetPciInfo(); r != nvml.SUCCESS { // falls back to _v2
			t.Fatalf("pci: %v", r)
		}
		if _, r := d.GetComputeRunningProcesses(); r != nvml.SUCCESS { // _v2
			t.Fatalf("procs: %v", r)
		}
		got(d.GetCurrentClocksThrottleReasons()).want(t, "throttle reasons", 1)
		set, r := l.EventSetCreate()
		ok(t, r, "create")
		ok(t, d.RegisterEvents(nvml.EventTypeXidCriticalError, set), "register")
		if _, r := set.Wait(10); r != nvml.ERROR_TIMEOUT { // nvmlEventSetWait (v1)
			t.Fatalf("wait: %v", r)
		}
		got(l.SystemGetDriverVersion()).want(t, "driver", "470.256.02")
	}) {
		return
	}
	oldSyms := oldDriverList(t)
	normal, old := exported(t, libPath(false)), exported(t, libPath(true))
	for s := range oldSyms {
		if !normal[s] {
			t.Errorf("normal build lacks %s", s)
		}
		if old[s] {
			t.Errorf("old-driver build exports %s", s)
		}
	}
	for _, s := range []string{"nvmlInit_v2", "nvmlDeviceGetPciInfo_v2", "nvmlEventSetWait",
		"nvmlDeviceGetComputeRunningProcesses_v2", "nvmlDeviceGetPowerManagementLimitConstraints",
		"nvmlDeviceGetCurrentClocksThrottleReasons", "nvmlDeviceGetFanSpeed", "nvmlErrorString"} {
		if !old[s] {
			t.Errorf("old-driver build lacks %s", s)
		}
	}
}

func oldDriverList(t *testing.T) map[string]bool {
	lists, err := nvmlsyms.Load(".")
	if err != nil {
		t.Fatal(err)
	}
	if len(lists.Old) < 14 {
		t.Fatalf("old_driver.txt lists only %d names", len(lists.Old))
	}
	return lists.Old
}

func TestExportsEveryGoNvmlSymbol(t *testing.T) {
	t.Parallel()
	syms := nvmlGoSymbols(t)
	if len(syms) < 300 {
		t.Fatalf("only %d symbols found in go-nvml", len(syms))
	}
	have := exported(t, libPath(false))
	for _, s := range syms {
		if !have[s] {
			t.Errorf("libnvidia-ml.so.1 does not export %s", s)
		}
	}
	for s := range have {
		if !strings.HasPrefix(s, "nvml") {
			t.Errorf("unexpected exported symbol %s", s)
		}
	}
}

// TestShippedScenarios initialises every scenario in scenarios/ and checks a
// few facts per scenario (at a time offset where useful).
func TestShippedScenarios(t *testing.T) {
	if child(t) {
		want, _ := strconv.Atoi(os.Getenv(envWant))
		l := newLib(t)
		if r := l.Init(); int(r) != want {
			t.Fatalf("Init %d, want %d", r, want)
		} else if r != nvml.SUCCESS {
			return
		}
		defer l.Shutdown()
		n, _ := l.DeviceGetCount()
		for i := 0; i < n; i++ {
			d := dev(t, l, i)
			for _, f := range []func() nvml.Return{
				func() nvml.Return { _, r := d.GetTemperature(nvml.TEMPERATURE_GPU); return r },
				func() nvml.Return { _, r := d.GetPowerUsage(); return r },
				func() nvml.Return { _, r := d.GetMemoryInfo(); return r },
			} {
				if r := f(); r != nvml.SUCCESS && r != nvml.ERROR_GPU_IS_LOST {
					t.Fatalf("gpu %d: %v", i, r)
				}
			}
		}
		checkScenario(t, l, filepath.Base(os.Getenv("SIMNVML_SCENARIO")), n)
		return
	}
	t.Parallel()
	files, _ := filepath.Glob(filepath.Join("scenarios", "*.scn"))
	if len(files) < 9 {
		t.Fatalf("only %d shipped scenarios", len(files))
	}
	for _, f := range files {
		name := filepath.Base(f)
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			want := nvml.SUCCESS
			if name == "nodriver.scn" {
				want = nvml.ERROR_DRIVER_NOT_LOADED
			}
			env := []string{envWant + "=" + strconv.Itoa(int(want))}
			if off, ok := scenarioOffsets[name]; ok {
				env = append(env, "SIMNVML_TIME_OFFSET="+off)
			}
			runChildAs(t, "TestShippedScenarios", opts{scenarioFile: shipped(t, name), env: env,
				old: name == "old-driver.scn"})
		})
	}
}

// scenarioOffsets start some scenarios part-way through their story.
var scenarioOffsets = map[string]string{
	"gsp-crash.scn":                  "9.5",
	"hang.scn":                       "2",
	"rtxpro6000-broken-fan-500w.scn": "40",
}

func checkScenario(t *testing.T, l nvml.Interface, name string, n int) {
	switch name {
	case "healthy-8gpu.scn":
		if n != 8 {
			t.Fatalf("gpus %d", n)
		}
		seen := map[string]bool{}
		for i := 0; i < n; i++ {
			pci, _ := dev(t, l, i).GetPciInfo()
			id := cstr(pci.BusId[:])
			if seen[id] {
				t.Fatalf("duplicate bus id %s", id)
			}
			seen[id] = true
		}
		d5 := dev(t, l, 5)
		for _, id := range []string{"00000000:A1:00.0", "0000:a1:00.0", "a1:00.0"} {
			h, r := l.DeviceGetHandleByPciBusId(id)
			ok(t, r, "bus id "+id)
			got(h.GetIndex()).want(t, "GPU at bus id "+id, 5)
		}
		if p, _ := d5.GetPciInfo(); cstr(p.BusId[:]) != "00000000:A1:00.0" {
			t.Fatalf("GPU 5 bus id %q", cstr(p.BusId[:]))
		}
	case "fanless.scn":
		d := dev(t, l, 0)
		got(d.GetNumFans()).want(t, "fans", 0)
		if v, _ := d.GetTemperature(nvml.TEMPERATURE_GPU); v < 85 {
			t.Fatalf("temp %d", v)
		}
		got(d.GetName()).want(t, "name", "NVIDIA B200")
	case "zero-gpus.scn":
		if n != 0 {
			t.Fatalf("gpus %d", n)
		}
	case "gsp-crash.scn": // at 9.5 s: hot, slow fans, limit lowered
		if n != 2 {
			t.Fatalf("gpus %d", n)
		}
		d := dev(t, l, 0)
		temp, _ := d.GetTemperature(nvml.TEMPERATURE_GPU)
		fan, _ := d.GetFanSpeed_v2(0)
		lim, _ := d.GetEnforcedPowerLimit()
		if temp < 80 || fan > 40 || lim != 450000 {
			t.Fatalf("gsp-crash at 9.5 s: temp %d fan %d limit %d", temp, fan, lim)
		}
	case "hang.scn": // at 2 s: the hang starts at 3 s
		d1 := dev(t, l, 1)
		wantRet(t, ret(d1.GetTemperature(nvml.TEMPERATURE_GPU)), nvml.SUCCESS, "gpu 1 before hang")
	case "rtxpro6000-broken-fan-500w.scn": // at 40 s: the inversion, not crashed yet
		d := dev(t, l, 0)
		temp, _ := d.GetTemperature(nvml.TEMPERATURE_GPU)
		fan, _ := d.GetFanSpeed_v2(1)
		target, _ := d.GetTargetFanSpeed(1)
		if temp <= 85 || temp > 90 || fan != 53 || target != 53 {
			t.Fatalf("broken fan at 40 s: %d C, fan %d %%, target %d %%; want 85-90 C at 53 %%", temp, fan, target)
		}
	case "absurd.scn":
		d := dev(t, l, 0)
		got(d.GetTemperature(nvml.TEMPERATURE_GPU)).want(t, "temp", 4294967295)
	}
}

// TestHotPathCost is a coarse guard (the real number is in
// BenchmarkGetTemperature): a modelled call through go-nvml costs far less
// than 20 µs even under -race.
func TestHotPathCost(t *testing.T) {
	t.Parallel()
	simulate(t, opts{scenario: "gpus 2\ngpu all noise temp 1\nat 5 gpu 0 ramp power 100 500 10\n"}, func(_ clock, l nvml.Interface) {
		d := dev(t, l, 0)
		const n = 100000
		t0 := time.Now()
		for i := 0; i < n; i++ {
			d.GetTemperature(nvml.TEMPERATURE_GPU)
			d.GetPowerUsage()
		}
		per := time.Since(t0) / (2 * n)
		t.Logf("%v per call", per)
		if per > 20*time.Microsecond {
			t.Fatalf("%v per call", per)
		}
	})
}

// BenchmarkGetTemperature loads the simulator in this process (no test
// here loads it in the parent), default scenario.
func BenchmarkGetTemperature(b *testing.B) {
	l := nvml.New(nvml.WithLibraryPath(libPath(false)))
	if r := l.Init(); r != nvml.SUCCESS {
		b.Fatal(r)
	}
	defer l.Shutdown()
	d, _ := l.DeviceGetHandleByIndex(0)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		d.GetTemperature(nvml.TEMPERATURE_GPU)
	}
}
