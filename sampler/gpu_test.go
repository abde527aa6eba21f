package sampler

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"reflect"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpu-telemetry/gpu-telemetry/internal/counters"
	"github.com/gpu-telemetry/gpu-telemetry/internal/testutil"
	"github.com/gpu-telemetry/gpu-telemetry/reading"
	"github.com/gpu-telemetry/gpu-telemetry/sampler/fakenvml"
)

// testConfig is the sampler's configuration in tests: no reprobe in a test's
// time, the slow tier every sample, no pacer.
var testConfig = Config{Reprobe: time.Hour, SlowEvery: 1, FieldWait: time.Millisecond}

// openFake opens the GPUs of lib (sel as in OpenOptions) with testConfig; an
// InitRet left 0 is SUCCESS.
func openFake(t *testing.T, lib *fakenvml.Lib, sel ...string) *Host {
	t.Helper()
	return openFakeConfig(t, lib, testConfig, sel...)
}

// sampled opens d as the only GPU, takes n samples into one Sample and
// returns it.
func sampled(t *testing.T, d *fakenvml.Dev, n int) reading.Sample {
	t.Helper()
	h := openFake(t, &fakenvml.Lib{Devs: []*fakenvml.Dev{d}})
	var s reading.Sample
	for range n {
		h.GPUs[0].Sample(&s)
	}
	return s
}

// holdFieldLock makes another GPU stick inside GetFieldValues, holding the
// process-wide field lock (batch.c) until release is called.
func holdFieldLock(t *testing.T) (release func()) {
	t.Helper()
	d := fakenvml.NewDev()
	h := openFake(t, &fakenvml.Lib{Devs: []*fakenvml.Dev{d}})
	entered := make(chan string, 1)
	unblock := d.Block("GetFieldValues", entered)
	done := make(chan struct{})
	go func() {
		defer close(done)
		var s reading.Sample
		h.GPUs[0].Sample(&s)
	}()
	<-entered
	return func() { unblock(); <-done }
}

// openFakeConfig is openFake with another configuration.
func openFakeConfig(t *testing.T, lib *fakenvml.Lib, cfg Config, sel ...string) *Host {
	t.Helper()
	if lib.InitRet == 0 {
		lib.InitRet = nvml.SUCCESS
	}
	h, err := Open(lib, OpenOptions{Select: sel, Config: cfg, Timeout: 5 * time.Second, Counters: counters.New()})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return h
}

func TestSampleReadsEverything(t *testing.T) {
	d := fakenvml.NewDev()
	// Values the fake has no field for, unlike the zeros it answers a
	// getter or field it does not know with.
	d.Getters[fakenvml.Getter{Fn: "GetMaxPcieLinkGeneration"}] = uint32(6)
	d.Getters[fakenvml.Getter{Fn: "GetMaxPcieLinkWidth"}] = uint32(32)
	d.Fields = map[uint32]uint64{197 /* NVML_FI_DEV_PCIE_COUNT_TX_BYTES */ : 1 << 40, 198 /* NVML_FI_DEV_PCIE_COUNT_RX_BYTES */ : 1 << 41}
	h := openFake(t, &fakenvml.Lib{Devs: []*fakenvml.Dev{d}})
	g := h.GPUs[0]
	info := g.Info()
	if info.Name != d.Name || info.UUID != "GPU-1111" || info.BusID != "00000000:4B:00.0" || info.NumFans != 2 {
		t.Fatalf("static facts: %+v", info)
	}
	if v, _ := info.Thresholds.GPUMax.Get(); v != 90 {
		t.Errorf("gpu max threshold = %d, want 90", v)
	}
	if info.GSPVersion != "570.124.06" || info.GSPMode != "enabled (default)" {
		t.Errorf("gsp: %q %q", info.GSPVersion, info.GSPMode)
	}
	var s reading.Sample
	g.Sample(&s)
	if s.Status != reading.StatusAnswered {
		t.Fatalf("status %v err %q", s.Status, s.Err)
	}
	checks := []struct {
		name string
		got  reading.Opt[uint64]
		want uint64
	}{
		{"temp", u(s.Values[reading.TempC]), 60},
		{"power", u(s.Values[reading.PowerMW]), 250_500},
		{"limit", u(s.Values[reading.PowerLimitMW]), 600_000},
		{"enforced", u(s.Values[reading.EnforcedLimitMW]), 600_000},
		{"energy", s.Values[reading.EnergyMJ], 123456789},
		{"memtemp", u(s.Values[reading.MemTempC]), 70},
		{"replay", s.Values[reading.PCIeReplay], 3},
		{"pstate", u(s.Values[reading.PState]), 2},
		{"gfx", u(s.Values[reading.GraphicsMHz]), 2400},
		{"mem", u(s.Values[reading.MemMHz]), 14001},
		{"sm", u(s.Values[reading.SMMHz]), 2400},
		{"gpuutil", u(s.Values[reading.GPUUtil]), 97},
		{"memutil", u(s.Values[reading.MemUtil]), 41},
		{"vram", s.Values[reading.VRAMUsedBytes], 40 << 30},
		{"vram total", s.Values[reading.VRAMTotalBytes], 96 << 30},
		{"gen", u(s.Values[reading.PCIeGen]), 5},
		{"width", u(s.Values[reading.PCIeWidth]), 16},
		{"max gen", s.Values[reading.PCIeMaxGen], 6},
		{"max width", s.Values[reading.PCIeMaxWidth], 32},
		{"tx bytes", s.Values[reading.PCIeTxBytes], 1 << 40},
		{"rx bytes", s.Values[reading.PCIeRxBytes], 1 << 41},
		{"throttle", s.Values[reading.Throttle], 4},
		{"fan0", u(s.Fans[0].Speed), 30},
		{"fan1 target", u(s.Fans[1].Target), 31},
		{"enc", u(s.Values[reading.EncUtil]), 0},
		{"dec", u(s.Values[reading.DecUtil]), 12},
	}
	for _, c := range checks {
		if !c.got.OK || c.got.V != c.want {
			t.Errorf("%s = %+v, want %d", c.name, c.got, c.want)
		}
	}
	if v, ok := s.Values[reading.TLimitC].Get(); !ok || v != 30 {
		t.Errorf("tlimit = %d %v, want 30", v, ok)
	}
	if v, ok := s.Sensor0.Get(); !ok || v.Temp != 60 || v.Controller != 5 {
		t.Errorf("sensor0 = %+v", s.Sensor0)
	}
	if s.KernelTime <= 0 {
		t.Errorf("kernel time %v", s.KernelTime)
	}
	// The batched quantities came from one GetFieldValues, not the
	// fallbacks; the second is the slow tier's health counters (health.go).
	if d.Count("GetPowerUsage") != 0 || d.Count("GetFieldValues") != 2 {
		t.Errorf("power via fallback %d, field calls %d", d.Count("GetPowerUsage"), d.Count("GetFieldValues"))
	}
}

