// Package runstate is the state one run leaves for the next, in two files
// of the log directory, and what the next start makes of it.
//
// run-state is written at start and rewritten while the run goes on:
//   - boot_id, started, pid: which run it was; the next start tells a host
//     that went down (another boot) from a logger that was killed (the same
//     boot), and the boot log names it.
//   - kmsg_seq: the last /dev/kmsg record handed on, so that a restart in the
//     same boot reads the kernel's ring from there: the records logged while
//     no logger ran are not lost, and none is read twice.
//   - board, driver, vbios, pcie_max: the GPUs monitored (by UUID: indices
//     follow PCI enumeration), their firmware and maximum PCIe link, so that
//     the next start says a board missing, new or moved (sink.CompareInventory),
//     a driver or VBIOS update (sink.CompareFirmware), a link that changed.
//   - fan_guard: the fans the fan guard holds, by UUID, so that the next
//     start after a SIGKILL or a crash (or `gpu-telemetry fan-guard
//     release`) hands them back to the firmware first.
//
// clean-stop is written last at a clean shutdown and removed at start: a
// run-state without it is an unclean stop (host hang, power cut, kernel
// panic, SIGKILL, OOM kill), whose evidence the start collects.
package runstate

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/reading"
	"github.com/gpu-telemetry/gpu-telemetry/sink"
)

// The two files, in the log directory.
const (
	File          = "run-state"
	CleanStopFile = "clean-stop"
)

// DefaultBootIDPath is where the kernel gives this boot's random id.
const DefaultBootIDPath = "/proc/sys/kernel/random/boot_id"

// State is what a run records about itself, at start and as it changes;
// the package comment says why each field.
type State struct {
	BootID   string
	Started  time.Time
	PID      int
	KmsgSeq  reading.Opt[uint64] // absent when the kernel log is not read
	GPUs     []sink.Board        // a GPU stuck at start is added once it answers
	Driver   string
	VBIOS    map[string]string // by UUID
	PCIeMax  map[string]string // "gen 5 x16" by UUID, once every GPU has been sampled
	FanGuard []FanHold
}

// FanHold is the fans the fan guard holds on one GPU, by UUID: the index
// can change at the next start.
type FanHold struct {
	UUID string
	Fans []int
}

// fanList is h's fans as run-state writes them: "0,1".
func (h FanHold) fanList() string {
	fans := make([]string, len(h.Fans))
	for i, f := range h.Fans {
		fans[i] = strconv.Itoa(f)
	}
	return strings.Join(fans, ",")
}

// HoldsText says the fans hs hold, for a log line or a message:
// "GPU-a fans 0,1; GPU-b fans 1".
func HoldsText(hs []FanHold) string {
	parts := make([]string, len(hs))
	for i, h := range hs {
		parts[i] = h.UUID + " fans " + h.fanList()
	}
	return strings.Join(parts, "; ")
}

// Previous is what Begin found of the run before this one.
type Previous struct {
	Found bool  // a run-state existed: the logger ran here before
	Clean bool  // and it stopped cleanly
	State State // its run-state (when Found)
}

// Unclean reports whether the previous run ended without a clean stop.
func (p Previous) Unclean() bool { return p.Found && !p.Clean }

