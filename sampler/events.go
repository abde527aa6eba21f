package sampler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

// WatchedEvents are the NVML event types registered on every GPU that
// supports them: P-state changes, Xid critical errors, clock changes and GPU
// recovery actions.
const WatchedEvents = uint64(nvml.EventTypePState | nvml.EventTypeXidCriticalError |
	nvml.EventTypeClock | nvml.EventTypeGpuRecoveryAction)

// ErrEventsClosed is returned by EventStream.Next once the stream has ended:
// nothing of it is inside an NVML call any more.
var ErrEventsClosed = errors.New("event stream closed")

// errNoEventSets: the driver lacks event sets (permanent).
var errNoEventSets = errors.New("the driver lacks NVML event sets")

// errNoneRegistered: no GPU offered to the set could be registered.
var errNoneRegistered = errors.New("no GPU supports the watched NVML events")

// EventStream delivers the NVML events of one event set.
type EventStream interface {
	// Next blocks until an event arrives. A failed wait is returned as an
	// error; the stream then ends by itself. Next returns ErrEventsClosed
	// once the stream has ended (after Close, or after a failure) and its
	// event set is freed: the caller knows, without any timeout, that no
	// NVML event call of this stream is still running. A stream stuck
	// inside NVML never ends, and Next blocks.
	Next() (reading.Event, error)
	// Close asks the stream to end; Next then returns ErrEventsClosed within
	// about a second, unless NVML holds the stream's wait. Safe from any
	// goroutine, more than once.
	Close()
	// Masks returns the event types registered per GPU, in Host.GPUs order.
	Masks() []uint64
}

// Event-stream timing.
const (
	// lateGPUPoll: how often GPUs not yet registered (stuck or failing at
	// start) are checked while some are missing. Nothing wakes the process
	// for it once every GPU is registered.
	lateGPUPoll = 2 * time.Second
	// eventRetryMin and eventRetryMax bound the back-off between reopening
	// a failed event set; a stream that ran eventRetryReset resets it.
	eventRetryMin   = time.Second
	eventRetryMax   = time.Minute
	eventRetryReset = time.Minute
)

// FollowEvents calls on for every NVML event of the host's GPUs until ctx is
// done. Each GPU is registered as soon as it answers (its static facts read
// and a handle had), whatever the other GPUs do: a GPU stuck at start joins
// the event set when it comes back, and while no GPU has answered yet no set
// is opened. A set that fails is opened again with back-off, each time only
// after the previous one has ended (no timing margin: the stream says when it
// has). FollowEvents returns early, for good, only when the driver lacks
// event sets or every GPU has answered and none supports the watched types.
// on runs on FollowEvents' goroutine; state, if not nil, is told what the
// events are doing ("waiting for a GPU to answer", "watching", "reopening
// after: ...", "unavailable: ...").
func (h *Host) FollowEvents(ctx context.Context, log *slog.Logger, on func(reading.Event), state func(string)) {
	if state == nil {
		state = func(string) {}
	}
	retry := eventRetryMin
	logged := make([]uint64, len(h.GPUs))
	for ctx.Err() == nil {
		ready := h.readyGPUs()
		if !anyTrue(ready) {
			// Every GPU is still stuck at start: wait for one to answer.
			state("waiting for a GPU to answer")
			if !h.waitReady(ctx, ready, nil) {
				return
			}
			continue
		}
		st, err := h.watch(log, ready)
		switch {
		case errors.Is(err, errNoEventSets), errors.Is(err, errNoneRegistered) && allTrue(ready):
			log.Warn("NVML events unavailable; Xids come from the kernel log only", "error", err)
			state("unavailable: " + err.Error())
			return
		case errors.Is(err, errNoneRegistered):
			// The GPUs that answered support nothing; a late one may.
			state("waiting for a GPU that supports them")
			if !h.waitReady(ctx, ready, nil) {
				return
			}
			continue
		case err != nil:
			log.Warn("cannot open NVML events; trying again", "error", err, "retry_in", retry)
			state("reopening after: " + err.Error())
			if !sleepCtx(ctx, retry) {
				return
			}
			retry = min(2*retry, eventRetryMax)
			continue
		}
		for i, m := range st.Masks() {
			if m != logged[i] {
				logged[i] = m
				log.Info("NVML events registered", "gpu", h.GPUs[i].Info().Index, "types", EventTypeNames(m))
			}
		}
		state("watching")
		opened := time.Now()
		failed, late := h.drain(ctx, st, ready, on)
		if ctx.Err() != nil {
			return
		}
		if late && failed == nil {
			log.Info("a GPU answered late; registering NVML events again")
			continue
		}
		if failed == nil {
			failed = errors.New("the event thread stopped")
		}
		if time.Since(opened) >= eventRetryReset {
			retry = eventRetryMin
		}
		log.Warn("NVML event stream failed; opening it again", "error", failed, "retry_in", retry)
		state("reopening after: " + failed.Error())
		if !sleepCtx(ctx, retry) {
			return
		}
		retry = min(2*retry, eventRetryMax)
	}
}

