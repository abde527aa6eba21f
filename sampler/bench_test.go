package sampler

import (
	"testing"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/internal/counters"
	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

// BenchmarkSampleSimulatedGPU reads one GPU through go-nvml and the
// simulated libnvidia-ml.so.1 (cgo included). make bench puts the library on
// LD_LIBRARY_PATH; without it the benchmark is skipped.
func BenchmarkSampleSimulatedGPU(b *testing.B) {
	h, err := Open(NewNVML(), OpenOptions{Config: DefaultConfig(100 * time.Millisecond), Counters: counters.New()})
	if err != nil {
		b.Skipf("no simulated driver on LD_LIBRARY_PATH: %v", err)
	}
	defer h.Close(time.Second)
	g := h.GPUs[0]
	var s reading.Sample
	g.Sample(&s)
	b.ReportAllocs()
	for b.Loop() {
		g.Sample(&s)
	}
}

// BenchmarkSampleFake is the sampler's own cost over a fake device: batch.c
// and about 15 calls from C back into the fake's Go functions a sample (since
// the C batch became the one executor; before, the Go executor with no cgo:
// its older figures are not comparable).
func BenchmarkSampleFake(b *testing.B) {
	lib := newFakeLibForBench()
	h, err := Open(lib, OpenOptions{Config: DefaultConfig(100 * time.Millisecond), Counters: counters.New()})
	if err != nil {
		b.Fatal(err)
	}
	g := h.GPUs[0]
	var s reading.Sample
	b.ReportAllocs()
	for b.Loop() {
		g.Sample(&s)
	}
}