// TestBatchCallsAreNVMLFunctions: every function the sample's batch calls
// is one NVML has (go-nvml's Interface has a method of its name less
// "nvml", versioned names such as _v2 included). The fake answers a getter
// it does not know with zeros and SUCCESS, so a misspelled Getter or Older
// in reading.Table would pass every other test and be missing on a real
// driver.
func TestBatchCallsAreNVMLFunctions(t *testing.T) {
	api := reflect.TypeFor[nvml.Interface]()
	for c := range numCalls {
		sym := fnInfo[callFn[c].fn].symbol
		if _, ok := api.MethodByName(strings.TrimPrefix(sym, "nvml")); !ok || !strings.HasPrefix(sym, "nvml") {
			t.Errorf("call %d (%s): %s is not an NVML function go-nvml knows", c, callFn[c].name, sym)
		}
	}
}

func u[T uint32 | uint64](o reading.Opt[T]) reading.Opt[uint64] {
	return reading.Opt[uint64]{V: uint64(o.V), OK: o.OK}
}

func TestCallsPerSampleBelowSeed(t *testing.T) {
	d := fakenvml.NewDev()
	h := openFakeConfig(t, &fakenvml.Lib{Devs: []*fakenvml.Dev{d}}, DefaultConfig(100*time.Millisecond))
	before := d.Total()
	var s reading.Sample
	const n = 100
	for range n {
		h.GPUs[0].Sample(&s)
	}
	per := float64(d.Total()-before) / n
	// The Python logger gpu-telemetry-deep.py made 17 calls per sample with
	// 2 fans, for fewer columns.
	if per >= 17 {
		t.Errorf("%.1f NVML calls per sample, want fewer than gpu-telemetry-deep.py's 17", per)
	}
	t.Logf("%.2f calls per sample", per)
}

func TestUnsupportedIsAbsentAndNotRepeated(t *testing.T) {
	d := fakenvml.NewDev()
	d.Set("GetTemperature", nvml.ERROR_NOT_SUPPORTED)
	d.Set("GetTargetFanSpeed", nvml.ERROR_NO_PERMISSION)
	s := sampled(t, d, 5)
	if s.Values[reading.TempC].OK || s.Values[reading.TLimitC].OK || s.Fans[0].Target.OK || s.Fans[1].Target.OK {
		t.Errorf("refused readings present: temp %+v target %+v", s.Values[reading.TempC], s.Fans[0].Target)
	}
	if s.Status != reading.StatusAnswered || !s.Values[reading.PowerMW].OK {
		t.Errorf("sample should still be OK with other readings: %v", s.Status)
	}
	if n := d.Count("GetTemperature"); n != 1 {
		t.Errorf("GetTemperature called %d times, want 1 (cached as unsupported)", n)
	}
	if n := d.Count("GetTargetFanSpeed"); n != 2 {
		t.Errorf("GetTargetFanSpeed called %d times, want 2 (once per fan)", n)
	}
}

// TestVersionMismatchIsAbsentAndNotRepeated: a driver that does not know
// the struct version asked for (NVML_ERROR_ARGUMENT_VERSION_MISMATCH) is
// refusing the reading, as one that lacks the function is: the reading is
// absent, the call is not made again every sample and the GPU counts no
// failure. (It was counted as a failure of every sample.)
func TestVersionMismatchIsAbsentAndNotRepeated(t *testing.T) {
	d := fakenvml.NewDev()
	d.Set("GetTemperature", nvml.ERROR_ARGUMENT_VERSION_MISMATCH)
	s := sampled(t, d, 5)
	if s.Values[reading.TempC].OK {
		t.Errorf("refused temperature present: %+v", s.Values[reading.TempC])
	}
	if s.Status != reading.StatusAnswered {
		t.Errorf("sample status %v, want ok: a refused reading is no failure", s.Status)
	}
	if n := d.Count("GetTemperature"); n != 1 {
		t.Errorf("GetTemperature called %d times, want 1 (cached as unavailable)", n)
	}
}

// TestRefusedArgumentIsOffAlone: a GPU that refuses one clock
// (nvmlDeviceGetClockInfo(NVML_CLOCK_SM)) still gives the other two every
// sample, and the refused one is not asked again until the re-probe. (The
// three calls shared one capability-cache entry: the SM clock's refusal
// switched the graphics and memory clocks off too.)
func TestRefusedArgumentIsOffAlone(t *testing.T) {
	d := fakenvml.NewDev()
	d.GetterRet = map[fakenvml.Getter]nvml.Return{{Fn: "GetClockInfo", Arg: uint32(nvml.CLOCK_SM)}: nvml.ERROR_NOT_SUPPORTED}
	h := openFake(t, &fakenvml.Lib{Devs: []*fakenvml.Dev{d}})
	g := h.GPUs[0]
	var s reading.Sample
	for i := range 5 {
		g.Sample(&s)
		if !s.Values[reading.GraphicsMHz].OK || !s.Values[reading.MemMHz].OK || s.Values[reading.SMMHz].OK {
			t.Fatalf("sample %d: graphics %+v memory %+v sm %+v, want graphics and memory only", i, s.Values[reading.GraphicsMHz], s.Values[reading.MemMHz], s.Values[reading.SMMHz])
		}
	}
	if n := d.Count("GetClockInfo"); n != 3+2*4 {
		t.Errorf("GetClockInfo called %d times in 5 samples, want 11 (SM once)", n)
	}
	d.Update(func(d *fakenvml.Dev) { d.GetterRet = nil })
	g.Sample(&s)
	if s.Values[reading.SMMHz].OK {
		t.Errorf("SM clock asked again before the re-probe")
	}
	g.base = g.base.Add(-testConfig.Reprobe) // the re-probe is due
	g.Sample(&s)
	if v, ok := s.Values[reading.SMMHz].Get(); !ok || v != 2400 || !s.Values[reading.GraphicsMHz].OK || !s.Values[reading.MemMHz].OK {
		t.Errorf("after the re-probe: sm %+v graphics %+v memory %+v", s.Values[reading.SMMHz], s.Values[reading.GraphicsMHz], s.Values[reading.MemMHz])
	}
}

