package sampler

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpu-telemetry/gpu-telemetry/internal/counters"
	"github.com/gpu-telemetry/gpu-telemetry/internal/testutil"
	"github.com/gpu-telemetry/gpu-telemetry/sampler/fakenvml"
)

func TestProbeTimesEveryCallReadOnly(t *testing.T) {
	d0, d1 := fakenvml.NewDev(), fakenvml.NewDev()
	for _, d := range []*fakenvml.Dev{d0, d1} { // a B200's memory repair, SRAM and fabric getters too
		d.SramEcc, d.Repair, d.Unrepairable = &nvml.EccSramErrorStatus{}, &nvml.RepairStatus{}, &nvml.UnrepairableMemoryStatus_v1{}
		d.Fabric = &nvml.GpuFabricInfo_v4{State: 3}
	}
	h := openFake(t, &fakenvml.Lib{Devs: []*fakenvml.Dev{d0, d1}})
	rep := Probe(h, ProbeOptions{Calls: 20, Deadline: time.Second, Interval: 100 * time.Millisecond, SlowEvery: 10})
	if len(rep.GPUs) != 2 || len(rep.Kinds) < 15 {
		t.Fatalf("%d GPUs, %d kinds", len(rep.GPUs), len(rep.Kinds))
	}
	for _, k := range rep.Kinds {
		for i := range rep.GPUs {
			if k.Alone[i].N != 20 || k.Together[i].N != 20 {
				t.Errorf("%s gpu %d: %d alone, %d together, want 20 each", k.Name, i, k.Alone[i].N, k.Together[i].N)
			}
		}
	}
	// Every column at its normal rate: 14 calls (2 fans) plus the slow tier
	// (14 calls every 10th sample: 10, among them JPEG, OFA and BAR1, and
	// the 4 health getters of memory repair, SRAM and the fabric) plus the
	// process reader's 3 a second; the static readings (maximum clocks,
	// thresholds, the GPU's maximum link) are read once, not per sample.
	if e := rep.Estimate(); e.CallsPerSample < 15.6 || e.CallsPerSample > 15.8 || e.CallsPerSampleTop >= e.CallsPerSample {
		t.Errorf("calls per sample %.2f (stretched %.2f), want 15.7 and fewer when stretched", e.CallsPerSample, e.CallsPerSampleTop)
	}
	// 40 calls per kind and GPU (two phases), fan calls on fan 0 only.
	if n := d0.Count("GetTemperature"); n != 40 {
		t.Errorf("temperature called %d times, want 40", n)
	}
	// Nothing but getters: no Set*, no clear, no reset.
	for _, d := range []*fakenvml.Dev{d0, d1} {
		for fn := range d.Calls() {
			if !strings.HasPrefix(fn, "Get") {
				t.Errorf("probe called %s: not a getter", fn)
			}
		}
	}
}

func TestProbeLeavesAHungGPUAlone(t *testing.T) {
	d0, d1 := fakenvml.NewDev(), fakenvml.NewDev()
	h := openFake(t, &fakenvml.Lib{Devs: []*fakenvml.Dev{d0, d1}})
	release := d1.Block("GetPowerManagementLimit", nil)
	defer release()
	t0 := time.Now()
	rep := Probe(h, ProbeOptions{Calls: 10, Deadline: 50 * time.Millisecond, Interval: 100 * time.Millisecond, SlowEvery: 10})
	if el := time.Since(t0); el > 10*time.Second {
		t.Fatalf("probe waited %v on a hung call", el)
	}
	if rep.Hung[0] != "" || !strings.Contains(rep.Hung[1], "nvmlDeviceGetPowerManagementLimit") {
		t.Fatalf("hung = %q", rep.Hung)
	}
	if n := d1.Count("GetPowerManagementLimit"); n != 1 {
		t.Errorf("the hung call was made %d times, want once (one call in flight)", n)
	}
	var b bytes.Buffer
	rep.Write(&b)
	if !strings.Contains(b.String(), "GPU 1: nvmlDeviceGetPowerManagementLimit did not return within 50ms") {
		t.Errorf("report does not name the hung call:\n%s", b.String())
	}
}

