package sink

import (
	"strconv"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

// The change= of an INVENTORY line: what became of a board between the
// previous run and this one.
const (
	InventoryMissing = "missing" // the previous run's board is not among this run's GPUs
	InventoryNew     = "new"     // a board the previous run did not have
	InventoryMoved   = "moved"   // the same board at another index or bus id
	// InventoryIdentified: a GPU stuck at start (unidentified when the start
	// compared) answered; the line says which board it is and where the
	// previous run had it (a missing line of the start may be answered).
	InventoryIdentified = "identified"
	// InventoryVBIOS and InventoryDriver: the same board with another
	// VBIOS, the host with another driver, than the previous run (from=,
	// to=): a firmware or driver update, recorded so that a fault that
	// began with it can be told (CompareFirmware).
	InventoryVBIOS  = "vbios"
	InventoryDriver = "driver"
	// InventoryPCIeMax: the same board with another maximum PCIe link
	// (what board and slot allow together, "gen 5 x16") than the previous
	// run: moved to another slot, or a riser or retimer changed.
	InventoryPCIeMax = "pcie_max"
)

// InventoryChange is one difference between the boards the previous run
// monitored and this run's, matched by UUID: GPU indices follow PCI
// enumeration, and move when a board drops out or is added.
type InventoryChange struct {
	Change string // InventoryMissing, InventoryNew or InventoryMoved
	Board  Board  // this run's board; the previous run's when missing
	Prev   Board  // the previous run's, when moved
	// Unidentified is how many of this run's GPUs have no UUID yet (stuck
	// at start): a board said missing may be one of them.
	Unidentified int
}

// CompareInventory returns the changes from the boards prev to cur: each
// board of prev missing from cur, each of cur new, each at another index or
// bus id; in prev's order, then cur's. Boards without a UUID are not
// matched: a GPU stuck at start is unidentified, neither new nor missing.
func CompareInventory(prev, cur []Board) []InventoryChange {
	now := map[string]Board{}
	unidentified := 0
	for _, b := range cur {
		if b.UUID == "" {
			unidentified++
			continue
		}
		now[b.UUID] = b
	}
	var out []InventoryChange
	was := map[string]bool{}
	for _, p := range prev {
		if p.UUID == "" {
			continue
		}
		was[p.UUID] = true
		c, ok := now[p.UUID]
		switch {
		case !ok:
			out = append(out, InventoryChange{Change: InventoryMissing, Board: p, Unidentified: unidentified})
		case c.Index != p.Index || c.Bus != p.Bus:
			out = append(out, InventoryChange{Change: InventoryMoved, Board: c, Prev: p})
		}
	}
	for _, b := range cur {
		if b.UUID != "" && !was[b.UUID] {
			out = append(out, InventoryChange{Change: InventoryNew, Board: b})
		}
	}
	return out
}

// IdentifyLate is the change for board b, of a GPU that answered after the
// start compared the boards: identified, with where prev had it (Prev), or
// new when prev did not have it.
func IdentifyLate(prev []Board, b Board) InventoryChange {
	for _, p := range prev {
		if p.UUID != "" && p.UUID == b.UUID {
			return InventoryChange{Change: InventoryIdentified, Board: b, Prev: p}
		}
	}
	return InventoryChange{Change: InventoryNew, Board: b}
}

// Event is the change's events.log line (type=INVENTORY), at at: a missing
// board names no monitored GPU (gpu=?) and says where it was.
func (c InventoryChange) Event(at time.Time) EventLine {
	b := c.Board
	e := EventLine{Time: at, UUID: b.UUID, GPU: b.Index, Bus: b.Bus, Source: "start", Type: TypeInventory,
		Fields: KV("change", c.Change, "serial", b.Serial, "name", b.Name)}
	switch c.Change {
	case InventoryMissing:
		e.GPU, e.Bus = -1, ""
		e.Fields = append(e.Fields, KV("prev_gpu", strconv.Itoa(b.Index), "prev_bus", b.Bus)...)
		if c.Unidentified > 0 {
			e.Fields = append(e.Fields, Field{"unidentified", strconv.Itoa(c.Unidentified)})
		}
	case InventoryMoved, InventoryIdentified:
		e.Fields = append(e.Fields, KV("prev_gpu", strconv.Itoa(c.Prev.Index), "prev_bus", c.Prev.Bus)...)
	}
	return e
}

// MissingText says where a missing board was: "GPU-... (serial ...) at
// 0000:4b:00.0 missing since this boot" (the kernel's spelling of the bus
// id, as lspci and dmesg write it; unknown parts left out).
func (b Board) MissingText() string {
	s := b.UUID
	if s == "" {
		s = "GPU " + strconv.Itoa(b.Index)
	}
	if b.Serial != "" {
		s += " (serial " + b.Serial + ")"
	}
	if a, err := reading.ParsePCIAddr(b.Bus); err == nil {
		s += " at " + a.String()
	} else if b.Bus != "" {
		s += " at " + b.Bus
	}
	return s + " missing since this boot"
}

// MissingEvent is the critical GPU_MISSING line of a missing board, at at
// (its INVENTORY line says the change; this one pages).
func (c InventoryChange) MissingEvent(at time.Time) EventLine {
	b := c.Board
	return EventLine{Time: at, UUID: b.UUID, GPU: -1, Source: "start", Type: TypeGPUMissing,
		Fields: KV("detail", b.MissingText(), "serial", b.Serial, "prev_gpu", strconv.Itoa(b.Index), "prev_bus", b.Bus)}
}

// ExpectedEvent is the critical GPU_MISSING line at at of a start that
// enumerated fewer GPUs than expected (--expect-gpus): a first boot has no
// previous run to name the missing boards.
func ExpectedEvent(at time.Time, expected, enumerated int) EventLine {
	return EventLine{Time: at, GPU: -1, Source: "start", Type: TypeGPUMissing,
		Fields: KV("detail", strconv.Itoa(expected)+" GPUs expected, "+strconv.Itoa(enumerated)+" enumerated",
			"expected", strconv.Itoa(expected), "enumerated", strconv.Itoa(enumerated))}
}

// CompareFirmware returns the INVENTORY lines, at at, of the driver and each
// board's VBIOS that changed since the previous run: prevDriver and prevVBIOS
// (by UUID) the previous run's, driver and cur this run's boards with their
// VBIOS (vbios by UUID). What either run did not know is not compared.
func CompareFirmware(at time.Time, prevDriver, driver string, prevVBIOS, vbios map[string]string, cur []Board) []EventLine {
	var out []EventLine
	if prevDriver != "" && driver != "" && prevDriver != driver {
		out = append(out, EventLine{Time: at, GPU: -1, Source: "start", Type: TypeInventory,
			Fields: KV("change", InventoryDriver, "from", prevDriver, "to", driver)})
	}
	return append(out, CompareBoards(at, InventoryVBIOS, prevVBIOS, vbios, cur)...)
}

// CompareBoards returns the INVENTORY lines, at at, of change (a fact of a
// board: InventoryVBIOS, InventoryPCIeMax) for each board of cur whose value
// in was (the previous run's, by UUID) differs from now's. What either run
// did not know is not compared.
func CompareBoards(at time.Time, change string, was, now map[string]string, cur []Board) []EventLine {
	var out []EventLine
	for _, b := range cur {
		from, to := was[b.UUID], now[b.UUID]
		if b.UUID == "" || from == "" || to == "" || from == to {
			continue
		}
		out = append(out, EventLine{Time: at, UUID: b.UUID, GPU: b.Index, Bus: b.Bus, Source: "start", Type: TypeInventory,
			Fields: KV("change", change, "serial", b.Serial, "from", from, "to", to)})
	}
	return out
}
