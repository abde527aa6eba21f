package sampler

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpu-telemetry/gpu-telemetry/internal/testutil"
	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

// equivOthers: constant, noise-free values, distinct per GPU and per
// column, so that a value read into the wrong place on either path shows.
// GPU 1 has refused functions and fields, GPU 2 is lost at 1.5 s, GPU 3's
// batched call fails (every fallback runs), and GPU 4's GetFieldValues hangs
// until 4 s while holding the field lock (the others then time out on it).
const equivOthers = `gpu 0 energy_start 123456

gpu 1 temp 52
gpu 1 sensor_temp 53
gpu 1 fans 1
gpu 1 fail nvmlDeviceGetClockInfo not_supported
gpu 1 fail nvmlDeviceGetEncoderUtilization unknown
gpu 1 fail nvmlDeviceGetTargetFanSpeed no_permission
gpu 1 fail field 190 not_supported
gpu 1 fail field 82 no_permission
gpu 1 fail field 186 unknown

gpu 2 temp 47
at 1.5 gpu 2 lost

gpu 3 temp 58
gpu 3 sensors 0
gpu 3 fail nvmlDeviceGetFieldValues unknown

at 0 gpu 4 hang 4s fn nvmlDeviceGetFieldValues
`

// equivLost and equivHangEnd are the scenario's times.
const (
	equivLost    = 1500 * time.Millisecond
	equivHangEnd = 4 * time.Second
)

// equivLibEnv names the library a child process of TestCAndGoPathsAgree
// compares the paths on: a process loads one libnvidia-ml.so.1 only.
const equivLibEnv = "GPU_TELEMETRY_EQUIV_LIB"

// twin is a GPU sampled through the C path (batch.c, as in production) and
// through the Go path (go-nvml calls, as the unit tests' fakes are) on the
// same simulated device.
type twin struct {
	c, g *GPU
	took *time.Duration // from the start of the C sample to the end of the Go one
}

func (tw twin) sample(t *testing.T) (c, g reading.Sample) {
	t.Helper()
	start := time.Now()
	tw.c.Sample(&c)
	tw.g.Sample(&g)
	*tw.took = time.Since(start)
	return c, g
}

// same requires identical samples and identical call results. Time and the
// kernel clock differ by construction; the energy counter integrates power
// between the two reads, so it may grow by what the power allows (at most
// 400 W here, 400 mJ per ms).
func (tw twin) same(t *testing.T, what string, c, g reading.Sample) {
	t.Helper()
	grow := uint64(tw.took.Milliseconds()+1) * 400
	if c.EnergyMJ.OK && g.EnergyMJ.OK && g.EnergyMJ.V >= c.EnergyMJ.V && g.EnergyMJ.V-c.EnergyMJ.V <= grow {
		g.EnergyMJ = c.EnergyMJ
	}
	c.Time, g.Time, c.KernelTime, g.KernelTime = time.Time{}, time.Time{}, 0, 0
	if !reflect.DeepEqual(c, g) {
		t.Errorf("%s: GPU %d: C and Go samples differ:\nC  %+v\nGo %+v", what, c.GPU, c, g)
	}
	if tw.c.raw.plan != tw.g.raw.plan || tw.c.raw.ret != tw.g.raw.ret {
		t.Errorf("%s: GPU %d: calls differ:\nC  plan %x ret %v\nGo plan %x ret %v", what, c.GPU,
			tw.c.raw.plan, tw.c.raw.ret, tw.g.raw.plan, tw.g.raw.ret)
	}
}

// TestCAndGoPathsAgree runs sampler/batch.c (production's path) and the Go
// executor (the unit tests' path) on the same simulated GPUs, with refused and
// failing calls and fields, a failed batch, a lost GPU and a field-lock
// timeout, and requires identical samples: once on the current driver and
// once on the old-driver build (older fallbacks: memory v1, throttle reasons,
// one fan), each in a process of its own.
func TestCAndGoPathsAgree(t *testing.T) {
	if lib := os.Getenv(equivLibEnv); lib != "" {
		compareCAndGo(t, lib, filepath.Base(filepath.Dir(lib)) == "sim-old")
		return
	}
	dir := testutil.SimNVMLFor(t)
	for _, build := range []struct {
		name string
		old  bool
	}{{"sim", false}, {"sim-old", true}} {
		t.Run(build.name, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestCAndGoPathsAgree$", "-test.count=1")
			cmd.Env = append(os.Environ(), equivLibEnv+"="+testutil.SimLib(dir, build.old))
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Errorf("%s: %v\n%s", build.name, err, out)
			}
		})
	}
}

// equivScenario is five GPUs: GPU 0 is every-column.scn's GPU (a distinct
// value for every column), the others equivOthers.
func equivScenario(t *testing.T) string {
	t.Helper()
	one, err := os.ReadFile(filepath.Join("..", "test", "simnvml", "scenarios", "every-column.scn"))
	if err != nil {
		t.Fatal(err)
	}
	_, gpu0, ok := strings.Cut(string(one), "\ngpus 1\n")
	if !ok {
		t.Fatal("every-column.scn lacks its gpus 1 line")
	}
	return "gpus 5\ngpu all fans 2\n" + gpu0 + equivOthers
}

