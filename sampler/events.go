package sampler

import (
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

// Events is one NVML event set holding every monitored GPU.
type Events struct {
	set   EventSet
	gpus  []*GPU
	Masks []uint64 // registered types per GPU, in h.GPUs order
}

// OpenEvents creates the event set and registers each GPU for the supported
// subset of WatchedEvents. It fails only when no GPU could be registered. Call
// it from the goroutine that will wait on the set: the calls are not bounded.
func (h *Host) OpenEvents(log *slog.Logger) (*Events, error) {
	if !h.Syms.Has(FnEventSetCreate) || !h.Syms.Has(FnRegisterEvents) || !h.Syms.Has(FnEventSetWait) {
		return nil, fmt.Errorf("the driver lacks NVML event sets")
	}
	set, ret := h.lib.EventSetCreate()
	if ret != nvml.SUCCESS {
		return nil, fmt.Errorf("nvmlEventSetCreate: %s", retText(ret))
	}
	e := &Events{set: set, gpus: h.GPUs, Masks: make([]uint64, len(h.GPUs))}
	registered := false
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
		mask := supported & WatchedEvents
		if mask == 0 {
			continue
		}
		if ret := dev.RegisterEvents(mask, set.Raw()); ret != nvml.SUCCESS {
			// Some drivers refuse a mask as a whole; register type by type.
			mask2 := uint64(0)
			for bit := uint64(1); bit <= mask; bit <<= 1 {
				if mask&bit != 0 && dev.RegisterEvents(bit, set.Raw()) == nvml.SUCCESS {
					mask2 |= bit
				}
			}
			mask = mask2
		}
		e.Masks[i] = mask
		if mask != 0 {
			registered = true
		}
	}
	if !registered {
		set.Free()
		return nil, fmt.Errorf("no GPU supports the watched NVML events")
	}
	return e, nil
}

// Wait waits up to timeout for one event. ok is false on timeout. An error
// means the set itself failed (the caller should back off and retry).
func (e *Events) Wait(timeout time.Duration) (ev reading.Event, ok bool, err error) {
	handle, typ, data, ret := e.set.Wait(uint32(timeout / time.Millisecond))
	switch Classify(ret) {
	case ClassOK:
	case ClassTimeout:
		return reading.Event{}, false, nil
	default:
		return reading.Event{}, false, fmt.Errorf("nvmlEventSetWait: %s", retText(ret))
	}
	ev = reading.Event{Time: time.Now(), GPU: -1, Source: reading.SourceNVML, NVMLType: typ, Data: data}
	for _, g := range e.gpus {
		if g.Handle() != nil && g.Handle() == handle {
			info := g.Info()
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
	return ev, true, nil
}

// Close frees the event set.
func (e *Events) Close() { e.set.Free() }

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
