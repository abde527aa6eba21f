package monitor

import (
	"context"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/kmsg"
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
// for it), so a wedged driver stalls nothing else. Until every GPU --gpu did
// not select has its UUID, each round also has it read again
// (Host.Reidentify, not waited for); once it has, each round until they are
// judged checks again the previous run's boards the start could not tell
// from it (missingUnselected, on the side goroutine; one job at a time: a
// copy queued behind a stuck side goroutine would take a slot meant for
// rows, and be dropped and counted as lost while the first still waits).
func (m *Monitor) runInventory(ctx context.Context) {
	missing := map[string]int{} // UUID -> rounds missed in a row
	reported := map[string]bool{}
	type result struct {
		uuids []string // nil: the count did not drop
		err   error
	}
	var inflight chan result
	var judging atomic.Bool // a missingUnselected job is on the side queue: not queued again until it runs or is dropped
	every(ctx, m.cfg.InventoryEvery, nil, func() {
		if _, identified := m.enumeratedUUIDs(); !identified {
			m.host.Reidentify()
		} else if m.states.owed.Load() && !judging.Swap(true) { // until judged: a job the full queue dropped is queued again
			m.side.enqueue(sideJob{what: "missing boards: every GPU --gpu did not select is identified", gpu: -1,
				f: func() { m.missingUnselected(); judging.Store(false) }, dropped: func(string) { judging.Store(false) }})
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
			return
		case <-ctx.Done():
			return
		}
		if r.err != nil {
			m.log.Warn("GPU enumeration failed", "error", r.err)
			return
		}
		for _, gs := range m.gpus {
			info := gs.g.Info()
			if info.UUID == "" {
				continue
			}
			if gone := r.uuids != nil && !slices.Contains(r.uuids, info.UUID) && !slices.Contains(r.uuids, ""); gone {
				missing[info.UUID]++
				if missing[info.UUID] >= 2 && !reported[info.UUID] {
					reported[info.UUID] = true
					gs.log.Error("GPU vanished from the driver's enumeration", "uuid", info.UUID, "bus", info.BusID,
						"enumerated", len(r.uuids), "at_start", m.host.Enumerated())
					m.onEvent(reading.Event{Time: time.Now(), GPU: gs.idx, BusID: info.BusID, Kind: reading.EventLost,
						Source: reading.SourcePoll, Text: "GPU vanished from enumeration (" + info.UUID + ")"})
				}
			} else {
				delete(missing, info.UUID)
				if reported[info.UUID] && r.uuids == nil {
					delete(reported, info.UUID)
					gs.log.Info("GPU is enumerated again", "uuid", info.UUID)
					m.eventLine(sink.EventLine{Time: time.Now(), GPU: gs.idx, Bus: info.BusID, Source: "poll", Type: sink.TypeGPUEnumeratedAgain})
				}
			}
		}
	})
}

// unselectedInDriver names the GPUs --gpu did not select whose read (at
// start, or Host.Reidentify's) has not returned, for the stop (inDriver):
// "unselected_gpu N".
func (m *Monitor) unselectedInDriver() []string {
	var out []string
	for _, i := range m.host.UnselectedInDriver() {
		out = append(out, "unselected_gpu "+strconv.Itoa(i))
	}
	return out
}

// known is what the monitor has built from a GPU's static facts: a GPU
// stuck at start (a restart in the middle of a GSP fault: only its index
// known) gives them when it answers; one whose UUID or bus id could not be
// read at start (its handle had) gives that later (sampler re-reads it).
// Worker goroutine only.
type known struct {
	facts bool // its handle and static facts: its fan count, its CSV's columns
	uuid  bool // its UUID: its board (run-state, INVENTORY), the fans the previous run held of it, its CPER records
	bus   bool // its bus id: its kernel lines
	named bool // the --gpu selectors pending at start were judged against it
}

// lateFacts runs on the worker before each sample while some of the GPU's
// static facts were not known at start, and once for each part when it
// arrives: everything built from that part at start is brought up to date
// here, exactly once (gs.known): its bus id for kernel lines and the AER
// paths, system-info.txt, its CSV's board and fan columns (the next row
// opens the board's file), its fan guard (with the fans the previous run
// held of its UUID), run-state and INVENTORY, its CPER records, the --gpu
// selectors pending.
func (m *Monitor) lateFacts(gs *gpuState) {
	k := &gs.known
	facts := !k.facts && gs.g.FactsKnown()
	if !k.facts && !facts {
		return
	}
	info := gs.g.Info()
	uuid, bus := !k.uuid && info.UUID != "", !k.bus && info.BusID != ""
	if !facts && !uuid && !bus {
		return
	}
	k.facts, k.uuid, k.bus = true, k.uuid || uuid, k.bus || bus
	if facts {
		gs.log.Info("GPU answered after start-up gave up on it; its static facts are known now",
			"name", info.Name, "bus", info.BusID, "uuid", info.UUID, "fans", info.NumFans)
	} else {
		gs.log.Info("GPU's UUID or bus id, unread at start, is known now; what is keyed by it is brought up to date",
			"bus", info.BusID, "uuid", info.UUID)
	}
	if a, err := reading.ParsePCIAddr(info.BusID); err == nil && bus {
		if was, ok := gs.sysBus.Get(); ok && was.Slot() != a.Slot() {
			gs.log.Warn("the GPU's bus id is not the one sysfs listed for its index; kernel lines naming that one were taken as its own",
				"bus", info.BusID, "sysfs", was.NVML())
		}
		m.kern.mu.Lock()
		if was, ok := gs.sysBus.Get(); ok && m.kern.byBus[was.Slot()] == gs {
			delete(m.kern.byBus, was.Slot())
		}
		m.kern.byBus[a.Slot()] = gs
		m.kern.mu.Unlock()
		m.kern.stale.Store(true)
	}
	m.side.queue("system-info.txt", -1, m.writeSystemInfo)
	m.csv.SetGPU(csvColumns(gs.idx, info)) // from its next row: a file named by its board, under its own board line
	var claimed []int
	if uuid {
		claimed = m.runState.ClaimFans(info.UUID) // once: startFanGuards claimed it if it was known by then
	}
	if gs.fan != nil {
		if facts {
			gs.fan.FactsKnown(info.NumFans, nil)
		}
		gs.fan.Restore(claimed) // the fans the previous run held of it: handed back first
	}
	m.side.queue("run-state and INVENTORY: the board of a GPU that answered late", gs.idx, func() { m.lateBoard(gs, uuid) })
	if uuid {
		m.readCPER(gs) // not read at start: its UUID was unknown
	}
	if pending := m.host.Pending(); len(pending) > 0 && !k.named {
		// The GPU stands in for --gpu selectors that named no GPU
		// identified at start (sampler.Open); it is judged once its UUID
		// and bus id are both known, or one of them matches.
		if names := m.host.Names(gs.g); len(names) > 0 {
			k.named = true
			gs.log.Info("the GPU that answered late is the one --gpu names", "selectors", strings.Join(names, ","))
		} else if info.UUID != "" && info.BusID != "" {
			k.named = true
			gs.log.Warn("the GPU that answered late is not one --gpu names; it stays monitored until the logger restarts",
				"pending", strings.Join(pending, ","))
		}
	}
}

// busesFromSysfs gives the GPUs stuck at start the bus id sysfs lists for
// their index under the nvidia driver, in kern.byBus, so that their kernel lines
// are theirs from the first one. The list is trusted only when it agrees
// with NVML: as many GPUs as enumerated, every GPU that answered at its index.
func (m *Monitor) busesFromSysfs() {
	stuck := func(gs *gpuState) bool { _, err := reading.ParsePCIAddr(gs.g.Info().BusID); return err != nil }
	if !slices.ContainsFunc(m.gpus, stuck) {
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
		a, err := reading.ParsePCIAddr(gs.g.Info().BusID)
		if err == nil && (gs.idx >= len(list) || list[gs.idx].Slot() != a.Slot()) {
			m.log.Warn("sysfs does not list the nvidia driver's GPUs in NVML's order; the kernel lines of GPUs stuck at start are theirs once they answer",
				"gpu", gs.idx, "bus", gs.g.Info().BusID)
			return
		}
	}
	for _, gs := range m.gpus {
		if !stuck(gs) || gs.idx >= len(list) {
			continue
		}
		a := list[gs.idx]
		if _, taken := m.kern.byBus[a.Slot()]; taken {
			continue
		}
		gs.sysBus = reading.Some(a)
		m.kern.byBus[a.Slot()] = gs
		gs.log.Info("GPU stuck at start: its bus id is sysfs's for its index; its kernel lines reach it", "bus", a.NVML())
	}
}

// busID is the GPU's bus id in NVML's spelling: NVML's, else sysfs's
// (busesFromSysfs), else "".
func (gs *gpuState) busID() string {
	if b := gs.g.Info().BusID; b != "" {
		return b
	}
	if a, ok := gs.sysBus.Get(); ok {
		return a.NVML()
	}
	return ""
}

// gpuByBus returns the monitored GPU at PCI address a (any function of its
// slot), or nil.
func (m *Monitor) gpuByBus(a reading.PCIAddr) *gpuState {
	m.kern.mu.Lock()
	defer m.kern.mu.Unlock()
	return m.kern.byBus[a.Slot()]
}
