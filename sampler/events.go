package sampler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
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
// and a handle had), whatever the other GPUs do: the GPUs that answered at
// start share one event set; a GPU stuck at start gets a set of its own when
// it comes back (the others' set is not touched, so nothing of theirs is
// missed meanwhile); while no GPU has answered no set is opened. A set that
// fails is opened again with back-off, each time only after the previous one
// has ended (no timing margin: the stream says when it has). FollowEvents
// stops early, for good, only when the driver lacks event sets or every GPU
// has answered and none supports the watched types. on is called from one
// goroutine at a time; state, if not nil, is told what the events are doing
// ("waiting for a GPU to answer", "watching", "reopening after: ...",
// "unavailable: ..."). FollowEvents returns once every set it opened has
// ended.
func (h *Host) FollowEvents(ctx context.Context, log *slog.Logger, on func(reading.Event), state func(string)) {
	if state == nil {
		state = func(string) {}
	}
	var onMu, stateMu sync.Mutex
	deliver := func(e reading.Event) {
		onMu.Lock()
		defer onMu.Unlock()
		on(e)
	}
	tell := func(s string) {
		stateMu.Lock()
		defer stateMu.Unlock()
		state(s)
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	results := make(chan error, len(h.GPUs))
	handed := make([]bool, len(h.GPUs)) // given to a set (registered, or found to support nothing)
	running := 0
	tick := time.NewTicker(lateGPUPoll)
	defer tick.Stop()
	for {
		ready := h.readyGPUs()
		group := make([]bool, len(h.GPUs))
		var idx []int
		for i := range ready {
			if ready[i] && !handed[i] {
				group[i], handed[i] = true, true
				idx = append(idx, h.GPUs[i].Info().Index)
			}
		}
		if len(idx) > 0 {
			if running > 0 {
				log.Info("a GPU answered late; registering its NVML events", "gpus", fmt.Sprint(idx))
			}
			running++
			wg.Add(1)
			go func() {
				defer wg.Done()
				results <- h.followSet(ctx, log, group, deliver, tell)
			}()
		}
		if running == 0 && !anyTrue(handed) {
			tell("waiting for a GPU to answer") // every GPU is stuck at start
		}
		select {
		case <-ctx.Done():
			return
		case err := <-results:
			running--
			switch {
			case errors.Is(err, errNoEventSets):
				log.Warn("NVML events unavailable; Xids come from the kernel log only", "error", err)
				tell("unavailable: " + err.Error())
				return
			case errors.Is(err, errNoneRegistered) && running == 0 && allTrue(handed):
				log.Warn("NVML events unavailable; Xids come from the kernel log only", "error", err)
				tell("unavailable: " + err.Error())
				return
			case errors.Is(err, errNoneRegistered) && running == 0:
				tell("waiting for a GPU that supports them")
			}
		case <-tick.C:
		}
		if allTrue(handed) {
			tick.Stop() // nothing left to wait for: no timer waking the process
		}
	}
}

// followSet follows the event set of the GPUs in group, opening it again with
// back-off when it fails, until ctx is done (nil). It returns errNoEventSets
// or errNoneRegistered when the set cannot hold any of them.
func (h *Host) followSet(ctx context.Context, log *slog.Logger, group []bool, on func(reading.Event), state func(string)) error {
	retry := eventRetryMin
	logged := false
	for ctx.Err() == nil {
		st, err := h.watch(log, group)
		switch {
		case errors.Is(err, errNoEventSets), errors.Is(err, errNoneRegistered):
			return err
		case err != nil:
			h.eventFailures.Add(1)
			log.Warn("cannot open NVML events; trying again", "error", err, "retry_in", retry)
			state("reopening after: " + err.Error())
			if !sleepCtx(ctx, retry) {
				return nil
			}
			retry = min(2*retry, eventRetryMax)
			continue
		}
		if !logged {
			logged = true
			for i, m := range st.Masks() {
				if group[i] {
					log.Info("NVML events registered", "gpu", h.GPUs[i].Info().Index, "types", EventTypeNames(m))
				}
			}
		}
		state("watching")
		opened := time.Now()
		failed := h.drain(ctx, st, on)
		if ctx.Err() != nil {
			return nil
		}
		if failed == nil {
			failed = errors.New("the event thread stopped")
		}
		h.eventFailures.Add(1)
		if time.Since(opened) >= eventRetryReset {
			retry = eventRetryMin
		}
		log.Warn("NVML event stream failed; opening it again", "error", failed, "retry_in", retry)
		state("reopening after: " + failed.Error())
		if !sleepCtx(ctx, retry) {
			return nil
		}
		retry = min(2*retry, eventRetryMax)
	}
	return nil
}

// EventFailures is how many times NVML events were not watched: an event set
// that could not be opened, a stream that failed and was opened again, or a
// GPU left out of its set because its supported event types could not be
// read. Each loses the NVML events (Xids included) of its GPUs until the set
// is open again; the kernel log still reports Xids.
func (h *Host) EventFailures() uint64 { return h.eventFailures.Load() }

// drain delivers st's events until it ends; ctx being done ends it. failed is
// the stream's first error. drain returns only once st has ended.
func (h *Host) drain(ctx context.Context, st EventStream, on func(reading.Event)) (failed error) {
	stop := context.AfterFunc(ctx, st.Close)
	defer stop()
	for {
		e, err := st.Next()
		switch {
		case err == nil:
			on(e)
		case errors.Is(err, ErrEventsClosed):
			return failed
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

// watch opens one event set holding the GPUs in group, for the subset of
// WatchedEvents each supports. Call it from the goroutine that reads the
// events: the registration calls are not bounded.
func (h *Host) watch(log *slog.Logger, group []bool) (EventStream, error) {
	if h.openEvents == nil && (!h.Syms.Has(FnEventSetCreate) || !h.Syms.Has(FnRegisterEvents) || !h.Syms.Has(FnEventSetWait)) {
		return nil, errNoEventSets
	}
	masks := make([]uint64, len(h.GPUs))
	for i, g := range h.GPUs {
		if !group[i] {
			continue
		}
		supported := WatchedEvents
		if h.Syms.Has(FnSupportedEvents) {
			s, ret := g.Device().GetSupportedEventTypes()
			if ret != nvml.SUCCESS {
				h.eventFailures.Add(1)
				log.Warn("cannot query supported event types; the GPU's NVML events are not watched", "gpu", g.Info().Index, "error", retText(ret))
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
