package sampler

import (
	"log/slog"
	"math"
	"sync/atomic"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// capCache is the bookkeeping of one goroutine's NVML calls (a GPU's
// sampler, its process reader): the call in flight, and the capability
// cache, whose entries are the time, in ns since base, until which a call
// the driver refused (not supported, no permission, function not found)
// stays off; 0: on. Each function's first refusal is logged, the rest only
// re-probed.
type capCache struct {
	base time.Time    // origin of the monotonic nanoseconds
	log  *slog.Logger // the GPU's
	what string       // what a refusal leaves unavailable, for the log
	cur  atomic.Int32 // the Fn in flight, FnNone: none; read from any goroutine
	told [maxFns]bool
}

// offForGood is the cache entry of a call refused for its struct version.
const offForGood = math.MaxInt64

func (c *capCache) mono() int64 { return int64(time.Since(c.base)) }

// on reports whether a call whose cache entry is off may be made now.
func (c *capCache) on(off int64) bool { return off == 0 || c.mono() >= off }

// begin marks fn as in flight (FnNone: none).
func (c *capCache) begin(fn Fn) { c.cur.Store(int32(fn)) }

// note classifies ret of fn and sets its cache entry *off: on after a
// success, off for reprobe after a refusal (for good after a struct
// version the driver does not know). fn's first refusal is logged,
// with args; an entry of a field call (FnNone) never is: its reading is
// absent.
func (c *capCache) note(fn Fn, off *int64, ret nvml.Return, reprobe time.Duration, args ...any) Class {
	cl := Classify(ret)
	if cl == ClassOK {
		*off = 0
	}
	if !cl.capability() {
		return cl
	}
	*off = c.mono() + int64(reprobe)
	msg, attrs := " not available; will re-probe", []any{"reason", cl.String(), "reprobe", reprobe}
	if cl == ClassVersionMismatch {
		// The driver does not know the struct version asked for: that
		// changes only with the driver, which a running logger does not
		// reload. Re-probing would leave the reading absent each time
		// where an older call answers it (Def.Older).
		*off = offForGood
		msg, attrs = " not available from this driver; not asked again", attrs[:2]
	}
	if fn != FnNone && !c.told[fn] {
		c.told[fn] = true
		c.log.Info(c.what+msg, append(append([]any{"function", fn.String()}, args...), attrs...)...)
	}
	return cl
}