func TestReprobeAfterInterval(t *testing.T) {
	d := fakenvml.NewDev()
	d.Set("GetTemperature", nvml.ERROR_NOT_SUPPORTED)
	h := openFake(t, &fakenvml.Lib{Devs: []*fakenvml.Dev{d}})
	g := h.GPUs[0]
	g.cfg.Reprobe = 0 // every sample re-probes
	var s reading.Sample
	g.Sample(&s)
	d.Set("GetTemperature", nvml.SUCCESS)
	g.Sample(&s)
	if !s.Values[reading.TempC].OK {
		t.Errorf("temperature not re-probed")
	}
}

func TestMissingSymbolsUseFallbacks(t *testing.T) {
	d := fakenvml.NewDev()
	lib := &fakenvml.Lib{Devs: []*fakenvml.Dev{d}, Missing: map[string]bool{
		"nvmlDeviceGetCurrentClocksEventReasons": true,
		"nvmlDeviceGetMemoryInfo_v2":             true,
		"nvmlDeviceGetFanSpeed_v2":               true,
		"nvmlDeviceGetNumFans":                   true,
		"nvmlDeviceGetTargetFanSpeed":            true,
		"nvmlDeviceGetThermalSettings":           true,
		"nvmlDeviceGetGspFirmwareVersion":        true,
		"nvmlDeviceGetGspFirmwareMode":           true,
		"nvmlDeviceGetFieldValues":               true,
	}}
	h := openFake(t, lib)
	g := h.GPUs[0]
	if g.Info().NumFans != 1 {
		t.Errorf("old driver fans = %d, want 1 (from nvmlDeviceGetFanSpeed)", g.Info().NumFans)
	}
	var s reading.Sample
	g.Sample(&s)
	for _, fn := range []string{"GetCurrentClocksEventReasons", "GetMemoryInfo_v2", "GetFanSpeed_v2", "GetNumFans",
		"GetTargetFanSpeed", "GetThermalSettings", "GetGspFirmwareVersion", "GetFieldValues"} {
		if d.Count(fn) != 0 {
			t.Errorf("%s called although the driver lacks it", fn)
		}
	}
	if !s.Values[reading.Throttle].OK || !s.Values[reading.VRAMUsedBytes].OK || !s.Fans[0].Speed.OK || !s.Values[reading.PowerMW].OK || !s.Values[reading.EnergyMJ].OK || !s.Values[reading.EnforcedLimitMW].OK {
		t.Errorf("fallbacks not used: %+v", s)
	}
	if s.Fans[0].Target.OK || s.Sensor0.OK || s.Values[reading.MemTempC].OK {
		t.Errorf("readings without a fallback should be absent")
	}
}

// A field the driver refuses inside a successful GetFieldValues is read by
// its own call in the same sample: the first row is as complete as the rest
// (not only the later rows: once, row 1 had an empty power_enforced_limit).
func TestFieldEntryUnsupportedFallsBack(t *testing.T) {
	d := fakenvml.NewDev()
	d.FieldRet[nvml.FI_DEV_POWER_INSTANT] = nvml.ERROR_NOT_SUPPORTED
	d.FieldRet[nvml.FI_DEV_POWER_CURRENT_LIMIT] = nvml.ERROR_NOT_SUPPORTED
	d.FieldRet[nvml.FI_DEV_MEMORY_TEMP] = nvml.ERROR_NOT_SUPPORTED
	h := openFake(t, &fakenvml.Lib{Devs: []*fakenvml.Dev{d}})
	var s reading.Sample
	for i := range 3 {
		h.GPUs[0].Sample(&s)
		if v, ok := s.Values[reading.PowerMW].Get(); !ok || v != 250_500 {
			t.Errorf("sample %d: power = %v %v, want fallback value", i+1, v, ok)
		}
		if v, ok := s.Values[reading.EnforcedLimitMW].Get(); !ok || v != 600_000 {
			t.Errorf("sample %d: enforced limit = %v %v, want fallback value", i+1, v, ok)
		}
		if s.Values[reading.MemTempC].OK {
			t.Errorf("sample %d: memory temperature has no fallback and must be absent", i+1)
		}
	}
	// From the second sample on the refused fields are left out of the
	// batch (re-probed after Reprobe) and only their own calls are made.
	if d.Count("GetPowerUsage") != 3 || d.Count("GetEnforcedPowerLimit") != 3 {
		t.Errorf("GetPowerUsage called %d times, GetEnforcedPowerLimit %d, want 3 each",
			d.Count("GetPowerUsage"), d.Count("GetEnforcedPowerLimit"))
	}
	if n := d.Count("GetPcieReplayCounter"); n != 0 {
		t.Errorf("GetPcieReplayCounter called %d times: a field the driver answered needs no fallback", n)
	}
}

