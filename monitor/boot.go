package monitor

import (
	"cmp"
	"context"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/reading"
	"github.com/gpu-telemetry/gpu-telemetry/runstate"
	"github.com/gpu-telemetry/gpu-telemetry/sink"
	"github.com/gpu-telemetry/gpu-telemetry/snapshot"
)

// startBootCheck records this run in run-state and, when the previous run
// did not stop cleanly, collects its evidence into crashes/boot-*.log on a
// goroutine in wg: sampling does not wait for it.
func (m *Monitor) startBootCheck(ctx context.Context, wg *sync.WaitGroup) {
	bootID := m.ident.BootID
	cur := runstate.State{BootID: bootID, Started: m.start, PID: os.Getpid(), KmsgSeq: m.kmsgSeq(), GPUs: m.boards(),
		Driver: m.host.System.DriverVersion, VBIOS: m.vbios()}
	m.states.mu.Lock()
	m.states.compared = map[string]bool{}
	for _, b := range cur.GPUs {
		if b.UUID != "" {
			m.states.compared[b.UUID] = true
		}
	}
	m.states.mu.Unlock()
	prev, err := m.runState.Begin(cur) // keeps the previous run's fan holds
	if err != nil {
		m.log.Warn("cannot record this run; the next start will not know whether it stopped cleanly", "error", err)
	}
	// Read before the checks: a GPU identified while they run is judged again.
	_, identified := m.enumeratedUUIDs()
	missing := m.missingAtStart(m.compareInventory(prev, cur.GPUs))
	missing = append(missing, m.missingFromState()...)
	m.states.owed.Store(!identified) // once the checks stored what is owed: missingUnselected
	if prev.Found {
		for _, line := range sink.CompareFirmware(m.start, prev.State.Driver, cur.Driver, prev.State.VBIOS, cur.VBIOS, cur.GPUs) {
			m.eventLine(line)
		}
	}
	m.startFanGuards()
	if !prev.Unclean() {
		return
	}
	m.log.Warn("the previous run did not stop cleanly; collecting its evidence", "prev_boot", prev.State.BootID, "boot", bootID,
		"prev_started", prev.State.Started)
	wg.Go(func() {
		bl, err := m.snaps.WriteBootLog(ctx, snapshot.BootConfig{Now: m.start, Prev: prev, Host: m.ident, Missing: missing})
		line := bl.Event()
		if err != nil {
			line.Fields = append(line.Fields, sink.Field{Key: "error", Value: err.Error()})
			m.log.Warn("cannot write the previous run's boot log", "error", err)
		} else {
			m.log.Warn("previous run's evidence written", "path", bl.Path, "same_boot", bl.SameBoot, "last_row", bl.LastRow)
			line.Snapshot = bl.Path // its evidence, under the key every incident line uses
		}
		m.eventLine(line)
	})
}

// missingAtStart raises each board of the previous run not enumerated now
// (missing, from compareInventory; raiseMissing) and, with --expect-gpus,
// a start that enumerated fewer; it returns what the boot log says.
func (m *Monitor) missingAtStart(missing []sink.InventoryChange) []string {
	texts := m.raiseMissing(missing)
	if want, got := m.cfg.ExpectGPUs, m.host.Enumerated(); want > 0 && got < want {
		line := sink.ExpectedEvent(m.start, want, got)
		m.log.Error("fewer GPUs enumerated than expected (--expect-gpus)", "expected", want, "enumerated", got)
		m.eventLine(line)
		texts = append(texts, line.Get("detail"))
		m.states.shortfall.Store(int64(want - got))
	}
	return texts
}

// raiseMissing writes the critical GPU_MISSING line of each missing board
// and adds them to the host view's count (gpu_telemetry_gpus_missing): at
// start, and for boards held back then (a GPU stuck) once every GPU has
// answered without being one of them (lateBoard). It returns the lines'
// details.
func (m *Monitor) raiseMissing(missing []sink.InventoryChange) []string {
	var texts []string
	for _, c := range missing {
		line := c.MissingEvent(m.start)
		m.log.Error("a GPU of the previous run is not enumerated", "detail", line.Get("detail"))
		m.eventLine(line)
		texts = append(texts, line.Get("detail"))
	}
	m.states.boardsMissing.Add(int64(len(missing)))
	return texts
}

// boards are the monitored GPUs' boards, as their static facts name them.
func (m *Monitor) boards() []sink.Board {
	out := make([]sink.Board, 0, len(m.gpus))
	for _, gs := range m.gpus {
		out = append(out, csvColumns(gs.idx, gs.g.Info()).Board)
	}
	return out
}

