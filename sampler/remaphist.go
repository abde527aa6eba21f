package sampler

import (
	"sync/atomic"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

// The row remapper histogram (the memory banks by spare rows left) changes
// only when a row is remapped: it is read at start and again whenever the
// remap counts differ from those of the last read, and only where they are
// present (ECC on: judgeSupport), inside the sample like every call.

// remapHist is the histogram as last read and what decides the next read
// (worker only, except last).
type remapHist struct {
	key   [4]reading.Opt[uint64] // the remap counts at the last attempt
	due   bool                   // a read is wanted: never read, or the counts changed since
	retry int64                  // mono() before which a failed read is not retried
	last  atomic.Pointer[reading.RemapHistogram]
}

// remapHistRetry is how long after a failed read (a refusal waits Reprobe)
// the histogram is asked again while it is due.
const remapHistRetry = 10 * time.Second

// RemapHistogram returns the row remapper histogram as last read (shared:
// never modify it); nil when never read. Safe from any goroutine.
func (g *GPU) RemapHistogram() *reading.RemapHistogram { return g.hlt.hist.last.Load() }

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
	v, ok := ask(g, FnRemapHistogram, 0, g.dev.GetRowRemapperHistogram)
	if !ok {
		r.retry = g.mono() + int64(remapHistRetry)
		return
	}
	r.due = false
	r.last.Store(&reading.RemapHistogram{At: s.Time, Max: v.Max, High: v.High, Partial: v.Partial, Low: v.Low, None: v.None})
}