// ReadBootID returns this boot's id, or "" when the kernel does not say.
func ReadBootID(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// Begin reads how the previous run in dir ended, removes its clean-stop
// marker and records this run (cur); the start collects the evidence of
// an unclean stop later ((*snapshot.Manager).WriteBootLog). What the
// previous run recorded and this one does not know yet stays recorded
// (carry). An error means this run could not be recorded; prev is still
// valid.
func Begin(dir string, cur State) (prev Previous, err error) {
	prev.State, prev.Found, err = Read(dir)
	if err != nil {
		return prev, err
	}
	cur.carry(prev.State)
	if prev.Found {
		_, serr := os.Stat(filepath.Join(dir, CleanStopFile))
		prev.Clean = serr == nil
	}
	if err := os.Remove(filepath.Join(dir, CleanStopFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return prev, fmt.Errorf("remove %s: %w", CleanStopFile, err)
	}
	// The temp files of these two files' writes that an earlier run left (a
	// clean-stop marker's write abandoned at exit on a stalled disk, a write
	// cut by a crash): no write of this run's is under way yet.
	sink.RemoveTemps(dir, func(name string) bool { return name == File || name == CleanStopFile })
	return prev, Write(dir, cur)
}

// carry keeps in s what the previous run recorded and this run has not
// yet: the fans its fan guard held (a run that crashes before it hands
// them back still leaves them to the next) and the PCIe maxima (known once
// every GPU has been sampled: until then the previous run's stand).
func (s *State) carry(prev State) {
	if s.FanGuard == nil {
		s.FanGuard = prev.FanGuard
	}
	if s.PCIeMax == nil {
		s.PCIeMax = prev.PCIeMax
	}
}

// maxSize bounds what is read of run-state (under 64 KiB with hundreds
// of GPUs), whatever the log directory holds there.
const maxSize = 1 << 20

// Read returns the run-state in dir; found is false when there is
// none. What is not a regular file is an error, never waited on (a FIFO).
func Read(dir string) (s State, found bool, err error) {
	b, err := sink.ReadBounded(sink.OpenRegular, filepath.Join(dir, File), maxSize, false)
	if errors.Is(err, fs.ErrNotExist) {
		return State{}, false, nil
	}
	if err != nil {
		return State{}, false, fmt.Errorf("read %s: %w", File, err)
	}
	return parse(b), true, nil
}

// Write replaces the run-state in dir with s, atomically.
func Write(dir string, s State) error {
	b := fmt.Appendf(nil, "boot_id=%s\nstarted=%s\npid=%d\n", s.BootID, s.Started.Format(time.RFC3339Nano), s.PID)
	if seq, ok := s.KmsgSeq.Get(); ok {
		b = fmt.Appendf(b, "kmsg_seq=%d\n", seq)
	}
	for _, g := range s.GPUs {
		if g.UUID != "" {
			b = fmt.Appendf(b, "board=%s\n", g.Text())
		}
	}
	if s.Driver != "" {
		b = fmt.Appendf(b, "driver=%s\n", s.Driver)
	}
	for _, f := range []struct {
		key  string
		vals map[string]string
	}{{"vbios", s.VBIOS}, {"pcie_max", s.PCIeMax}} {
		for _, uuid := range slices.Sorted(maps.Keys(f.vals)) {
			if v := f.vals[uuid]; uuid != "" && v != "" && !strings.ContainsAny(uuid+v, "\n") {
				b = fmt.Appendf(b, "%s=%s %s\n", f.key, uuid, v)
			}
		}
	}
	for _, h := range s.FanGuard {
		b = fmt.Appendf(b, "fan_guard=%s %s\n", h.UUID, h.fanList())
	}
	return sink.WriteFileAtomic(filepath.Join(dir, File), b, 0o644)
}

// MarkCleanStop writes the clean-stop marker: last at shutdown, after every
// log is flushed and synced.
func MarkCleanStop(dir string, at time.Time) error {
	return sink.WriteFileAtomic(filepath.Join(dir, CleanStopFile), []byte("stopped="+at.Format(time.RFC3339Nano)+"\n"), 0o644)
}

func parse(b []byte) State {
	var s State
	for line := range strings.Lines(string(b)) {
		k, v, ok := strings.Cut(strings.TrimRight(line, "\r\n"), "=")
		if !ok {
			continue
		}
		switch k {
		case "boot_id":
			s.BootID = v
		case "started":
			s.Started, _ = time.Parse(time.RFC3339Nano, v)
		case "pid":
			s.PID, _ = strconv.Atoi(v)
		case "board":
			if g, ok := sink.ParseBoard(v); ok {
				s.GPUs = append(s.GPUs, g)
			}
		case "driver":
			s.Driver = v
		case "vbios", "pcie_max":
			m := &s.VBIOS
			if k == "pcie_max" {
				m = &s.PCIeMax
			}
			if uuid, val, ok := strings.Cut(v, " "); ok && uuid != "" && val != "" {
				if *m == nil {
					*m = map[string]string{}
				}
				(*m)[uuid] = val
			}
		case "fan_guard":
			if h, ok := parseFanHold(v); ok {
				s.FanGuard = append(s.FanGuard, h)
			}
		case "kmsg_seq":
			if seq, err := strconv.ParseUint(v, 10, 64); err == nil {
				s.KmsgSeq = reading.Some(seq)
			}
		}
	}
	return s
}

// parseFanHold reads a fan_guard= line: "<uuid> <fan>,<fan>...".
func parseFanHold(v string) (FanHold, bool) {
	uuid, list, ok := strings.Cut(v, " ")
	if !ok || uuid == "" {
		return FanHold{}, false
	}
	h := FanHold{UUID: uuid}
	for f := range strings.SplitSeq(list, ",") {
		n, err := strconv.Atoi(f)
		if err != nil || n < 0 || n >= reading.MaxFans {
			return FanHold{}, false
		}
		h.Fans = append(h.Fans, n)
	}
	return h, true
}