// TestProbeNamesAGPUSilentAtStart: a GPU that did not answer at start is
// not probed, but named with why, and the verdict does not say it fits;
// with no other GPU there is nothing to judge.
func TestProbeNamesAGPUSilentAtStart(t *testing.T) {
	for _, c := range []struct {
		name    string
		devs    int
		verdict string
	}{
		{"beside a GPU that answers", 2, "verdict: GPU 1 not answering (named above); on the figures measured: fits: "},
		{"alone", 1, "verdict: GPU 0 not answering (named above); no GPU was probed: nothing to judge\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			lib := &fakenvml.Lib{HandleRet: map[int]nvml.Return{c.devs - 1: nvml.ERROR_GPU_IS_LOST}}
			for range c.devs {
				lib.Devs = append(lib.Devs, fakenvml.NewDev())
			}
			rep := Probe(openFake(t, lib), ProbeOptions{Calls: 10, Deadline: time.Second, Interval: 100 * time.Millisecond, SlowEvery: 10})
			silent := c.devs - 1
			if len(rep.GPUs) != c.devs-1 || len(rep.Silent) != 1 || rep.Silent[0].GPU != silent || !slices.Equal(rep.Stuck(), []int{silent}) {
				t.Fatalf("probed %v, silent %+v, stuck %v", rep.GPUs, rep.Silent, rep.Stuck())
			}
			var b bytes.Buffer
			rep.Write(&b)
			want := fmt.Sprintf("GPU %d: did not answer at start (%s: %s); not probed", silent, FnGetHandle, retText(nvml.ERROR_GPU_IS_LOST))
			if !strings.Contains(b.String(), want) || !strings.Contains(b.String(), c.verdict) {
				t.Errorf("report lacks %q or %q:\n%s", want, c.verdict, b.String())
			}
		})
	}
}

func TestProbeRefusedCallIsNotRepeated(t *testing.T) {
	d := fakenvml.NewDev()
	d.Set("GetEncoderUtilization", nvml.ERROR_NOT_SUPPORTED)
	h := openFake(t, &fakenvml.Lib{Devs: []*fakenvml.Dev{d}})
	rep := Probe(h, ProbeOptions{Calls: 10, Deadline: time.Second, Interval: 100 * time.Millisecond, SlowEvery: 10})
	var b bytes.Buffer
	rep.Write(&b)
	if !strings.Contains(b.String(), "refused by the driver ("+retText(nvml.ERROR_NOT_SUPPORTED)+")") {
		t.Errorf("refused call not shown:\n%s", b.String())
	}
	if n := d.Count("GetEncoderUtilization"); n > 2 {
		t.Errorf("refused call made %d times", n)
	}
}

// TestProbeReportGolden: the text, and the estimate under a driver lock
// (together = 8 x alone) and without one.
func TestProbeReportGolden(t *testing.T) {
	kinds := []struct {
		name      string
		per, top  float64
		alone     time.Duration
		lockScale float64
	}{
		{"nvmlDeviceGetFieldValues(5 fields)", 1, 1, time.Millisecond, 8},
		{"nvmlDeviceGetTemperature", 1, 1, 250 * time.Microsecond, 8},
		{"nvmlDeviceGetPerformanceState", 1, 0.1, 250 * time.Microsecond, 8},
		{"nvmlDeviceGetEncoderUtilization", 0.1, 0.016, 250 * time.Microsecond, 8},
	}
	for _, lock := range []bool{false, true} {
		rep := ProbeReport{Driver: "580.95.05", NVML: "13.580.95.05", Opts: ProbeOptions{Calls: 200, Deadline: time.Second, Interval: 100 * time.Millisecond, SlowEvery: 10}}
		for i := range 8 {
			rep.GPUs = append(rep.GPUs, i)
			rep.Hung = append(rep.Hung, "")
		}
		rep.Hung[3] = "nvmlDeviceGetTemperature"
		for _, k := range kinds {
			pk := ProbeKind{Name: k.name, PerSample: k.per, PerSampleTop: k.top}
			for range 8 {
				tog := k.alone
				if lock {
					tog = time.Duration(float64(k.alone) * k.lockScale)
				}
				pk.Alone = append(pk.Alone, ProbeStat{N: 200, P50: k.alone, P99: 4 * k.alone})
				pk.Together = append(pk.Together, ProbeStat{N: 200, P50: tog, P99: 4 * tog})
			}
			rep.Kinds = append(rep.Kinds, pk)
		}
		rep.Kinds = append(rep.Kinds, ProbeKind{Name: "nvmlDeviceGetCurrPcieLinkWidth", PerSample: 0.1, Alone: make([]ProbeStat, 8), Together: make([]ProbeStat, 8)})
		rep.Kinds[len(rep.Kinds)-1].Alone[0].Err = "Not Supported"
		var b bytes.Buffer
		if err := rep.Write(&b); err != nil {
			t.Fatal(err)
		}
		name := "probe-nolock.golden"
		if lock {
			name = "probe-lock.golden"
		}
		testutil.Golden(t, name, b.Bytes())
	}
}

