package monitor

import (
	"strings"

	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

// A GPU stuck at start (the service restarted in the middle of a GSP fault)
// is monitored from the start with only its index known: its bus id, name
// and fan count come when the driver answers. staticKnown is the one place
// where the monitor learns them; everything built from a GPU's static facts
// at start is brought up to date there.

// checkStatic runs on the GPU's worker goroutine at the start of every
// sample's pipeline while the GPU's static facts were not known at start
// (gs.late), and calls staticKnown once they are.
func (gs *gpuState) checkStatic() {
	if !gs.g.FactsKnown() {
		return
	}
	gs.late = false
	gs.m.staticKnown(gs)
}

// staticKnown is called once, on the GPU's worker goroutine before its first
// sample with them goes through the pipeline, when the static facts of a GPU
// that had none at start become known. It registers the GPU's bus id (kernel
// log lines naming it then reach it), has the AER path table rebuilt,
// rewrites system-info.txt, and gives its CSV the fan columns. Whatever
// else is built from static facts at start and must follow a late GPU
// belongs here.
func (m *Monitor) staticKnown(gs *gpuState) {
	info := gs.info()
	gs.log.Info("GPU answered after start-up gave up on it; its static facts are known now",
		"name", info.Name, "bus", info.BusID, "uuid", info.UUID, "fans", info.NumFans)
	if a, err := reading.ParsePCIAddr(info.BusID); err == nil {
		m.addBus(a.Slot(), gs)
		m.kern.stale.Store(true)
	}
	m.queue("system-info.txt", -1, m.writeSystemInfo)
	m.csv.SetFans(gs.idx, info.NumFans) // its fan columns, from its next row (a new part of the day)
	if pending := m.host.Pending(); len(pending) > 0 {
		// The GPU was selected in the place of --gpu selectors that named
		// no GPU that answered at start (sampler.Open).
		if names := m.host.Names(gs.g); len(names) > 0 {
			gs.log.Info("the GPU that answered late is the one --gpu names", "selectors", strings.Join(names, ","))
		} else {
			gs.log.Warn("the GPU that answered late is not one --gpu names; it stays monitored until the logger restarts",
				"pending", strings.Join(pending, ","))
		}
	}
}

// addBus registers gs under PCI slot a: a copy of the map with it is
// swapped in, so readers (gpuByBus) take no lock.
func (m *Monitor) addBus(a reading.PCIAddr, gs *gpuState) {
	m.busMu.Lock()
	defer m.busMu.Unlock()
	old := *m.byBus.Load()
	next := make(map[reading.PCIAddr]*gpuState, len(old)+1)
	for k, v := range old {
		next[k] = v
	}
	next[a] = gs
	m.byBus.Store(&next)
}

// gpuByBus returns the monitored GPU at PCI address a (any function of its
// slot), or nil.
func (m *Monitor) gpuByBus(a reading.PCIAddr) *gpuState {
	return (*m.byBus.Load())[a.Slot()]
}