func TestAbsurdValuesAreAbsent(t *testing.T) {
	d := fakenvml.NewDev()
	d.Getters[fakenvml.Getter{Fn: "GetTemperature"}] = uint32(4294967295)
	d.FanTarget = []int{4294967295, 30}
	d.Getters[fakenvml.Getter{Fn: "GetPowerManagementLimit"}] = uint32(0)
	d.Power = 4000000000
	s := sampled(t, d, 1)
	if s.Values[reading.TempC].OK || s.Values[reading.TLimitC].OK {
		t.Errorf("temperature 4294967295 recorded: %+v", s.Values[reading.TempC])
	}
	if s.Fans[0].Target.OK {
		t.Errorf("negative fan target recorded")
	}
	if !s.Fans[1].Target.OK {
		t.Errorf("sane fan target dropped")
	}
	if s.Values[reading.PowerLimitMW].OK || s.Values[reading.PowerMW].OK {
		t.Errorf("power limit 0 / absurd power recorded: %+v %+v", s.Values[reading.PowerLimitMW], s.Values[reading.PowerMW])
	}
}

func TestLostGPU(t *testing.T) {
	d := fakenvml.NewDev()
	h := openFake(t, &fakenvml.Lib{Devs: []*fakenvml.Dev{d}})
	for _, fn := range []string{"GetFieldValues", "GetTemperature", "GetPowerManagementLimit"} {
		d.Set(fn, nvml.ERROR_GPU_IS_LOST)
	}
	before := d.Total()
	var s reading.Sample
	h.GPUs[0].Sample(&s)
	if s.Status != reading.StatusLost {
		t.Fatalf("status %v, want lost", s.Status)
	}
	if s.Values[reading.TempC].OK || s.Values[reading.PowerMW].OK || s.Fans[0].Speed.OK {
		t.Errorf("lost sample carries readings")
	}
	if n := d.Total() - before; n != 1 {
		t.Errorf("%d calls to a lost GPU in one sample, want 1", n)
	}
}

func TestAllCallsFailing(t *testing.T) {
	d := fakenvml.NewDev()
	h := openFake(t, &fakenvml.Lib{Devs: []*fakenvml.Dev{d}})
	for _, cd := range callFn { // every call of a sample, as the fake names it
		d.Set(strings.TrimPrefix(cd.fn.String(), "nvmlDevice"), nvml.ERROR_UNKNOWN)
	}
	var s reading.Sample
	h.GPUs[0].Sample(&s)
	if s.Status != reading.StatusFailed {
		t.Fatalf("status %v, want failed", s.Status)
	}
	if s.Err != "nvmlDeviceGetFieldValues: ERROR_UNKNOWN" && s.Err == "" {
		t.Errorf("err %q", s.Err)
	}
	// Unknown errors are failures, not capabilities: they are retried.
	h.GPUs[0].Sample(&s)
	if d.Count("GetTemperature") != 2 {
		t.Errorf("failing call not retried: %d", d.Count("GetTemperature"))
	}
}

func TestSlowTierCarriedForward(t *testing.T) {
	d := fakenvml.NewDev()
	h := openFakeConfig(t, &fakenvml.Lib{Devs: []*fakenvml.Dev{d}}, Config{Reprobe: time.Hour, SlowEvery: 10, FieldWait: time.Millisecond})
	var s reading.Sample
	for i := range 25 {
		h.GPUs[0].Sample(&s)
		if !s.Values[reading.DecUtil].OK || !s.Values[reading.PCIeGen].OK {
			t.Fatalf("sample %d: slow tier value missing", i)
		}
	}
	if n := d.Count("GetDecoderUtilization"); n != 3 {
		t.Errorf("decoder utilization read %d times in 25 samples, want 3", n)
	}
}

func TestFieldLockHeldFallsBack(t *testing.T) {
	d := fakenvml.NewDev()
	h := openFake(t, &fakenvml.Lib{Devs: []*fakenvml.Dev{d}})
	defer holdFieldLock(t)()
	var s reading.Sample
	h.GPUs[0].Sample(&s)
	if !s.Values[reading.PowerMW].OK || d.Count("GetFieldValues") != 0 || d.Count("GetPowerUsage") != 1 {
		t.Errorf("did not fall back: power %+v fields %d usage %d", s.Values[reading.PowerMW], d.Count("GetFieldValues"), d.Count("GetPowerUsage"))
	}
}

func TestWorkerReportsStuckCall(t *testing.T) {
	d := fakenvml.NewDev()
	h := openFake(t, &fakenvml.Lib{Devs: []*fakenvml.Dev{d}})
	entered := make(chan string, 1)
	release := d.Block("GetTemperature", entered)
	samples := make(chan reading.Status, 4)
	// Times are monotonic readings (durations since the caller's base).
	w := NewWorker(h.GPUs[0], func(s *reading.Sample) { samples <- s.Status }, time.Minute)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go w.Run(ctx)
	start := time.Hour
	if !w.Dispatch(start) {
		t.Fatal("first dispatch refused")
	}
	<-entered
	if w.Dispatch(start + time.Second) {
		t.Error("second dispatch accepted while a sample is in flight")
	}
	fn, since, stuck := w.Stuck(start+time.Second, time.Second)
	if !stuck || fn != fnOf("nvmlDeviceGetTemperature") || since != start {
		t.Errorf("Stuck = %v %v %v, want nvmlDeviceGetTemperature since the dispatch", fn, since, stuck)
	}
	if since, busy := w.Busy(); !busy || since != start {
		t.Errorf("Busy = %v %v, want busy since the dispatch", since, busy)
	}
	if _, _, stuck := w.Stuck(start+time.Second-1, time.Second); stuck {
		t.Error("stuck before the deadline")
	}
	release()
	if st := <-samples; st != reading.StatusAnswered {
		t.Errorf("sample after release: %v", st)
	}
	deadline := time.Now().Add(5 * time.Second)
	for !w.Dispatch(start + 2*time.Second) {
		if time.Now().After(deadline) {
			t.Fatal("worker never became free")
		}
		time.Sleep(time.Millisecond)
	}
	<-samples
}