// recordMaxLinks runs once every GPU has been sampled: each board's
// maximum PCIe link (a reading, not a fact of the start) is compared with
// the previous run's, a change being an INVENTORY change=pcie_max line, and
// written to run-state for the next start.
func (m *Monitor) recordMaxLinks() {
	prev, begun := m.runState.Previous()
	if !begun {
		return
	}
	now := map[string]string{}
	for _, gs := range m.gpus {
		s := gs.slot.Get().Sample
		g, okG := s.Get(reading.PCIeMaxGen)
		w, okW := s.Get(reading.PCIeMaxWidth)
		if uuid := gs.g.Info().UUID; uuid != "" && okG && okW {
			now[uuid] = "gen " + strconv.FormatUint(g, 10) + " x" + strconv.FormatUint(w, 10)
		}
	}
	for _, line := range sink.CompareBoards(time.Now(), sink.InventoryPCIeMax, prev.State.PCIeMax, now, m.boards()) {
		m.eventLine(line)
	}
	err := m.runState.Save(func(s *runstate.State) bool {
		merged := map[string]string{}
		maps.Copy(merged, s.PCIeMax)
		maps.Copy(merged, now)
		s.PCIeMax = merged
		return true
	})
	if err != nil {
		m.log.Warn("cannot record the GPUs' maximum PCIe links in run-state; the next start will not compare them", "error", err)
	}
}

// lateBoard runs once a GPU stuck at start has answered, and again once
// its UUID or bus id, unread until then, is known (lateFacts): its board
// is written to run-state and, when its UUID has just become known
// (identified), compared with the previous run's (INVENTORY: once, and
// not when the start compared it already: hostStates.compared);
// the boards held back at start are raised if it is not one of them, and,
// once every GPU is identified, the boards an earlier run missed
// (missingFromState, which could not tell them at start); before
// startBootCheck, which does all of it for every board known by then,
// nothing.
func (m *Monitor) lateBoard(gs *gpuState, identified bool) {
	prev, begun := m.runState.Previous()
	if !begun {
		return
	}
	b := csvColumns(gs.idx, gs.g.Info()).Board
	boards := m.boards()
	if err := m.runState.Save(func(s *runstate.State) bool {
		s.GPUs, s.VBIOS = boards, m.vbios()
		return true
	}); err != nil {
		m.log.Warn("cannot record the GPU that answered late in run-state; the next start will not compare it", "error", err)
	}
	m.states.mu.Lock()
	compared := m.states.compared[b.UUID]
	if identified && b.UUID != "" && m.states.compared != nil {
		m.states.compared[b.UUID] = true // once
	}
	m.states.mu.Unlock()
	if identified && !compared && b.UUID != "" && prev.State.GPUs != nil {
		m.eventLine(sink.IdentifyLate(prev.State.GPUs, b).Event(time.Now()))
	}
	if missing := m.runState.HeldMissing(boards); len(missing) > 0 {
		for _, c := range missing {
			m.missingBoard(c.Board)
		}
		m.raiseMissing(missing)
	}
	m.missingFromState() // its lines are in events.log, not in the boot log (written from what the start knew)
}

// vbios is each identified GPU's VBIOS version by UUID, for run-state.
func (m *Monitor) vbios() map[string]string {
	out := map[string]string{}
	for _, gs := range m.gpus {
		if in := gs.g.Info(); in.UUID != "" && in.VBIOS != "" {
			out[in.UUID] = in.VBIOS
		}
	}
	return out
}

// compareInventory compares the boards found (those run-state records
// and hostStates.compared names: a GPU identified since is lateBoard's)
// with the previous run's, by UUID: a board missing, new or moved is one
// INVENTORY line each, and one log line sums them up. It returns the
// missing ones.
func (m *Monitor) compareInventory(prev runstate.Previous, found []sink.Board) (missing []sink.InventoryChange) {
	if !prev.Found {
		return nil // the first run here
	}
	if len(prev.State.GPUs) == 0 {
		m.log.Info("the previous run did not record its GPUs (an older version); the GPUs found are not compared with it")
		return nil
	}
	changes := sink.CompareInventory(prev.State.GPUs, found)
	// With --gpu selecting some GPUs, a board of the previous run that the
	// driver still enumerates is only not selected; one it does not is
	// missing, as without --gpu, unless an unselected GPU has no UUID (it
	// may be that board): judged once it has (missingUnselected).
	enumerated, identified := m.enumeratedUUIDs()
	count := map[string]int{}
	var unsure []sink.InventoryChange
	for _, c := range changes {
		if c.Change == sink.InventoryMissing && (enumerated[c.Board.UUID] || !identified) {
			count["not_selected"]++
			if !enumerated[c.Board.UUID] {
				unsure = append(unsure, c)
			}
			continue
		}
		count[c.Change]++
		m.eventLine(c.Event(m.start))
		if c.Change == sink.InventoryMissing && m.judgeMissing(c) {
			missing = append(missing, c)
		}
	}
	m.states.mu.Lock()
	m.states.unsure = unsure
	m.states.mu.Unlock()
	if count["not_selected"] > 0 {
		m.log.Info("boards of the previous run not among the GPUs --gpu selects are not compared", "boards", count["not_selected"])
	}
	if len(changes) == count["not_selected"] {
		m.log.Info("GPU inventory: the same boards as the previous run, at the same indices", "gpus", len(m.gpus))
		return nil
	}
	level := slog.LevelInfo
	if count[sink.InventoryMissing] > 0 {
		level = slog.LevelWarn
	}
	m.log.Log(context.Background(), level, "GPU inventory changed since the previous run (INVENTORY lines in events.log)",
		"missing", count[sink.InventoryMissing], "new", count[sink.InventoryNew], "moved", count[sink.InventoryMoved])
	return missing
}

