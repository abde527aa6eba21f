package sampler

import (
	"sync/atomic"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// fieldSem serializes GetFieldValues across GPUs for the Go executor: NVML
// has been seen to misbehave when it is called concurrently. It is a channel
// rather than a mutex so that a waiter can give up (a GSP fault can keep the
// holder inside the driver for 45 s). The C executor has its own (batch.c).
var fieldSem = make(chan struct{}, 1)

// goExec makes the calls through a Device (go-nvml, or a fake in tests).
type goExec struct {
	cur   atomic.Int32
	dev   Device
	wait  time.Duration // FieldWait
	timer *time.Timer   // reused: Reset on a stopped timer does not allocate
}

func newGoExec(dev Device, wait time.Duration) *goExec {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return &goExec{dev: dev, wait: wait, timer: t}
}

func (x *goExec) lockFields() bool {
	select {
	case fieldSem <- struct{}{}:
		return true
	default:
	}
	x.timer.Reset(x.wait)
	defer x.timer.Stop()
	select {
	case fieldSem <- struct{}{}:
		return true
	case <-x.timer.C:
		return false
	}
}

func (x *goExec) current() int32 { return x.cur.Load() }

func (x *goExec) fields(fv []nvml.FieldValue) (nvml.Return, bool) {
	if !x.lockFields() {
		return 0, false
	}
	defer func() { <-fieldSem }()
	return x.dev.GetFieldValues(fv), true
}

func (x *goExec) run(r *raw) {
	cur := &x.cur
	defer cur.Store(0)
	d := x.dev
	if r.plan&(1<<cFields) != 0 {
		if x.lockFields() {
			cur.Store(int32(cFields) + 1)
			r.ret[cFields] = int32(callFn[cFields].run(d, r, cFields))
			<-fieldSem
		} else {
			r.ret[cFields] = retLockTimeout
		}
		if r.ret[cFields] != int32(nvml.SUCCESS) {
			r.plan |= r.fallback
		} else {
			for i := 0; i < r.nfields; i++ {
				if r.fields[i].NvmlReturn != uint32(nvml.SUCCESS) {
					r.plan |= r.fieldFallback[i]
				}
			}
		}
		if r.ret[cFields] == int32(nvml.ERROR_GPU_IS_LOST) {
			return
		}
	}
	for c := cFields + 1; c < numCalls; c++ {
		if r.plan&(1<<c) == 0 {
			continue
		}
		cur.Store(int32(c) + 1)
		ret := callFn[c].run(d, r, c)
		r.ret[c] = int32(ret)
		if ret == nvml.ERROR_GPU_IS_LOST {
			return
		}
	}
}