func TestOpenErrors(t *testing.T) {
	cases := []struct {
		name string
		lib  *fakenvml.Lib
		sel  []string
		is   error
		msg  string
	}{
		{"no driver", &fakenvml.Lib{InitRet: nvml.ERROR_DRIVER_NOT_LOADED}, nil, ErrNoDriver, ""},
		{"no library", &fakenvml.Lib{InitRet: nvml.ERROR_LIBRARY_NOT_FOUND}, nil, ErrNoDriver, ""},
		{"zero gpus", &fakenvml.Lib{InitRet: nvml.SUCCESS}, nil, ErrNoGPU, ""},
		{"init failure", &fakenvml.Lib{InitRet: nvml.ERROR_NO_PERMISSION}, nil, nil, "nvmlInit"},
		{"index out of range", &fakenvml.Lib{InitRet: nvml.SUCCESS, Devs: []*fakenvml.Dev{fakenvml.NewDev()}}, []string{"3"}, nil, "3: no GPU with index 3"},
		{"unknown uuid", &fakenvml.Lib{InitRet: nvml.SUCCESS, Devs: []*fakenvml.Dev{fakenvml.NewDev()}}, []string{"GPU-nope"}, ErrUnknownGPU, "GPU-nope"},
		{"uuid prefix of two", &fakenvml.Lib{InitRet: nvml.SUCCESS, Devs: twoDevs("GPU-5a3c0001", "GPU-5a3c0002")}, []string{"5a3c"}, ErrUnknownGPU, "5a3c: names 2 GPUs"},
		{"too short a prefix", &fakenvml.Lib{InitRet: nvml.SUCCESS, Devs: twoDevs("GPU-5a3c0001", "GPU-6a3c0002")}, []string{"5a3"}, ErrUnknownGPU, "not a GPU index, UUID"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Open(c.lib, OpenOptions{Select: c.sel, Counters: counters.New()})
			if err == nil {
				t.Fatal("no error")
			}
			if c.is != nil && !errors.Is(err, c.is) {
				t.Errorf("err %v, want %v", err, c.is)
			}
			if c.msg != "" && !strings.Contains(err.Error(), c.msg) {
				t.Errorf("err %q, want it to contain %q", err, c.msg)
			}
		})
	}
}

// twoDevs are two fake GPUs with these UUIDs.
func twoDevs(u0, u1 string) []*fakenvml.Dev {
	a, b := fakenvml.NewDev(), fakenvml.NewDev()
	a.UUID, b.UUID = u0, u1
	b.Bus = "00000000:81:00.0"
	return []*fakenvml.Dev{a, b}
}

func TestSelectGPUs(t *testing.T) {
	a, b, c := fakenvml.NewDev(), fakenvml.NewDev(), fakenvml.NewDev()
	b.UUID, b.Bus = "GPU-2222", "00000000:81:00.0"
	c.UUID, c.Bus = "GPU-3333-c1c1", "00000001:C1:00.0"
	lib := &fakenvml.Lib{Devs: []*fakenvml.Dev{a, b, c}}
	cases := []struct {
		name string
		sel  []string
		want []int
	}{
		{"all", nil, []int{0, 1, 2}},
		{"index", []string{"1"}, []int{1}},
		{"uuid any case", []string{"gpu-3333"}, []int{2}},
		{"nvml bus id", []string{"00000000:81:00.0"}, []int{1}},
		{"kernel bus id", []string{"PCI:0001:c1:00"}, []int{2}},
		{"lspci bus id", []string{"0000:81:00.0"}, []int{1}},
		{"mixed and repeated", []string{"2", "0", "GPU-3333"}, []int{0, 2}},
		{"whole uuid", []string{"GPU-3333-C1C1"}, []int{2}},
		{"uuid prefix without GPU-, not an index", []string{"3333-c"}, []int{2}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := openFake(t, lib, tc.sel...)
			var got []int
			for _, g := range h.GPUs {
				got = append(got, g.Info().Index)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Fatalf("got %v, want %v", got, tc.want)
				}
			}
		})
	}
}

func TestSampleDoesNotAllocate(t *testing.T) {
	d := fakenvml.NewDev()
	h := openFake(t, &fakenvml.Lib{Devs: []*fakenvml.Dev{d}})
	var s reading.Sample
	g := h.GPUs[0]
	g.Sample(&s)
	allocs := testing.AllocsPerRun(100, func() { g.Sample(&s) })
	if allocs != 0 {
		t.Errorf("Sample allocates %.1f times per call", allocs)
	}
}

func newFakeLibForBench() *fakenvml.Lib {
	return &fakenvml.Lib{InitRet: nvml.SUCCESS, Devs: []*fakenvml.Dev{fakenvml.NewDev()}}
}

func TestHandleFailureAtStartIsRetried(t *testing.T) {
	d := fakenvml.NewDev()
	lib := &fakenvml.Lib{Devs: []*fakenvml.Dev{d}, HandleRet: map[int]nvml.Return{0: nvml.ERROR_UNKNOWN}}
	h := openFake(t, lib)
	g := h.GPUs[0]
	var s reading.Sample
	g.Sample(&s)
	if s.Status != reading.StatusFailed || !strings.Contains(s.Err, "nvmlDeviceGetHandleByIndex") {
		t.Fatalf("without a handle: status %v err %q", s.Status, s.Err)
	}
	lib.HandleRet[0] = nvml.SUCCESS
	g.Sample(&s) // within the retry interval: still failing
	if s.Status != reading.StatusFailed {
		t.Fatalf("retried before the interval")
	}
	g.nextStatic = time.Time{} // the interval has passed
	g.Sample(&s)
	if s.Status != reading.StatusAnswered || !s.Values[reading.TempC].OK || g.Info().UUID != "GPU-1111" || s.NumFans != 2 {
		t.Errorf("after the retry: status %v temp %+v uuid %q fans %d", s.Status, s.Values[reading.TempC], g.Info().UUID, s.NumFans)
	}
}