// judgeMissing takes c, a board of the previous run that no GPU enumerated
// now is, as missing: held back while a monitored GPU has no UUID
// (c.Unidentified: a GPU stuck at start may be this board; raised once
// every GPU has answered without being it: lateBoard), else its repair
// action judged (missingBoard). It reports whether the board is missing now
// (the caller raises it: raiseMissing).
func (m *Monitor) judgeMissing(c sink.InventoryChange) bool {
	if c.Unidentified > 0 {
		m.runState.HoldMissing(c)
		return false
	}
	m.missingBoard(c.Board)
	return true
}

// missingUnselected runs once every GPU --gpu did not select has its UUID
// (runInventory: Host.Reidentify), when one had none at start: the boards
// of the previous run the start could not tell from it (hostStates.unsure)
// that no GPU enumerated now is are missing, as at start (an INVENTORY line
// each; judgeMissing, raiseMissing), and the boards an earlier run missed
// are raised (missingFromState).
func (m *Monitor) missingUnselected() {
	if !m.states.owed.Swap(false) {
		return // judged already
	}
	m.states.mu.Lock()
	unsure := m.states.unsure
	m.states.unsure = nil
	m.states.mu.Unlock()
	enumerated, _ := m.enumeratedUUIDs()
	unidentified := 0 // monitored GPUs with no UUID yet, as sink.CompareInventory counts them
	for _, b := range m.boards() {
		if b.UUID == "" {
			unidentified++
		}
	}
	var missing []sink.InventoryChange
	for _, c := range unsure {
		if enumerated[c.Board.UUID] {
			continue // enumerated, only not selected
		}
		c.Unidentified = unidentified
		m.eventLine(c.Event(time.Now()))
		if m.judgeMissing(c) {
			missing = append(missing, c)
		}
	}
	m.raiseMissing(missing)
	m.missingFromState()
}

// enumeratedUUIDs is the set of UUIDs of every GPU the driver enumerated
// at start, those --gpu did not select included; identified is false when
// an unselected GPU has no UUID (it had not answered), so that a board not
// in the set may still be there.
func (m *Monitor) enumeratedUUIDs() (set map[string]bool, identified bool) {
	set = map[string]bool{}
	all := m.host.EnumeratedUUIDs()
	for _, b := range m.boards() {
		set[b.UUID] = true // a selected GPU identified since Open
	}
	identified = len(all) >= m.host.Enumerated()
	for i, u := range all {
		if u != "" {
			set[u] = true
		} else if m.byIndex[i] == nil { // not selected
			identified = false
		}
	}
	return set, identified
}

// readIdentity names the host: name (--host, else the kernel's hostname),
// machine id (systemd's, else D-Bus's) and boot id, read under root. A name
// that cannot tell hosts apart (localhost, none) is logged.
func readIdentity(name, root string, log *slog.Logger) reading.Identity {
	read := func(p string) string {
		b, err := os.ReadFile(filepath.Join(root, p))
		if err != nil {
			return ""
		}
		return strings.TrimSpace(string(b))
	}
	id := reading.Identity{Host: cmp.Or(name, read("proc/sys/kernel/hostname")),
		MachineID: cmp.Or(read("etc/machine-id"), read("var/lib/dbus/machine-id")),
		BootID:    runstate.ReadBootID(filepath.Join(root, runstate.DefaultBootIDPath))}
	if id.Host == "" && root == "/" {
		id.Host, _ = os.Hostname()
	}
	if id.Host == "" || strings.HasPrefix(id.Host, "localhost") {
		log.Warn("the host's name does not tell it apart from others: set --host", "host", id.Host, "machine_id", id.MachineID)
		if id.Host == "" {
			id.Host = "unknown"
		}
	}
	log.Info("host", "host", id.Host, "machine_id", id.MachineID, "boot_id", id.BootID)
	return id
}
