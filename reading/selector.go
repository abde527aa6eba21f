package reading

import (
	"strconv"
	"strings"
)

// Selector is how an operator names a GPU on a command line (the daemon's,
// probe's and report's --gpu): its index, its UUID or a prefix of it
// (GPU-5a3c1e2f, 5a3c1e2f: the part before the first dash is enough, the
// "GPU-" may be left out, any case; 4 characters at least, so 1 to 3 digits
// are an index and 4 or more a UUID prefix: 12345678 is the board whose file
// is gpu<i>-12345678-deep-...), or its PCI bus id in any spelling
// (NVML's, the kernel's, lspci's; any function of its slot). An index
// names whatever board is at it now; a UUID or bus id names the board.
type Selector struct {
	Text  string // as given
	Index int    // -1 unless the selector is an index
	bus   PCIAddr
	isBus bool
	uuid  string // lower case, with the GPU- prefix
}

// minUUIDPrefix is the shortest UUID prefix taken, after "GPU-": shorter
// ones name too many boards by chance.
const minUUIDPrefix = 4

// ParseSelector reads a selector; ok is false for text that names no GPU
// in any of the ways (a negative index, a UUID prefix under 4 characters).
func ParseSelector(s string) (sel Selector, ok bool) {
	sel = Selector{Text: s, Index: -1}
	if n, err := strconv.Atoi(s); err == nil && len(s) < minUUIDPrefix {
		sel.Index = n
		return sel, n >= 0
	}
	if a, err := ParsePCIAddr(s); err == nil {
		sel.bus, sel.isBus = a, true
	}
	u := strings.ToLower(s)
	if !strings.HasPrefix(u, "gpu-") {
		u = "gpu-" + u
	}
	if len(u)-len("gpu-") >= minUUIDPrefix {
		sel.uuid = u
	}
	return sel, sel.isBus || sel.uuid != ""
}

// IsIndex reports whether the selector is an index.
func (s Selector) IsIndex() bool { return s.Index >= 0 }

// Matches reports whether the board with uuid and bus id bus (NVML's
// spelling; either may be unknown, "") is the one s names by UUID (whole
// or a prefix) or by bus id. An index matches nothing here: compare it
// with the GPU's index.
func (s Selector) Matches(uuid, bus string) bool {
	if s.uuid != "" && uuid != "" && strings.HasPrefix(strings.ToLower(uuid), s.uuid) {
		return true
	}
	if !s.isBus {
		return false
	}
	a, err := ParsePCIAddr(bus)
	return err == nil && a.Slot() == s.bus.Slot()
}

// Exact reports whether s names the board with uuid by its whole UUID:
// a prefix that also names another board is ambiguous unless one is named
// whole.
func (s Selector) Exact(uuid string) bool {
	return s.uuid != "" && strings.EqualFold(uuid, s.uuid)
}
