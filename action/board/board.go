// Package board keeps one board's repair action across boots: its judge
// (anomaly.Repair) over the history in the board's state file
// (action-<UUID>.json, file.go), the copies of that history still to
// write, in order, and the acknowledgement of its action. It logs and
// counts nothing and runs no goroutine: monitor decides when to judge and
// which goroutine writes, and routes the lines. It is a package below
// action's directory, not part of action, because anomaly and sink, which
// it uses, import action.
package board

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/action"
	"github.com/gpu-telemetry/gpu-telemetry/anomaly"
)

// Board is a board's repair action and its state file. Its judge is under
// its owner's lock (Repair, Judge, Ack); the file is written outside it
// (Save), by whichever goroutine judged, so that the ACTION line can
// follow the event's own lines: each change of the history is a new
// version (gen), and the writes, one at a time, write a copy only when it
// is newer than the one on disk: an older copy never lands over a newer
// one, and a copy not yet on disk (a write in progress, or one that
// failed) is written at the next Save.
type Board struct {
	r         *anomaly.Repair
	dir, uuid string

	mu   sync.Mutex     // hist, gen
	hist action.History // the newest copy, version gen
	gen  uint64

	write sync.Mutex    // one write at a time
	disk  atomic.Uint64 // the version on disk, stored under write
}

// New returns the board whose history h (Read) is kept in dir, judged in
// boot with --inspect-after-boots inspectAfter (anomaly.NewRepair). With
// h.UUID empty it is a board not identified yet (a GPU stuck at start),
// judged from its state and events alone: it has no file.
func New(dir, boot string, inspectAfter int, h action.History) *Board {
	return &Board{r: anomaly.NewRepair(boot, inspectAfter, h), dir: dir, uuid: h.UUID}
}

// UUID is the board's.
func (b *Board) UUID() string { return b.uuid }

// Repair is the board's judge, for the events it is told of (Xid,
// Recovery, ...). Under the owner's lock.
func (b *Board) Repair() *anomaly.Repair { return b.r }

// Judge judges the board's action (anomaly.Repair.Judge); a change of its
// history is the next copy to write. Under the owner's lock.
func (b *Board) Judge(in anomaly.RepairInput) action.Current {
	cur := b.r.Judge(in)
	if h, dirty := b.r.History(); dirty {
		b.mu.Lock()
		b.hist, b.gen = h, b.gen+1
		b.mu.Unlock()
	}
	return cur
}

// Ack acknowledges cur, the board's action as last judged, at t as an
// operator (by) does with `gpu-telemetry ack`: want must be that action
// (the operator says what they are clearing: an action that changed since
// they looked is refused); who names the board in the error. The next
// Judge takes the ack into the history to write. Under the owner's lock.
func (b *Board) Ack(who string, cur action.Current, want action.Action, t time.Time, by, note string) (action.AckRecord, error) {
	switch {
	case cur.Action != want:
		return action.AckRecord{}, fmt.Errorf("%s's action is %s, not %s", who, cur.Action, want)
	case cur.Action == action.None:
		return action.AckRecord{}, fmt.Errorf("%s has no action to acknowledge", who)
	}
	return b.r.Ack(cur, t, by, note), nil
}

// Save writes the newest copy of the history to the state file unless it
// is on disk already or another Save's write is in progress; it never
// waits for another's write (one stuck in fsync on a stalled disk would
// hold up the sample worker, the kernel log reader and the acks that
// called it). A copy left so, or whose write failed, is written by the
// next Save: its owner calls Save again until Pending is false
// (monitor's judgeActions, once a second). A board whose UUID is not
// known yet has no file (nothing to key one by): Save does nothing.
// Outside the owner's lock: a slow disk holds up no judgement.
func (b *Board) Save() error { return b.save(b.newest()) }

// Pending reports whether the newest copy of the history is not on disk
// yet: a Save left it to a later one, or its write failed.
func (b *Board) Pending() bool {
	_, gen := b.newest()
	return b.uuid != "" && gen > b.disk.Load()
}

// newest is the newest copy of the history and its version.
func (b *Board) newest() (action.History, uint64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.hist, b.gen
}

// save writes h, version gen, unless that version or a newer one is on
// disk (a Save that read its copy before another wrote a newer one writes
// nothing) or another write is in progress (h is left to a later Save).
func (b *Board) save(h action.History, gen uint64) error {
	if b.uuid == "" || gen <= b.disk.Load() {
		return nil
	}
	if !b.write.TryLock() {
		return nil // the sample worker, the kernel reader and the ack never wait on another's write, maybe stuck
	}
	defer b.write.Unlock()
	if gen <= b.disk.Load() {
		return nil
	}
	if err := Write(b.dir, h); err != nil {
		return err
	}
	b.disk.Store(gen)
	return nil
}

// Pick returns the one of uuids that sel names: the whole UUID, or the
// start of only one (case aside, as nvidia-smi prints them).
func Pick(uuids []string, sel string) (string, error) {
	var found []string
	for _, u := range uuids {
		switch {
		case strings.EqualFold(u, sel):
			return u, nil
		case len(sel) >= len("GPU-")+4 && len(u) >= len(sel) && strings.EqualFold(u[:len(sel)], sel):
			found = append(found, u)
		}
	}
	switch len(found) {
	case 0:
		return "", fmt.Errorf("no monitored or missing GPU %q", sel)
	case 1:
		return found[0], nil
	}
	return "", fmt.Errorf("%q is the start of %d GPUs' UUIDs (%s)", sel, len(found), strings.Join(found, ", "))
}
