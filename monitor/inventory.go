package monitor

import (
	"context"
	"slices"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/reading"
	"github.com/gpu-telemetry/gpu-telemetry/sink"
)

// inventoryEvery is how often the GPU list is compared with what the driver
// enumerates: a GPU that fell off the bus can leave the enumeration, and its
// handle then fails like an ordinary failure.
const inventoryEvery = 30 * time.Second

// runInventory compares the driver's GPU count with the count at start every
// InventoryEvery. Only when it dropped does it list the UUIDs, and it
// reports a GPU only when two rounds in a row miss it (a UUID that cannot be
// read once is unknown, not gone). A round runs on its own goroutine with
// the sample deadline; one that does not return is abandoned (the next waits
// for it), so a wedged driver stalls nothing else.
func (m *Monitor) runInventory(ctx context.Context) {
	t := time.NewTicker(m.cfg.InventoryEvery)
	defer t.Stop()
	missing := map[string]int{} // UUID -> rounds missed in a row
	reported := map[string]bool{}
	type result struct {
		uuids []string // nil: the count did not drop
		err   error
	}
	var inflight chan result
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if inflight == nil {
			inflight = make(chan result, 1)
			ch := inflight
			m.enumerating.Store(true)
			go func() {
				defer m.enumerating.Store(false)
				n, err := m.host.Count()
				if err != nil || n >= m.host.Enumerated() {
					ch <- result{err: err}
					return
				}
				u, err := m.host.Enumerate()
				ch <- result{u, err}
			}()
		}
		var r result
		select {
		case r = <-inflight:
			inflight = nil
		case <-time.After(m.cfg.Deadline):
			m.log.Warn("GPU enumeration did not return in time; trying again later", "waited", m.cfg.Deadline)
			continue
		case <-ctx.Done():
			return
		}
		if r.err != nil {
			m.log.Warn("GPU enumeration failed", "error", r.err)
			continue
		}
		for _, gs := range m.gpus {
			info := gs.info()
			if info.UUID == "" {
				continue
			}
			gone := r.uuids != nil && !slices.Contains(r.uuids, info.UUID) && !slices.Contains(r.uuids, "")
			switch {
			case gone:
				missing[info.UUID]++
				if missing[info.UUID] >= 2 && !reported[info.UUID] {
					reported[info.UUID] = true
					gs.log.Error("GPU vanished from the driver's enumeration", "uuid", info.UUID, "bus", info.BusID,
						"enumerated", len(r.uuids), "at_start", m.host.Enumerated())
					m.onEvent(reading.Event{Time: time.Now(), GPU: gs.idx, BusID: info.BusID, Kind: reading.EventLost,
						Source: reading.SourcePoll, Text: "GPU vanished from enumeration (" + info.UUID + ")"})
				}
			default:
				delete(missing, info.UUID)
				if reported[info.UUID] && r.uuids == nil {
					delete(reported, info.UUID)
					gs.log.Info("GPU is enumerated again", "uuid", info.UUID)
					m.eventLine(sink.EventLine{Time: time.Now(), GPU: gs.idx, Bus: info.BusID, Source: "poll", Type: sink.TypeGPUEnumeratedAgain})
				}
			}
		}
	}
}
