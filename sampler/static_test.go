package sampler

import (
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/gpu-telemetry/gpu-telemetry/reading"
	"github.com/gpu-telemetry/gpu-telemetry/sampler/fakenvml"
)

// TestStaticReadingsReadOnce: a static reading (reading.Static) is read by
// the first sample that reads the slow tier and carried in every later
// one; a function the driver lacks leaves it absent, never 0.
func TestStaticReadingsReadOnce(t *testing.T) {
	d := fakenvml.NewDev()
	d.Getters[fakenvml.Getter{Fn: "GetMaxClockInfo", Arg: 0}] = uint32(1980)
	d.Getters[fakenvml.Getter{Fn: "GetMaxClockInfo", Arg: 2}] = uint32(2619)
	d.Getters[fakenvml.Getter{Fn: "GetTemperatureThreshold", Arg: 1}] = uint32(87)
	lib := &fakenvml.Lib{Devs: []*fakenvml.Dev{d}, Missing: map[string]bool{"nvmlDeviceGetGpuMaxPcieLinkGeneration": true}}
	h := openFakeConfig(t, lib, Config{Reprobe: testConfig.Reprobe, SlowEvery: 1, FieldWait: testConfig.FieldWait})
	before := d.Count("GetMaxClockInfo")
	for i := range 20 {
		var s reading.Sample
		h.GPUs[0].Sample(&s)
		for _, c := range []struct {
			id   reading.ID
			want uint64
		}{{reading.MaxGraphicsMHz, 1980}, {reading.MaxMemMHz, 2619}, {reading.SlowdownTempC, 87}} {
			if v, ok := s.Values[c.id].Get(); !ok || v != c.want {
				t.Fatalf("sample %d: %s = %d (given %v), want %d", i, reading.Table[c.id].Name, v, ok, c.want)
			}
		}
		if v, ok := s.Values[reading.PCIeGPUMaxGen].Get(); ok {
			t.Fatalf("sample %d: the driver lacks the GPU's maximum link generation, yet it reads %d", i, v)
		}
	}
	// Three clocks, once each, though every sample read the slow tier.
	if n := d.Count("GetMaxClockInfo") - before; n != 3 {
		t.Errorf("GetMaxClockInfo called %d times in 20 samples, want 3", n)
	}
	// A reading the driver refuses stays absent (the SM clock's maximum
	// answers zeros: present; the shutdown threshold refused: absent).
	d2 := fakenvml.NewDev()
	d2.GetterRet = map[fakenvml.Getter]nvml.Return{{Fn: "GetTemperatureThreshold", Arg: 0}: nvml.ERROR_NOT_SUPPORTED}
	s := sampled(t, d2, 3)
	if v, ok := s.Values[reading.ShutdownTempC].Get(); ok {
		t.Errorf("a refused threshold reads %d", v)
	}
}
