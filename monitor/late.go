package monitor

import (
	"path/filepath"
	"strings"

	"github.com/gpu-telemetry/gpu-telemetry/kmsg"
	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

// A GPU stuck at start (the service restarted in the middle of a GSP fault)
// is monitored from the start with only its index known: its bus id, name
// and fan count come when the driver answers. staticKnown is the one place
// where the monitor learns them; everything built from a GPU's static facts
// at start is brought up to date there.

// staticKnown is called once, on the GPU's worker goroutine before its first
// sample with them goes through the pipeline (handle), when the static facts
// of a GPU that had none at start become known. It registers the GPU's bus
// id (kernel log lines naming it then reach it), has the AER path table
// rebuilt, rewrites system-info.txt, and gives its CSV its board's name and
// the fan columns. Whatever else is built from static facts at start and
// must follow a late GPU belongs here.
func (m *Monitor) staticKnown(gs *gpuState) {
	info := gs.info()
	gs.log.Info("GPU answered after start-up gave up on it; its static facts are known now",
		"name", info.Name, "bus", info.BusID, "uuid", info.UUID, "fans", info.NumFans)
	if a, err := reading.ParsePCIAddr(info.BusID); err == nil {
		if was, ok := gs.sysBus.Get(); ok && was.Slot() != a.Slot() {
			gs.log.Warn("the GPU's bus id is not the one sysfs listed for its index; kernel lines naming that one were taken as its own",
				"bus", info.BusID, "sysfs", was.NVML())
			m.kern.removeBus(was.Slot(), gs)
		}
		m.kern.addBus(a.Slot(), gs)
		m.kern.stale.Store(true)
	}
	m.side.queue("system-info.txt", -1, m.writeSystemInfo)
	m.csv.SetGPU(csvColumns(gs.idx, info)) // its board and fan columns, from its next row (its board's file)
	m.side.queue("run-state and INVENTORY: the board of a GPU that answered late", gs.idx, func() { m.lateBoard(gs) })
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

// busesFromSysfs gives the GPUs stuck at start (no bus id from NVML) the
// bus id sysfs lists for their index under the nvidia driver
// (kmsg.DriverGPUs, in NVML's order), and registers them in byBus, so that
// their kernel lines are theirs from the first one. The list is trusted only
// when it agrees with NVML: as many GPUs as the driver enumerated, and every
// GPU that answered at its index.
func (m *Monitor) busesFromSysfs(byBus map[reading.PCIAddr]*gpuState) {
	var stuck []*gpuState
	for _, gs := range m.gpus {
		if _, err := reading.ParsePCIAddr(gs.info().BusID); err != nil {
			stuck = append(stuck, gs)
		}
	}
	if len(stuck) == 0 {
		return
	}
	list, err := kmsg.DriverGPUs(filepath.Join(m.cfg.HostRoot, kmsg.DefaultNvidiaDriver))
	if err != nil {
		m.log.Info("no sysfs list of the nvidia driver's GPUs; the kernel lines of GPUs stuck at start are theirs once they answer", "error", err)
		return
	}
	if n := m.host.Enumerated(); n > 0 && n != len(list) {
		m.log.Warn("sysfs lists another number of GPUs than the driver enumerated; the kernel lines of GPUs stuck at start are theirs once they answer",
			"sysfs", len(list), "nvml", n)
		return
	}
	for _, gs := range m.gpus {
		a, err := reading.ParsePCIAddr(gs.info().BusID)
		if err == nil && (gs.idx >= len(list) || list[gs.idx].Slot() != a.Slot()) {
			m.log.Warn("sysfs does not list the nvidia driver's GPUs in NVML's order; the kernel lines of GPUs stuck at start are theirs once they answer",
				"gpu", gs.idx, "bus", gs.info().BusID)
			return
		}
	}
	for _, gs := range stuck {
		if gs.idx >= len(list) {
			continue
		}
		a := list[gs.idx]
		if _, taken := byBus[a.Slot()]; taken {
			continue
		}
		gs.sysBus = reading.Some(a)
		byBus[a.Slot()] = gs
		gs.log.Info("GPU stuck at start: its bus id is sysfs's for its index; its kernel lines reach it", "bus", a.NVML())
	}
}

// busID is the GPU's bus id in NVML's spelling: NVML's, or while the GPU
// has not answered the one sysfs lists for it (busesFromSysfs); "" when
// neither is known.
func (gs *gpuState) busID() string {
	if b := gs.info().BusID; b != "" {
		return b
	}
	if a, ok := gs.sysBus.Get(); ok {
		return a.NVML()
	}
	return ""
}

// addBus registers gs under PCI slot a.
func (k *kernelGPUs) addBus(a reading.PCIAddr, gs *gpuState) {
	k.mu.Lock()
	k.byBus[a] = gs
	k.mu.Unlock()
}

// removeBus takes gs off PCI slot a.
func (k *kernelGPUs) removeBus(a reading.PCIAddr, gs *gpuState) {
	k.mu.Lock()
	if k.byBus[a] == gs {
		delete(k.byBus, a)
	}
	k.mu.Unlock()
}

// gpuByBus returns the monitored GPU at PCI address a (any function of its
// slot), or nil.
func (m *Monitor) gpuByBus(a reading.PCIAddr) *gpuState {
	m.kern.mu.Lock()
	defer m.kern.mu.Unlock()
	return m.kern.byBus[a.Slot()]
}
