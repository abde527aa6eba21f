package sampler

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

// WatchedEvents are the NVML event types registered on every GPU that
// supports them: P-state changes, Xid critical errors, clock changes and GPU
// recovery actions.
const WatchedEvents = uint64(nvml.EventTypePState | nvml.EventTypeXidCriticalError |
	nvml.EventTypeClock | nvml.EventTypeGpuRecoveryAction)

// ErrEventsClosed is returned by EventStream.Next after Close.
var ErrEventsClosed = errors.New("event stream closed")

// EventStream delivers NVML events for the monitored GPUs.
type EventStream interface {
	// Next blocks until an event arrives. It returns ErrEventsClosed after
	// Close, and other errors when the event set failed (the caller may
	// back off and open a new stream).
	Next() (reading.Event, error)
	// Close stops the stream and unblocks Next.
	Close()
	// Masks returns the event types registered per GPU, in Host.GPUs order.
	Masks() []uint64
	// Wait waits, at most d, after Close until nothing is inside an NVML
	// event call any more, and reports whether that happened. NVML must not
	// be shut down while a wait is in progress.
	Wait(d time.Duration) bool
}

// WatchEvents opens one event set holding every monitored GPU for the
// supported subset of WatchedEvents. With the real driver the wait runs on a
// plain thread outside the Go scheduler (see evthread.c); otherwise on the
// calling goroutine's stream with bounded waits. It fails only when no GPU
// could be registered. Call it from the goroutine that reads the events: the
// registration calls are not bounded.
func (h *Host) WatchEvents(log *slog.Logger) (EventStream, error) {
	if !h.Syms.Has(FnEventSetCreate) || !h.Syms.Has(FnRegisterEvents) || !h.Syms.Has(FnEventSetWait) {
		return nil, fmt.Errorf("the driver lacks NVML event sets")
	}
	masks := make([]uint64, len(h.GPUs))
	for i, g := range h.GPUs {
		dev := g.Device()
		if dev == nil || !g.StaticDone() {
			continue
		}
		supported := WatchedEvents
		if h.Syms.Has(FnSupportedEvents) {
			s, ret := dev.GetSupportedEventTypes()
			if ret != nvml.SUCCESS {
				log.Warn("cannot query supported event types", "gpu", g.Info().Index, "error", retText(ret))
				continue
			}
			supported = s
		}
		masks[i] = supported & WatchedEvents
	}
	if _, native := h.lib.(*NVML); native {
		return h.watchNative(masks)
	}
	return h.watchGo(masks)
}

// goEvents waits on the set from Go with bounded waits (fakes in tests).
type goEvents struct {
	set    EventSet
	gpus   []*GPU
	masks  []uint64
	closed atomic.Bool
	done   chan struct{} // closed when Next has freed the set after Close
	once   sync.Once
}

func (h *Host) watchGo(want []uint64) (EventStream, error) {
	set, ret := h.lib.EventSetCreate()
	if ret != nvml.SUCCESS {
		return nil, fmt.Errorf("nvmlEventSetCreate: %s", retText(ret))
	}
	e := &goEvents{set: set, gpus: h.GPUs, masks: make([]uint64, len(h.GPUs)), done: make(chan struct{})}
	registered := false
	for i, g := range h.GPUs {
		mask := want[i]
		if mask == 0 {
			continue
		}
		dev := g.Device()
		if ret := dev.RegisterEvents(mask, set.Raw()); ret != nvml.SUCCESS {
			// Some drivers refuse a mask as a whole; register type by type.
			mask2 := uint64(0)
			for bit := uint64(1); bit != 0 && bit <= mask; bit <<= 1 {
				if mask&bit != 0 && dev.RegisterEvents(bit, set.Raw()) == nvml.SUCCESS {
					mask2 |= bit
				}
			}
			mask = mask2
		}
		e.masks[i] = mask
		registered = registered || mask != 0
	}
	if !registered {
		set.Free()
		return nil, fmt.Errorf("no GPU supports the watched NVML events")
	}
	return e, nil
}

func (e *goEvents) Masks() []uint64 { return e.masks }

func (e *goEvents) Close() { e.closed.Store(true) }

func (e *goEvents) Wait(d time.Duration) bool {
	select {
	case <-e.done:
		return true
	case <-time.After(d):
		return false
	}
}

func (e *goEvents) Next() (reading.Event, error) {
	for {
		if e.closed.Load() {
			e.once.Do(func() {
				e.set.Free()
				close(e.done)
			})
			return reading.Event{}, ErrEventsClosed
		}
		handle, typ, data, ret := e.set.Wait(500)
		switch Classify(ret) {
		case ClassOK:
		case ClassTimeout:
			continue
		default:
			return reading.Event{}, fmt.Errorf("nvmlEventSetWait: %s", retText(ret))
		}
		idx := -1
		for _, g := range e.gpus {
			if g.Handle() != nil && g.Handle() == handle {
				idx = g.Info().Index
				break
			}
		}
		return makeEvent(e.gpus, idx, typ, data), nil
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