func compareCAndGo(t *testing.T, lib string, old bool) {
	scn := filepath.Join(t.TempDir(), "equiv.scn")
	if err := os.WriteFile(scn, []byte(equivScenario(t)), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("SIMNVML_SCENARIO", scn)
	cfg := Config{Reprobe: time.Hour, SlowEvery: 1, FieldWait: 5 * time.Millisecond}
	opened := time.Now() // the scenario's clock starts at nvmlInit, just after
	h, err := Open(&NVML{Lib: nvml.New(nvml.WithLibraryPath(lib))}, OpenOptions{Config: cfg, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatalf("Open on the simulated driver: %v", err)
	}
	defer func() {
		if !h.Close(5 * time.Second) {
			t.Errorf("nvmlShutdown did not return")
		}
	}()
	if len(h.GPUs) != 5 {
		t.Fatalf("%d GPUs, want 5", len(h.GPUs))
	}
	twins := make([]twin, len(h.GPUs))
	for i, g := range h.GPUs {
		if _, native := g.exec.(*nativeExec); !native {
			t.Fatalf("GPU %d does not use the C path (%T)", i, g.exec)
		}
		twins[i] = twin{c: g, g: NewGPU(g.Info(), g.Device(), &h.Syms, cfg, h.kclock, nil), took: new(time.Duration)}
	}

	// Several rounds: the first finds the refusals, the later ones run with
	// the capability cache and the fields switched off.
	for round := range 3 {
		for i := range 4 {
			c, g := twins[i].sample(t)
			twins[i].same(t, fmt.Sprintf("round %d", round+1), c, g)
		}
	}
	// Spot checks that the paths did what the scenario asks (equal but wrong
	// would pass the comparison).
	c, _ := twins[0].sample(t)
	if c.TempC.V != 61 || c.MemTempC.V != 71 || c.EnforcedLimitMW.V != 433_000 || c.Fans[0].Speed.V != 31 {
		t.Errorf("GPU 0 read wrong values: %+v", c)
	}
	if v, _ := c.Sensor0.Get(); old == c.Sensor0.OK || (!old && v.Temp != 62) || old == c.Fans[1].Speed.OK {
		t.Errorf("GPU 0 (old driver %v): sensor 0 %+v, fan 1 %+v", old, c.Sensor0, c.Fans[1])
	}
	// The health getters (struct versions and offsets on the C path): the
	// old driver lacks them (looked up first: absent, the process lives).
	want := map[reading.HealthID]uint64{reading.HSRAMCorrectable: 121, reading.HSRAMUncSecDed: 122, reading.HSRAMUncParity: 0,
		reading.HSRAMThreshold: 0, reading.HChannelRepairPending: 1, reading.HTPCRepairPending: 0, reading.HMemoryUnrepairable: 1}
	for id, w := range want {
		if v, ok := c.Health[id].Get(); ok == old || (!old && v != w) {
			t.Errorf("GPU 0 (old driver %v): %s = %+v, want %d", old, reading.Health[id].Name, c.Health[id], w)
		}
	}
	c, _ = twins[1].sample(t)
	if !c.PowerMW.OK || !c.EnforcedLimitMW.OK || c.MemTempC.OK || c.GraphicsMHz.OK || c.Fans[0].Target.OK || c.EncUtil.OK {
		t.Errorf("GPU 1 refusals not applied: %+v", c)
	}
	c, _ = twins[3].sample(t)
	if !c.PowerMW.OK || !c.EnforcedLimitMW.OK || !c.EnergyMJ.OK || !c.PCIeReplay.OK || c.MemTempC.OK || c.Sensor0.OK {
		t.Errorf("GPU 3 fallbacks not used: %+v", c)
	}

	// GPU 2 is lost.
	time.Sleep(time.Until(opened.Add(equivLost + 200*time.Millisecond)))
	c, g := twins[2].sample(t)
	twins[2].same(t, "lost", c, g)
	if c.Status != reading.StatusLost {
		t.Errorf("GPU 2 not lost: %+v", c)
	}

	// GPU 4 holds the field lock inside a hung GetFieldValues on both paths;
	// GPU 0 times out on it and reads its fallbacks.
	held := make(chan struct{}, 2)
	for _, gpu := range []*GPU{twins[4].c, twins[4].g} {
		go func() {
			var s reading.Sample
			gpu.Sample(&s)
			held <- struct{}{}
		}()
		for {
			if fn, _, ok := gpu.InFlight(); ok && fn == FnFieldValues {
				break
			}
			time.Sleep(time.Millisecond)
		}
	}
	if time.Since(opened) > equivHangEnd-time.Second {
		t.Fatalf("too slow: the hang ends before the lock-timeout comparison")
	}
	c, g = twins[0].sample(t)
	twins[0].same(t, "field lock held", c, g)
	if twins[0].c.raw.ret[cFields] != retLockTimeout || !c.PowerMW.OK {
		t.Errorf("GPU 0 did not time out on the field lock and fall back: ret %d, %+v", twins[0].c.raw.ret[cFields], c)
	}
	<-held
	<-held
}