// TestSelectorOfAGPUStuckAtStart: a --gpu selector by UUID or bus id that
// names no GPU identified at start, while GPU 1 is stuck in its static
// facts (or has no handle, or its UUID did not read), selects GPU 1 in its
// place and is pending; once GPU 1's facts are in, Names tells whether it
// is the GPU the selector names. An index never waits for facts, and a selector that names nothing
// when every GPU answered is still an error (TestOpenErrors).
func TestSelectorOfAGPUStuckAtStart(t *testing.T) {
	cases := []struct {
		name     string
		noHandle bool // GPU 1's handle fails at start instead of its facts being stuck
		noUUID   bool // GPU 1's UUID read fails at start, its other facts answer
		sel      []string
		want     []int    // the GPUs selected
		pending  []string // Host.Pending
		names    []string // Host.Names of GPU 1 once its facts are in
		err      string   // Open's error, if any
	}{
		{name: "bus id of the stuck GPU", sel: []string{"00000000:21:00.0"}, want: []int{1},
			pending: []string{"00000000:21:00.0"}, names: []string{"00000000:21:00.0"}},
		{name: "uuid of the stuck GPU, with an index", sel: []string{"0", "gpu-2222"}, want: []int{0, 1},
			pending: []string{"gpu-2222"}, names: []string{"gpu-2222"}},
		{name: "a selector naming another GPU", sel: []string{"GPU-nope"}, want: []int{1},
			pending: []string{"GPU-nope"}},
		{name: "the answered GPU's bus id", sel: []string{"0000:4b:00.0"}, want: []int{0}},
		{name: "no handle at start", noHandle: true, sel: []string{"PCI:0000:21:00"}, want: []int{1},
			pending: []string{"PCI:0000:21:00"}, names: []string{"PCI:0000:21:00"}},
		{name: "uuid of a GPU whose UUID did not read", noUUID: true, sel: []string{"gpu-2222"}, want: []int{1},
			pending: []string{"gpu-2222"}, names: []string{"gpu-2222"}},
		{name: "index out of range", sel: []string{"5"}, err: "no GPU with index 5"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a, b := fakenvml.NewDev(), fakenvml.NewDev()
			b.UUID, b.Bus = "GPU-2222", "00000000:21:00.0"
			lib := &fakenvml.Lib{InitRet: nvml.SUCCESS, Devs: []*fakenvml.Dev{a, b}}
			release := func() {}
			switch {
			case tc.noHandle:
				lib.HandleRet = map[int]nvml.Return{1: nvml.ERROR_UNKNOWN}
			case tc.noUUID:
				b.Set("GetUUID", nvml.ERROR_UNKNOWN)
				release = func() { b.Set("GetUUID", nvml.SUCCESS) }
			default:
				release = b.Block("GetName", nil)
			}
			defer release()
			h, err := Open(lib, OpenOptions{Select: tc.sel, Config: testConfig, Timeout: 100 * time.Millisecond, Counters: counters.New()})
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			var got []int
			for _, g := range h.GPUs {
				got = append(got, g.Info().Index)
			}
			if !slices.Equal(got, tc.want) || !slices.Equal(h.Pending(), tc.pending) {
				t.Fatalf("selected %v pending %q, want %v %q", got, h.Pending(), tc.want, tc.pending)
			}
			if tc.pending == nil {
				return
			}
			g := h.GPUs[len(h.GPUs)-1]
			if n := h.Names(g); n != nil {
				t.Fatalf("before GPU 1's facts are in: Names %q, want none", n)
			}
			release()
			if tc.noHandle {
				lib.HandleRet[1] = nvml.SUCCESS
			}
			if tc.noHandle || tc.noUUID {
				var s reading.Sample
				g.Sample(&s) // the retry of the start-up read or of the UUID (its first, due at once)
			}
			for deadline := time.Now().Add(5 * time.Second); !g.FactsKnown(); time.Sleep(time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatal("GPU 1's facts never came in")
				}
			}
			if n := h.Names(g); !slices.Equal(n, tc.names) {
				t.Errorf("once GPU 1's facts are in: Names %q, want %q", n, tc.names)
			}
		})
	}
}

// TestStaticErrReadWhileRetried: StaticErr is read by other goroutines (the
// monitor's system-info.txt, rewritten when another GPU answers late) while
// the GPU's worker retries its start-up read and sets it: no data race.
func TestStaticErrReadWhileRetried(t *testing.T) {
	lib := &fakenvml.Lib{Devs: []*fakenvml.Dev{fakenvml.NewDev()}, HandleRet: map[int]nvml.Return{0: nvml.ERROR_UNKNOWN}}
	g := openFake(t, lib).GPUs[0]
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 100 {
			_ = g.StaticErr()
		}
	}()
	var s reading.Sample
	for range 100 {
		g.nextStatic = time.Time{}
		g.Sample(&s)
	}
	<-done
	if e := g.StaticErr(); !strings.Contains(e, "nvmlDeviceGetHandleByIndex") {
		t.Errorf("StaticErr %q", e)
	}
}

// TestExecStartFailureCountedAndLogged: a GPU whose executor cannot be
// started has failed samples that say why; the failure is counted each time
// (it is tried again with the static facts), logged once, and the GPU is
// sampled once the executor starts.
func TestExecStartFailureCountedAndLogged(t *testing.T) {
	var logs bytes.Buffer
	d := fakenvml.NewDev()
	lib := &fakenvml.Lib{InitRet: nvml.SUCCESS, Devs: []*fakenvml.Dev{d}}
	fail := func(*native, int, time.Duration) (*nativeExec, error) {
		return nil, errors.New("no NVML handle for the GPU")
	}
	h, err := Open(lib, OpenOptions{Config: testConfig, Timeout: 5 * time.Second, Logger: slog.New(slog.NewTextHandler(&logs, nil)), startNative: fail, Counters: counters.New()})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	g := h.GPUs[0]
	if e := g.StaticErr(); e != "" {
		t.Errorf("StaticErr = %q: the static facts were read, only the executor failed", e)
	}
	var s reading.Sample
	g.nextStatic = time.Time{}
	g.Sample(&s) // a retry that fails again
	if s.Status != reading.StatusFailed || !strings.Contains(s.Err, "cannot start the GPU's executor: no NVML handle for the GPU") {
		t.Fatalf("a GPU without an executor: status %v, error %q; want failed, with why", s.Status, s.Err)
	}
	if n := g.reg.Load(nativeExecFailures); n != 2 {
		t.Errorf("NativeExecFailures = %d, want 2 (at start and at the retry)", n)
	}
	g.Sample(&s) // before the retry interval: not tried again
	if n := g.reg.Load(nativeExecFailures); n != 2 {
		t.Errorf("NativeExecFailures = %d before the retry interval, want 2", n)
	}
	out := logs.String()
	if n := strings.Count(out, "cannot start the GPU's executor"); n != 1 {
		t.Errorf("logged %d times, want once:\n%s", n, out)
	}
	testutil.Contains(t, "the log line", out, "native_exec_failures", `error="no NVML handle for the GPU"`)
	g.startNative = newNativeExec
	g.nextStatic = time.Time{}
	g.Sample(&s)
	if s.Status != reading.StatusAnswered || !s.Values[reading.TempC].OK || s.Values[reading.TempC].V != 60 {
		t.Errorf("once the executor starts: status %v, error %q, temperature %v; want a sample", s.Status, s.Err, s.Values[reading.TempC])
	}
}

