package action

import (
	"slices"
	"time"
)

// DefaultInspectAfter is how many earlier boots with the same critical
// class turn it into Inspect: the same fault after two reboots is the
// board's (gpud's default reboot threshold, components/accelerator/nvidia/
// xid/threshold.go; its users ask for it to be configurable: gpud issue 1075).
const DefaultInspectAfter = 2

// MaxBoots is how many boots a board's history keeps, the newest last:
// enough for any sane --inspect-after-boots, small enough to read at start.
const MaxBoots = 16

// History is a board's record across boots, keyed by its UUID: for each
// boot, how many times each critical class began in it; when each class
// was last acknowledged; and the last acknowledgement. It is what the
// board's state file holds (action/board).
type History struct {
	UUID  string      `json:"uuid"`
	Boots []BootCount `json:"boots"` // oldest first, at most MaxBoots
	Ack   *AckRecord  `json:"ack,omitempty"`
	// Acked is when each class was last acknowledged: a later ack of
	// other classes does not undo an earlier one. A state file without it
	// (written before it was kept) has only Ack's.
	Acked map[string]time.Time `json:"acked,omitempty"`
	// AckedAs is what each class in Acked asked for when it was
	// acknowledged: the ack covers that, not a greater action the same
	// occurrence asks for later (a hang acknowledged at watch that asks
	// for a reboot a minute on), across a restart of the logger too. A
	// class without it (a state file written before it was kept) is
	// unknown: anomaly.Repair takes what the class asks when a run first
	// finds it covered, a hang's no more than Ack's action when Ack
	// cleared it.
	AckedAs map[string]Action `json:"acked_as,omitempty"`
}

// BootCount is one boot of a board: the critical classes that began in it.
type BootCount struct {
	BootID  string                `json:"boot_id"`
	Classes map[string]ClassCount `json:"classes"`
	// Answered is set once the board answered in this boot: it came back
	// from the reboot before it, so a fault later in the boot is judged
	// as itself, not as a warm reboot that did not recover it.
	Answered bool `json:"answered,omitempty"`
}

// ClassCount is how often a class began in a boot and when it last did.
type ClassCount struct {
	Count uint64    `json:"count"`
	Last  time.Time `json:"last"`
}

// AckRecord is an operator's acknowledgement: the classes it cleared.
type AckRecord struct {
	Time    time.Time `json:"time"`
	Action  Action    `json:"action"`
	Note    string    `json:"note"`
	By      string    `json:"by"`
	Classes []string  `json:"classes"`
}

// Boot returns the record of boot id, adding it (and dropping the oldest
// past MaxBoots) when there is none.
func (h *History) Boot(id string) *BootCount {
	for i := range h.Boots {
		if h.Boots[i].BootID == id {
			return &h.Boots[i]
		}
	}
	h.Boots = append(h.Boots, BootCount{BootID: id, Classes: map[string]ClassCount{}})
	if n := len(h.Boots) - MaxBoots; n > 0 {
		h.Boots = slices.Delete(h.Boots, 0, n)
	}
	return &h.Boots[len(h.Boots)-1]
}

// Earlier returns the boots before boot id, the newest first.
func (h *History) Earlier(id string) []BootCount {
	var out []BootCount
	for i := len(h.Boots) - 1; i >= 0; i-- {
		if h.Boots[i].BootID != id {
			out = append(out, h.Boots[i])
		}
	}
	return out
}

// Count records that class began in boot id at t.
func (h *History) Count(id, class string, t time.Time) {
	b := h.Boot(id)
	if b.Classes == nil {
		b.Classes = map[string]ClassCount{}
	}
	c := b.Classes[class]
	c.Count++
	c.Last = t
	b.Classes[class] = c
}

// Acknowledge records ack: its classes are cleared as of its time. What
// each asked for then is unknown until the caller records it (AckAs).
func (h *History) Acknowledge(ack AckRecord) {
	if h.Acked == nil {
		h.Acked = map[string]time.Time{}
		if h.Ack != nil { // a state file of before Acked: keep its ack
			for _, c := range h.Ack.Classes {
				h.Acked[c] = h.Ack.Time
			}
		}
	}
	for _, c := range ack.Classes {
		h.Acked[c] = ack.Time
		delete(h.AckedAs, c)
	}
	h.Ack = &ack
}

// AckAs records that class's last acknowledgement covered action a
// (AckedAs).
func (h *History) AckAs(class string, a Action) {
	if h.AckedAs == nil {
		h.AckedAs = map[string]Action{}
	}
	h.AckedAs[class] = a
}

// IsAcked reports whether an acknowledgement cleared class at t or after
// it: an occurrence at t no longer counts.
func (h *History) IsAcked(class string, t time.Time) bool {
	at, ok := h.AckedAt(class)
	return ok && !t.After(at)
}

// AckedAt returns when an acknowledgement last cleared class, if one did.
func (h *History) AckedAt(class string) (time.Time, bool) {
	if at, ok := h.Acked[class]; ok {
		return at, true
	}
	if h.Acked == nil && h.Ack != nil && slices.Contains(h.Ack.Classes, class) {
		return h.Ack.Time, true
	}
	return time.Time{}, false
}