// The probe makes its calls through the GPU's own executor (the C batch the
// daemon samples with, here over the fake), so the call in flight is the
// one the GPU reports.
func TestProbeUsesTheGPUsExecutor(t *testing.T) {
	d := fakenvml.NewDev()
	h := openFake(t, &fakenvml.Lib{Devs: []*fakenvml.Dev{d}})
	entered := make(chan string, 1)
	release := d.Block("GetPowerManagementLimit", entered)
	done := make(chan struct{})
	go func() {
		defer close(done)
		Probe(h, ProbeOptions{Calls: 1, Deadline: 5 * time.Second, Interval: 100 * time.Millisecond, SlowEvery: 10})
	}()
	<-entered
	fn, _, ok := h.GPUs[0].InFlight()
	release()
	<-done
	if !ok || fn != fnOf("nvmlDeviceGetPowerManagementLimit") {
		t.Errorf("GPU's call in flight during the probe's power limit call: %v %v, want %v", fn, ok, fnOf("nvmlDeviceGetPowerManagementLimit"))
	}
}

// TestProbeWithoutExecutor: a GPU whose executor cannot start has each
// sample kind reported with why, but its process reader's calls (which do
// not go through the executor) are still timed.
func TestProbeWithoutExecutor(t *testing.T) {
	fail := func(*native, int, time.Duration) (*nativeExec, error) {
		return nil, errors.New("no NVML handle for the GPU")
	}
	h, err := Open(&fakenvml.Lib{InitRet: nvml.SUCCESS, Devs: []*fakenvml.Dev{fakenvml.NewDev()}}, OpenOptions{Config: testConfig, Timeout: 5 * time.Second, startNative: fail, Counters: counters.New()})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	rep := Probe(h, ProbeOptions{Calls: 5, Deadline: time.Second, Interval: 100 * time.Millisecond, SlowEvery: 10})
	if len(rep.GPUs) != 1 {
		t.Fatalf("%d GPUs, want 1", len(rep.GPUs))
	}
	for k, pc := range probeCalls(h.GPUs) {
		st := rep.Kinds[k].Alone[0]
		if pc.c == cProcs {
			if st.Err != "" || st.N != 5 {
				t.Errorf("%s: %d timed, error %q; want 5, none (no executor needed)", rep.Kinds[k].Name, st.N, st.Err)
			}
			continue
		}
		if !strings.Contains(st.Err, "cannot start the GPU's executor") || st.N != 0 {
			t.Errorf("%s: %d timed, error %q; want none, with why", rep.Kinds[k].Name, st.N, st.Err)
		}
	}
}