// TestNoCallAfterALostGPU: a getter that answers GPU_IS_LOST ends the batch
// (batch.c): the later getters of the sample are not called.
func TestNoCallAfterALostGPU(t *testing.T) {
	d := fakenvml.NewDev()
	h := openFake(t, &fakenvml.Lib{Devs: []*fakenvml.Dev{d}})
	d.Set("GetTemperature", nvml.ERROR_GPU_IS_LOST)
	before := d.Calls()
	var s reading.Sample
	h.GPUs[0].Sample(&s)
	after := d.Calls()
	if after["GetFieldValues"] != before["GetFieldValues"]+1 || after["GetTemperature"] != before["GetTemperature"]+1 {
		t.Fatalf("the fields and the temperature were not called once: %v -> %v", before, after)
	}
	for _, fn := range []string{"GetPowerManagementLimit", "GetClockInfo", "GetCurrentClocksEventReasons", "GetFanSpeed_v2", "GetTargetFanSpeed"} {
		if after[fn] != before[fn] {
			t.Errorf("%s called after the GPU was lost (%d -> %d)", fn, before[fn], after[fn])
		}
	}
	if s.Status != reading.StatusLost {
		t.Errorf("status %v, want lost", s.Status)
	}
}

// TestNoCallAfterAFieldEntrySaysLost: GetFieldValues answers SUCCESS but
// one entry says GPU_IS_LOST: the GPU is lost (fieldEntry), so batch.c calls
// nothing more in that sample, neither the planned getters nor the
// fallbacks of the entries the driver refused, and the sample says lost.
func TestNoCallAfterAFieldEntrySaysLost(t *testing.T) {
	d := fakenvml.NewDev()
	h := openFake(t, &fakenvml.Lib{Devs: []*fakenvml.Dev{d}})
	var s reading.Sample
	h.GPUs[0].Sample(&s)
	if s.Status != reading.StatusAnswered {
		t.Fatalf("first sample: status %v", s.Status)
	}
	d.FieldRet[fieldReadings[0].def.Field] = nvml.ERROR_GPU_IS_LOST
	for _, fr := range fieldReadings[1:] {
		d.FieldRet[fr.def.Field] = nvml.ERROR_UNKNOWN // refused alone: its own call would follow
	}
	before := d.Calls()
	h.GPUs[0].Sample(&s)
	after := d.Calls()
	if after["GetFieldValues"] != before["GetFieldValues"]+1 {
		t.Fatalf("the field batch was not called once: %v -> %v", before, after)
	}
	for fn, n := range after {
		if fn != "GetFieldValues" && n != before[fn] {
			t.Errorf("%s called %d times after an entry of the field batch said the GPU is lost", fn, n-before[fn])
		}
	}
	if s.Status != reading.StatusLost || s.Err != "GPU is lost" {
		t.Errorf("status %v (%q), want lost", s.Status, s.Err)
	}
	if s.Values[reading.TempC].OK || s.Values[reading.PowerMW].OK || s.Fans[0].Speed.OK {
		t.Errorf("lost sample carries readings")
	}
}

// TestStaticProblem: why a GPU's static facts are not read, as
// system-info.txt and the probe say it: the call a start-up read is stuck
// in, the error of one that failed, nothing once they are read.
func TestStaticProblem(t *testing.T) {
	a, b, c := fakenvml.NewDev(), fakenvml.NewDev(), fakenvml.NewDev()
	release := b.Block("GetName", nil)
	defer release()
	lib := &fakenvml.Lib{InitRet: nvml.SUCCESS, Devs: []*fakenvml.Dev{a, b, c}, HandleRet: map[int]nvml.Return{2: nvml.ERROR_GPU_IS_LOST}}
	h, err := Open(lib, OpenOptions{Config: testConfig, Timeout: 100 * time.Millisecond, Counters: counters.New()})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	for i, want := range []struct {
		why   string
		stuck bool
	}{
		{"", false},
		{"stuck in " + FnName.String(), true},
		{FnGetHandle.String() + ": " + retText(nvml.ERROR_GPU_IS_LOST), false},
	} {
		if why, stuck := h.GPUs[i].StaticProblem(); why != want.why || stuck != want.stuck {
			t.Errorf("GPU %d: StaticProblem() = %q %v, want %q %v", i, why, stuck, want.why, want.stuck)
		}
	}
}

