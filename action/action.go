// Package action names the repair action the logger asks for on a GPU:
// one per GPU, with its reasons, derived from what the logger already
// knows (the driver's recovery action, each Xid's resolution in NVIDIA's
// catalog, the health verdict, a GPU lost or hung) and from the board's
// history across boots. It is a value package, like reading: the status
// document, the metrics, events.log and `gpu-telemetry check` carry its
// values; anomaly derives them (anomaly/repair.go).
package action

import (
	"fmt"
	"slices"
	"strings"
	"sync"
)

// Action is what an operator should do about a GPU. The actions are
// ordered from the least to the most the operator must do: where several
// sources ask for different actions, the greatest wins (a reboot resets
// the GPU too; a power cycle is a reboot that also cuts the power; an RMA
// makes the rest moot).
type Action uint8

// The actions, least first. Their names (String) are the status document's,
// the metrics' action label, events.log's action= and ack's --action.
const (
	None          Action = iota // nothing to do
	Watch                       // no repair, but something to keep an eye on (an application fault, a warning of the health verdict)
	RecoverFabric               // recover the NVLink fabric or IMEX domain the GPU belongs to (NVML recovery action 5)
	ResetGPU                    // reset the GPU (nvidia-smi -r) once its jobs have stopped
	DrainAndReset               // start no new work on the GPU, let its jobs finish, then reset it
	Reboot                      // reboot the node (a warm reboot)
	PowerCycle                  // power the node off, wait, power it on: a cold boot (a warm reboot did not recover the GPU)
	Inspect                     // the hardware is suspect: take the node out and inspect or return the board (RMA)
	NumActions
)

var names = [NumActions]string{
	None: "none", Watch: "watch", RecoverFabric: "recover_fabric", ResetGPU: "reset_gpu",
	DrainAndReset: "drain_and_reset", Reboot: "reboot", PowerCycle: "power_cycle", Inspect: "inspect",
}

// String is the action's name: "none", "watch", "reset_gpu", ... (for an
// action of a newer version, the name it came with).
func (a Action) String() string {
	if n, ok := a.name(); ok {
		return n
	}
	return fmt.Sprintf("action(%d)", uint8(a))
}

func (a Action) name() (string, bool) {
	if a < NumActions {
		return names[a], true
	}
	newer.mu.Lock()
	defer newer.mu.Unlock()
	if i := int(a - firstNewer); a >= firstNewer && i < len(newer.names) {
		return newer.names[i], true
	}
	return "", false
}

// Parse returns the action named s (String's names): this version's
// actions only (what an operator types).
func Parse(s string) (Action, error) {
	for a := range NumActions {
		if names[a] == s {
			return a, nil
		}
	}
	return 0, fmt.Errorf("unknown action %q (one of %s)", s, strings.Join(names[:], ", "))
}

// Actions this version does not know come in documents of a newer one (a
// `gpu-telemetry check` older than the daemon it asks): rather than fail
// the whole document, UnmarshalText gives each such name a value of its own
// from firstNewer on, which String names as it came. A newer action sorts
// above Inspect and Drains: not knowing what it asks, a scheduler should
// take the node out rather than send work to a GPU that needs a repair.
const (
	firstNewer Action = 128
	maxNewer          = 64 // names kept; past them, newerName's value
)

var newer struct {
	mu    sync.Mutex
	names []string
}

// newerName is the value of the action of a newer version named s.
func newerName(s string) (Action, error) {
	if len(s) == 0 || len(s) > 32 || strings.Trim(s, "abcdefghijklmnopqrstuvwxyz0123456789_") != "" {
		return 0, fmt.Errorf("unknown action %q (not an action's name)", s)
	}
	newer.mu.Lock()
	defer newer.mu.Unlock()
	if i := slices.Index(newer.names, s); i >= 0 {
		return firstNewer + Action(i), nil
	}
	if len(newer.names) == maxNewer {
		return 0, fmt.Errorf("unknown action %q (more than %d unknown names)", s, maxNewer)
	}
	newer.names = append(newer.names, s)
	return firstNewer + Action(len(newer.names)-1), nil
}

// Known reports whether the action is one of this version's.
func (a Action) Known() bool { return a < NumActions }

// MarshalText gives the action's name (the status document's form).
func (a Action) MarshalText() ([]byte, error) {
	n, ok := a.name()
	if !ok {
		return nil, fmt.Errorf("action %d out of range", uint8(a))
	}
	return []byte(n), nil
}

// UnmarshalText reads an action's name: one of this version's, or one of a
// newer version's, kept as it came (see firstNewer).
func (a *Action) UnmarshalText(b []byte) error {
	v, err := Parse(string(b))
	if err != nil {
		if v, err = newerName(string(b)); err != nil {
			return err
		}
	}
	*a = v
	return nil
}

// Drains reports whether the action takes the GPU out of service: anything
// beyond Watch needs the GPU's jobs stopped first, so a scheduler should
// give the node no new work (`gpu-telemetry check` reports it as a problem).
// An action of a newer version drains.
func (a Action) Drains() bool { return a > Watch }

// Current is a GPU's current action with its reasons, the one that decided
// it first. Reasons are short phrases ("Xid 79 GPU has fallen off the bus:
// NVIDIA's resolution RESTART_BM"); None has none.
type Current struct {
	Action  Action
	Reasons []string
}

// Reason is the reasons joined for one line (events.log's reason=, a
// scheduler's drain reason): "a; b".
func (c Current) Reason() string { return strings.Join(c.Reasons, "; ") }

// Equal reports whether c and o are the same action for the same reasons.
func (c Current) Equal(o Current) bool {
	return c.Action == o.Action && slices.Equal(c.Reasons, o.Reasons)
}