// TestProbeOnAnR550Driver: on a driver without the fabric's v4 call whose
// versioned call refuses the v3 struct, the probe times the fabric call
// the samples make there, counted once per slow sample: the versioned
// call with the v2 struct on an R550, the original call where the
// versioned one refuses every struct. (It timed the versioned call with
// the v3 struct, which only ever answered "version mismatch", and counted
// it as the sample's call.)
func TestProbeOnAnR550Driver(t *testing.T) {
	for _, tc := range []struct {
		name   string
		v2Only bool // else every struct refused
		want   string
	}{
		{"R550: v2", true, "nvmlDeviceGetGpuFabricInfoV/v2"},
		{"no struct known", false, "nvmlDeviceGetGpuFabricInfo"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := fakenvml.NewDev()
			d.Fabric = &nvml.GpuFabricInfo_v4{State: 3}
			if d.FabricV2Only = tc.v2Only; !tc.v2Only {
				d.Set("GetGpuFabricInfoV", nvml.ERROR_ARGUMENT_VERSION_MISMATCH)
			}
			h := openFake(t, &fakenvml.Lib{Devs: []*fakenvml.Dev{d}, Missing: map[string]bool{"nvmlDeviceGetGpuFabricInfo_v4": true}})
			rep := Probe(h, ProbeOptions{Calls: 5, Deadline: time.Second, Interval: 100 * time.Millisecond, SlowEvery: 10})
			var fabric []ProbeKind
			for _, k := range rep.Kinds {
				if strings.HasPrefix(k.Name, "nvmlDeviceGetGpuFabricInfo") {
					fabric = append(fabric, k)
				}
			}
			if len(fabric) != 1 || fabric[0].Name != tc.want {
				t.Fatalf("the probe times %+v, want only %s", fabric, tc.want)
			}
			if k := fabric[0]; k.Alone[0].N != 5 || k.Alone[0].Err != "" || k.PerSample < 0.099 || k.PerSample > 0.101 {
				t.Errorf("%s: %d timed (%q), %.3f per sample; want 5, answered, 0.1 (the slow tier)", k.Name, k.Alone[0].N, k.Alone[0].Err, k.PerSample)
			}
		})
	}
}

// TestProbeNewerCallNotSupported: a GPU that answers "not supported" to a
// reading's newer call has its samples make the older one in its place
// (batch.c, until the re-probe): the probe times that one, and counts it
// per sample, not the refused newer call; a GPU that refuses each of them
// (no fabric) makes them at the re-probes only: none per sample. It timed
// the newer call, which only ever answered "not supported", and counted
// it in every sample.
func TestProbeNewerCallNotSupported(t *testing.T) {
	for _, tc := range []struct {
		name          string
		prefix        string // the reading's calls' names begin so
		set           func(d *fakenvml.Dev)
		want, wantErr string  // the call timed, and its error
		perSample     float64 // its calls per sample
	}{
		{"clocks event reasons refused", "nvmlDeviceGetCurrentClocks",
			func(d *fakenvml.Dev) { d.Set("GetCurrentClocksEventReasons", nvml.ERROR_NOT_SUPPORTED) },
			"nvmlDeviceGetCurrentClocksThrottleReasons", "", 1},
		{"no fabric", "nvmlDeviceGetGpuFabricInfo", func(d *fakenvml.Dev) { d.Fabric = nil },
			"nvmlDeviceGetGpuFabricInfo_v4", "ERROR_NOT_SUPPORTED", 0}, // each refused: the re-probes make v4 first
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := fakenvml.NewDev()
			tc.set(d)
			h := openFake(t, &fakenvml.Lib{Devs: []*fakenvml.Dev{d}})
			rep := Probe(h, ProbeOptions{Calls: 5, Deadline: time.Second, Interval: 100 * time.Millisecond, SlowEvery: 10})
			var got []ProbeKind
			for _, k := range rep.Kinds {
				if strings.HasPrefix(k.Name, tc.prefix) {
					got = append(got, k)
				}
			}
			if len(got) != 1 || got[0].Name != tc.want {
				t.Fatalf("the probe times %+v, want only %s", got, tc.want)
			}
			k := got[0]
			if k.Alone[0].Err != tc.wantErr || tc.wantErr == "" && k.Alone[0].N != 5 {
				t.Errorf("%s: %d timed (%q), want 5 answered or %q", k.Name, k.Alone[0].N, k.Alone[0].Err, tc.wantErr)
			}
			if k.PerSample != tc.perSample {
				t.Errorf("%s: %.3f per sample, want %v", k.Name, k.PerSample, tc.perSample)
			}
		})
	}
}