// drain delivers st's events until it ends. It ends st when ctx is done or
// when a GPU that was not ready answers (late reports that). failed is the
// stream's first error. drain returns only once st has ended.
func (h *Host) drain(ctx context.Context, st EventStream, ready []bool, on func(reading.Event)) (failed error, late bool) {
	stop := context.AfterFunc(ctx, st.Close)
	defer stop()
	lateCh := make(chan struct{})
	watchDone := make(chan struct{})
	defer close(watchDone)
	if !allTrue(ready) {
		go func() {
			if h.waitReady(ctx, ready, watchDone) {
				close(lateCh)
				st.Close()
			}
		}()
	}
	for {
		e, err := st.Next()
		switch {
		case err == nil:
			on(e)
		case errors.Is(err, ErrEventsClosed):
			select {
			case <-lateCh:
				late = true
			default:
			}
			return failed, late
		case failed == nil:
			failed = err
		}
	}
}

// readyGPUs reports which GPUs have answered: static facts read, handle had.
func (h *Host) readyGPUs() []bool {
	ready := make([]bool, len(h.GPUs))
	for i, g := range h.GPUs {
		ready[i] = g.StaticDone() && g.Device() != nil
	}
	return ready
}

// waitReady polls until a GPU that was not ready in was answers (true), or
// ctx ends or halt is closed (false; halt may be nil).
func (h *Host) waitReady(ctx context.Context, was []bool, halt <-chan struct{}) bool {
	t := time.NewTicker(lateGPUPoll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return false
		case <-halt:
			return false
		case <-t.C:
		}
		for i, r := range h.readyGPUs() {
			if r && !was[i] {
				return true
			}
		}
	}
}

// watch opens one event set holding the ready GPUs, for the subset of
// WatchedEvents each supports. Call it from the goroutine that reads the
// events: the registration calls are not bounded.
func (h *Host) watch(log *slog.Logger, ready []bool) (EventStream, error) {
	if h.openEvents == nil && (!h.Syms.Has(FnEventSetCreate) || !h.Syms.Has(FnRegisterEvents) || !h.Syms.Has(FnEventSetWait)) {
		return nil, errNoEventSets
	}
	masks := make([]uint64, len(h.GPUs))
	for i, g := range h.GPUs {
		if !ready[i] {
			continue
		}
		supported := WatchedEvents
		if h.Syms.Has(FnSupportedEvents) {
			s, ret := g.Device().GetSupportedEventTypes()
			if ret != nvml.SUCCESS {
				log.Warn("cannot query supported event types", "gpu", g.Info().Index, "error", retText(ret))
				continue
			}
			supported = s
		}
		masks[i] = supported & WatchedEvents
	}
	any := false
	for _, m := range masks {
		any = any || m != 0
	}
	if !any {
		return nil, errNoneRegistered
	}
	if h.openEvents != nil {
		return h.openEvents(masks)
	}
	if _, native := h.lib.(*NVML); !native {
		return nil, fmt.Errorf("%w (not the real library)", errNoEventSets)
	}
	return h.watchNative(masks)
}

func anyTrue(b []bool) bool {
	for _, v := range b {
		if v {
			return true
		}
	}
	return false
}

func allTrue(b []bool) bool {
	for _, v := range b {
		if !v {
			return false
		}
	}
	return true
}

// sleepCtx waits d; false if ctx ended first.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// makeEvent classifies one NVML event for the GPU with index idx.
func makeEvent(gpus []*GPU, idx int, typ, data uint64) reading.Event {
	ev := reading.Event{Time: time.Now(), GPU: -1, Source: reading.SourceNVML, NVMLType: typ, Data: data}
	for _, g := range gpus {
		if info := g.Info(); info.Index == idx {
			ev.GPU, ev.BusID = info.Index, info.BusID
			break
		}
	}
	switch {
	case typ&uint64(nvml.EventTypeXidCriticalError) != 0:
		ev.Kind = reading.EventXid
	case typ&uint64(nvml.EventTypeGpuRecoveryAction) != 0:
		ev.Kind = reading.EventRecovery
	case typ&uint64(nvml.EventTypePState) != 0:
		ev.Kind = reading.EventPState
	case typ&uint64(nvml.EventTypeClock) != 0:
		ev.Kind = reading.EventClock
	default:
		ev.Kind = reading.EventOther
	}
	return ev
}

// EventTypeNames returns the names of the watched types in mask.
func EventTypeNames(mask uint64) string {
	s := ""
	add := func(bit uint64, name string) {
		if mask&bit != 0 {
			if s != "" {
				s += "|"
			}
			s += name
		}
	}
	add(uint64(nvml.EventTypePState), "PState")
	add(uint64(nvml.EventTypeXidCriticalError), "Xid")
	add(uint64(nvml.EventTypeClock), "Clock")
	add(uint64(nvml.EventTypeGpuRecoveryAction), "GpuRecoveryAction")
	if s == "" {
		return "none"
	}
	return s
}