// TestIdentityFailedAtStartIsReadAgain: a GPU whose handle was had at start
// but whose UUID and bus id could not be read asks for them again on the
// static facts' retry cadence (not every sample) and publishes them once
// had; a GPU that knows them never asks again.
func TestIdentityFailedAtStartIsReadAgain(t *testing.T) {
	d := fakenvml.NewDev()
	d.Set("GetUUID", nvml.ERROR_UNKNOWN)
	d.Set("GetPciInfo", nvml.ERROR_UNKNOWN)
	h := openFake(t, &fakenvml.Lib{Devs: []*fakenvml.Dev{d}})
	g := h.GPUs[0]
	if in := g.Info(); in.UUID != "" || in.BusID != "" || !g.FactsKnown() {
		t.Fatalf("at start: uuid %q bus %q facts known %v", in.UUID, in.BusID, g.FactsKnown())
	}
	var s reading.Sample
	g.nextStatic = time.Time{}
	g.Sample(&s) // asks again, refused again
	if s.Status != reading.StatusAnswered {
		t.Fatalf("a refused UUID fails the sample: %v %q", s.Status, s.Err)
	}
	d.Set("GetUUID", nvml.SUCCESS)
	d.Set("GetPciInfo", nvml.SUCCESS)
	before := d.Calls()
	for range 5 { // within the retry interval: not asked
		g.Sample(&s)
	}
	if after := d.Calls(); after["GetUUID"] != before["GetUUID"] || after["GetPciInfo"] != before["GetPciInfo"] {
		t.Fatalf("asked for the UUID in every sample: %d -> %d", before["GetUUID"], after["GetUUID"])
	}
	g.nextStatic = time.Time{} // the interval has passed
	g.Sample(&s)
	if in := g.Info(); in.UUID != "GPU-1111" || in.BusID != "00000000:4B:00.0" || s.Status != reading.StatusAnswered {
		t.Fatalf("after the retry: uuid %q bus %q status %v", in.UUID, in.BusID, s.Status)
	}
	before = d.Calls()
	g.nextStatic = time.Time{}
	g.Sample(&s)
	if after := d.Calls(); after["GetUUID"] != before["GetUUID"] || after["GetPciInfo"] != before["GetPciInfo"] {
		t.Errorf("the UUID asked for once known")
	}
}

// TestIdentityRetryFindsTheGPULost: the retried UUID read answering
// GPU_IS_LOST makes the sample lost, with no call after it.
func TestIdentityRetryFindsTheGPULost(t *testing.T) {
	d := fakenvml.NewDev()
	d.Set("GetUUID", nvml.ERROR_UNKNOWN)
	h := openFake(t, &fakenvml.Lib{Devs: []*fakenvml.Dev{d}})
	g := h.GPUs[0]
	d.Set("GetUUID", nvml.ERROR_GPU_IS_LOST)
	g.nextStatic = time.Time{}
	before := d.Total()
	var s reading.Sample
	g.Sample(&s)
	if s.Status != reading.StatusLost {
		t.Errorf("status %v, want lost", s.Status)
	}
	if n := d.Total() - before; n != 1 {
		t.Errorf("%d calls in a sample whose first call found the GPU lost, want 1", n)
	}
}

// TestReidentifyAnUnselectedGPU: the UUID of a GPU --gpu did not select,
// unread at start, is read again by Reidentify on a goroutine of its own:
// Reidentify does not wait for a read stuck in the driver, does not begin
// another while it is in flight, and the UUID, once read, is among the
// UUIDs enumerated; while in flight, it is reported in the driver
// (UnselectedInDriver). A selected GPU, its UUID unread too, is left to its
// samples.
func TestReidentifyAnUnselectedGPU(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sel, unsel := fakenvml.NewDev(), fakenvml.NewDev()
		unsel.UUID = "GPU-2222"
		sel.Set("GetUUID", nvml.ERROR_UNKNOWN)
		unsel.Set("GetUUID", nvml.ERROR_UNKNOWN)
		h := openFake(t, &fakenvml.Lib{Devs: []*fakenvml.Dev{sel, unsel}}, "0")
		if u := h.EnumeratedUUIDs(); len(h.GPUs) != 1 || u[0] != "" || u[1] != "" {
			t.Fatalf("at start: %d GPUs selected, enumerated %q; want 1, neither UUID read", len(h.GPUs), u)
		}
		if in := h.UnselectedInDriver(); len(in) != 0 {
			t.Fatalf("at start: GPUs %v in the driver, want none", in)
		}
		entered := make(chan string, 1)
		release := unsel.Block("GetUUID", entered)
		t.Cleanup(release)
		unsel.Set("GetUUID", nvml.SUCCESS)
		selCalls := sel.Count("GetUUID")
		for range 3 {
			h.Reidentify() // returns with the read stuck
			time.Sleep(time.Minute)
		}
		select {
		case <-entered:
		default:
			t.Fatal("Reidentify did not read GPU 1's UUID")
		}
		if n := unsel.Count("GetUUID"); n != 2 { // the start's, then one in flight
			t.Errorf("GetUUID called %d times on GPU 1, want 2: one read again, in flight, not begun again", n)
		}
		if in := h.UnselectedInDriver(); !slices.Equal(in, []int{1}) {
			t.Errorf("GPUs %v in the driver with GPU 1's read stuck, want [1]", in)
		}
		release()
		synctest.Wait()
		if in := h.UnselectedInDriver(); len(in) != 0 {
			t.Errorf("GPUs %v in the driver once GPU 1's read returned, want none", in)
		}
		if u := h.EnumeratedUUIDs(); u[1] != "GPU-2222" {
			t.Errorf("once read: %q, want GPU-2222 at index 1", u)
		}
		if n := sel.Count("GetUUID"); n != selCalls {
			t.Errorf("GetUUID called %d times more on the selected GPU, want 0", n-selCalls)
		}
	})
}

// TestEnumeratedUUIDsHaveALateUUID: a UUID read after start (its first read
// failed) is among the UUIDs enumerated, which tell a missing board from
// one that is there.
func TestEnumeratedUUIDsHaveALateUUID(t *testing.T) {
	d := fakenvml.NewDev()
	d.Set("GetUUID", nvml.ERROR_UNKNOWN)
	h := openFake(t, &fakenvml.Lib{Devs: []*fakenvml.Dev{d}})
	if u := h.EnumeratedUUIDs(); len(u) != 1 || u[0] != "" {
		t.Fatalf("at start: %q", u)
	}
	d.Set("GetUUID", nvml.SUCCESS)
	g := h.GPUs[0]
	g.nextStatic = time.Time{}
	var s reading.Sample
	g.Sample(&s)
	if u := h.EnumeratedUUIDs(); len(u) != 1 || u[0] != "GPU-1111" {
		t.Errorf("once read: %q, want GPU-1111", u)
	}
}
