package sampler

import (
	"sync/atomic"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

// The row remapper histogram (nvmlDeviceGetRowRemapperHistogram: the memory
// banks by spare rows left) changes only when a row is remapped, so it is
// not read every second: once at start and again whenever the remap counts
// (correctable, uncorrectable, pending, failure) differ from those of the
// last read. It is read only where the remap counters are present, which
// needs ECC on (judgeSupport): a GeForce board answering SUCCESS for
// remapping it does not have is not asked. The call is made on the GPU's
// worker inside the sample, marked in flight like every call, so a stuck
// one is reported hung and blocks nobody else; the symbol is looked up first
// (Symbols), so a driver without it is never called.

// remapHist is the histogram as last read and what decides the next read
// (worker only, except last).
type remapHist struct {
	key   [4]reading.Opt[uint64] // the remap counts at the last attempt
	due   bool                   // a read is wanted: never read, or the counts changed since
	retry int64                  // mono() before which a failed read is not retried
	last  atomic.Pointer[reading.RemapHistogram]
}

// remapHistRetry is how long after a failed read (not a refusal, which
// waits Reprobe) the histogram is asked again while it is due.
const remapHistRetry = 10 * time.Second

// RemapHistogram returns the row remapper histogram as last read, shared
// and immutable (never modify it); nil when never read (not supported, no
// remapping, or not yet). Safe from any goroutine; makes no NVML call.
func (g *GPU) RemapHistogram() *reading.RemapHistogram { return g.hlt.hist.last.Load() }

// resetRemapHist forgets the histogram and its capability cache (a new
// handle: the driver may have been reloaded, with other support).
func (g *GPU) resetRemapHist() {
	r := &g.hlt.hist
	r.key, r.due, r.retry = [4]reading.Opt[uint64]{}, false, 0
	r.last.Store(nil)
	g.off[FnRemapHistogram][0] = 0
}

// readRemapHist reads the histogram when due, given the health counters
// vals of this slow sample s.
func (g *GPU) readRemapHist(s *reading.Sample, vals *[reading.NumReadings]reading.Opt[uint64]) {
	r := &g.hlt.hist
	key := [4]reading.Opt[uint64]{vals[reading.HRemapCorrectable], vals[reading.HRemapUncorrectable],
		vals[reading.HRemapPending], vals[reading.HRemapFailure]}
	if key != r.key {
		r.key, r.due, r.retry = key, true, 0
	}
	if key == ([4]reading.Opt[uint64]{}) || !r.due || g.mono() < r.retry || !g.can(FnRemapHistogram, 0) {
		return
	}
	g.begin(FnRemapHistogram)
	v, ret := g.dev.GetRowRemapperHistogram()
	if !g.end(FnRemapHistogram, 0, ret) {
		// A refusal waits Reprobe (g.can); anything else is retried later.
		r.retry = g.mono() + int64(remapHistRetry)
		return
	}
	r.due = false
	r.last.Store(&reading.RemapHistogram{At: s.Time, Max: v.Max, High: v.High, Partial: v.Partial, Low: v.Low, None: v.None})
}
