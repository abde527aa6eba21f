package sampler

import (
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpu-telemetry/gpu-telemetry/reading"
	"github.com/gpu-telemetry/gpu-telemetry/sampler/fakenvml"
)

// The histogram is read with the first health reading and again only when
// the remap counts change, not every second.
func TestRemapHistogramReadOnChange(t *testing.T) {
	d := healthDev()
	d.Fields[nvml.FI_DEV_REMAPPED_COR], d.Fields[nvml.FI_DEV_REMAPPED_UNC], d.Fields[nvml.FI_DEV_REMAPPED_FAILURE] = 0, 0, 0
	d.Hist = &nvml.RowRemapperHistogramValues{Max: 64}
	h := openFakeConfig(t, &fakenvml.Lib{Devs: []*fakenvml.Dev{d}}, Config{Reprobe: time.Hour, SlowEvery: 1, FieldWait: time.Millisecond})
	g := h.GPUs[0]
	var s reading.Sample
	if g.RemapHistogram() != nil {
		t.Fatal("a histogram before any read")
	}
	g.Sample(&s)
	first := s.Time
	for range 4 {
		g.Sample(&s)
	}
	if n := d.Count("GetRowRemapperHistogram"); n != 1 {
		t.Errorf("calls in 5 samples with steady remap counts: %d, want 1", n)
	}
	hist := g.RemapHistogram()
	if hist == nil || hist.Max != 64 || !hist.At.Equal(first) {
		t.Fatalf("histogram %+v, want max 64 read by the first sample (%v)", hist, first)
	}
	// A row is remapped: the counts change, the histogram is read again.
	d.Update(func(d *fakenvml.Dev) {
		d.Fields[nvml.FI_DEV_REMAPPED_UNC] = 1
		d.Hist = &nvml.RowRemapperHistogramValues{Max: 63, High: 1}
	})
	g.Sample(&s)
	reread := s.Time
	g.Sample(&s)
	if n := d.Count("GetRowRemapperHistogram"); n != 2 {
		t.Errorf("calls after a remap: %d, want 2", n)
	}
	if hist := g.RemapHistogram(); hist == nil || hist.String() != "max:63,high:1,partial:0,low:0,none:0" || !hist.At.Equal(reread) {
		t.Errorf("after a remap: %v at %v, want max:63,high:1,... at %v", hist, hist.At, reread)
	}
}

// Refused (not supported): absent, not asked again before Reprobe, asked
// again after a new handle. A driver without the symbol is never called.
func TestRemapHistogramRefusedAndMissing(t *testing.T) {
	d := healthDev() // Hist nil: NOT_SUPPORTED
	d.Fields[nvml.FI_DEV_REMAPPED_COR] = 0
	h := openFakeConfig(t, &fakenvml.Lib{Devs: []*fakenvml.Dev{d}}, Config{Reprobe: time.Hour, SlowEvery: 1, FieldWait: time.Millisecond})
	g := h.GPUs[0]
	var s reading.Sample
	g.Sample(&s)
	d.Update(func(d *fakenvml.Dev) { d.Fields[nvml.FI_DEV_REMAPPED_COR] = 2 }) // due again, but refused
	g.Sample(&s)
	g.Sample(&s)
	if n := d.Count("GetRowRemapperHistogram"); n != 1 {
		t.Errorf("refused histogram asked %d times, want 1", n)
	}
	if g.RemapHistogram() != nil {
		t.Errorf("a refused histogram is present")
	}
	d.Update(func(d *fakenvml.Dev) { d.Hist = &nvml.RowRemapperHistogramValues{Max: 60} })
	g.resetHealth() // a new handle
	g.Sample(&s)
	if hist := g.RemapHistogram(); hist == nil || hist.Max != 60 {
		t.Errorf("after a new handle: %+v", hist)
	}

	d2 := healthDev()
	d2.Hist = &nvml.RowRemapperHistogramValues{Max: 64}
	h2 := openFakeConfig(t, &fakenvml.Lib{Devs: []*fakenvml.Dev{d2}, Missing: map[string]bool{"nvmlDeviceGetRowRemapperHistogram": true}},
		Config{Reprobe: time.Hour, SlowEvery: 1, FieldWait: time.Millisecond})
	h2.GPUs[0].Sample(&s)
	if n := d2.Count("GetRowRemapperHistogram"); n != 0 {
		t.Errorf("a driver without the symbol was called %d times", n)
	}
}

// Without ECC (a GeForce answering SUCCESS for remapping it has not) the
// histogram is not asked.
func TestRemapHistogramNeedsRemapCounters(t *testing.T) {
	d := fakenvml.NewDev()
	d.Fields = map[uint32]uint64{nvml.FI_DEV_REMAPPED_PENDING: 0, nvml.FI_DEV_REMAPPED_FAILURE: 0}
	d.Hist = &nvml.RowRemapperHistogramValues{}
	sampled(t, d, 1)
	if n := d.Count("GetRowRemapperHistogram"); n != 0 {
		t.Errorf("histogram asked without ECC: %d calls", n)
	}
}

// A stuck histogram call is the GPU's call in flight (reported hung).
func TestRemapHistogramInFlight(t *testing.T) {
	d := healthDev()
	d.Hist = &nvml.RowRemapperHistogramValues{Max: 64}
	h := openFakeConfig(t, &fakenvml.Lib{Devs: []*fakenvml.Dev{d}}, Config{Reprobe: time.Hour, SlowEvery: 1, FieldWait: time.Millisecond})
	g := h.GPUs[0]
	entered := make(chan string, 1)
	release := d.Block("GetRowRemapperHistogram", entered)
	done := make(chan struct{})
	go func() {
		var s reading.Sample
		g.Sample(&s)
		close(done)
	}()
	<-entered
	if fn, _, ok := g.InFlight(); !ok || fn != FnRemapHistogram {
		t.Errorf("in flight %v %v, want %v", fn, ok, FnRemapHistogram)
	}
	release()
	<-done
}
