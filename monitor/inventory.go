package monitor

import (
	"context"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

// inventoryEvery is how often the GPU list is compared with what the driver
// enumerates. A GPU that fell off the bus can be removed from enumeration;
// its handle then just fails, and without this check it would look like an
// ordinary failure rather than a vanished device.
const inventoryEvery = 30 * time.Second

// runInventory re-enumerates the GPUs every inventoryEvery on its own
// goroutine; a call that does not return is abandoned (and the next round
// waits for it) so that a wedged driver cannot stall anything else.
func (m *Monitor) runInventory(ctx context.Context) {
	every := m.cfg.InventoryEvery
	t := time.NewTicker(every)
	defer t.Stop()
	missing := map[string]bool{}
	type result struct {
		uuids []string
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
			go func() {
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
		present := map[string]bool{}
		for _, u := range r.uuids {
			present[u] = true
		}
		for _, gs := range m.gpus {
			info := gs.info()
			if info.UUID == "" {
				continue
			}
			switch {
			case !present[info.UUID] && !missing[info.UUID]:
				missing[info.UUID] = true
				gs.log.Error("GPU vanished from the driver's enumeration", "uuid", info.UUID, "bus", info.BusID, "enumerated", len(r.uuids))
				m.onEvent(reading.Event{Time: time.Now(), GPU: gs.idx, BusID: info.BusID, Kind: reading.EventLost,
					Source: reading.SourcePoll, Text: "GPU vanished from enumeration (" + info.UUID + ")"})
			case present[info.UUID] && missing[info.UUID]:
				delete(missing, info.UUID)
				gs.log.Info("GPU is enumerated again", "uuid", info.UUID)
				m.eventLine(time.Now(), gs.idx, info.BusID, "source=poll", "type=GPU_ENUMERATED_AGAIN")
			}
		}
	}
}
