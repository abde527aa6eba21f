package monitor

import (
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/action"
	"github.com/gpu-telemetry/gpu-telemetry/anomaly"
	"github.com/gpu-telemetry/gpu-telemetry/internal/counters"
	"github.com/gpu-telemetry/gpu-telemetry/internal/events"
	"github.com/gpu-telemetry/gpu-telemetry/live"
	"github.com/gpu-telemetry/gpu-telemetry/reading"
	"github.com/gpu-telemetry/gpu-telemetry/sink"
	"github.com/gpu-telemetry/gpu-telemetry/xid"
)

// judgeEvery is how often a GPU's repair action is judged again without a
// change of its health or state: time alone moves it (a hang that lasts, an
// application's Xid that expires).
const judgeEvery = time.Second

// repairState is a GPU's repair action (anomaly.Repair) under its lock: the
// worker (samples), the event goroutines (Xids, recovery actions, kernel
// lines), watchLosses once a second (hangs, expiries) and the control
// socket (acks) judge it.
type repairState struct {
	mu     sync.Mutex
	r      *anomaly.Repair // nil until the GPU's UUID is known
	cur    action.Current
	judged time.Time    // when it was last judged (wall)
	hv     *HealthView  // the health view last judged
	last   atomic.Int64 // judged, in Unix ns, for judgeActions without the lock
	// The board's state file is written after the lock is released (the
	// ACTION line follows the event's own lines), by whichever goroutine
	// judged: gen numbers each change of the history (under mu), and the
	// writes, one at a time (wmu), write a copy only when it is newer than
	// the one on disk (disk): an older copy never lands over a newer one,
	// and a copy not yet on disk is written again at the next judgement.
	gen  uint64
	wmu  sync.Mutex
	disk atomic.Uint64
}

var (
	boardStateFails = counters.Declare(counters.Def{Name: "board_state_write_failures", Loss: true, OwnLog: true,
		Help: "writes of a board's state file (action-<UUID>.json: its repair history across boots and its last ack) that failed; the escalation across boots misses what they held"})
	boardStateSetAside = counters.Declare(counters.Def{Name: "board_states_set_aside", Loss: true, OwnLog: true,
		Help: "boards' state files that did not read (corrupt, another board's, a link), renamed to action-<UUID>.json.corrupt-<time>; the board's history across boots starts over"})
	bootUnknown = counters.Declare(counters.Def{Name: "repair_boots_unknown", Loss: true, OwnLog: true,
		Help: "boards' repair histories started without the kernel's boot id (it did not read): this run counts as a boot of its own, so a restart of the logger counts as a reboot"})
)

// judgeActions judges the action of every GPU not judged for judgeEvery,
// once a second (watchLosses): time alone moves it while a GPU is hung
// (its worker is stuck) or an application's Xid expires.
func (m *Monitor) judgeActions(now time.Time) {
	for _, gs := range m.gpus {
		if now.UnixNano()-gs.repair.last.Load() >= int64(judgeEvery) {
			gs.judgeAction(now, false, nil)
		}
	}
}

// judgeAction takes event (nil: none) into the GPU's repair action and
// judges it at now: when it changed, the live view shows it; a change of
// the action to or from a repair is an ACTION line in events.log, and a
// change of the board's history is written to its state file. Without
// force, and without a change of the GPU's health view, it judges at most
// every judgeEvery.
func (gs *gpuState) judgeAction(now time.Time, force bool, event func(r *anomaly.Repair)) {
	gs.judge(now, force, event).write(gs)
}

// judged is what a judgement leaves to write: the ACTION line and the
// board's history, written after the lines of the event that moved it
// (and, for an incident, once its crash snapshot has the action).
type judged struct {
	line    sink.EventLine
	hasLine bool
	hist    action.History
	gen     uint64 // hist's version (repairState.gen); 0: nothing to write
}

// write writes the board's state file, unless a newer copy is on disk
// already, then the ACTION line.
func (j judged) write(gs *gpuState) {
	m, rs := gs.m, &gs.repair
	if j.gen != 0 {
		rs.wmu.Lock()
		if j.gen > rs.disk.Load() {
			if err := sink.WriteBoardState(m.cfg.LogDir, j.hist); err != nil {
				lose(m.reg, m.log, boardStateFails, "a board's state file", slog.Int("gpu", gs.idx), slog.String("error", err.Error()))
			} else {
				rs.disk.Store(j.gen)
			}
		}
		rs.wmu.Unlock()
	}
	if j.hasLine {
		m.eventLine(j.line)
	}
}

// judge is judgeAction but for the writing, which it leaves to the caller.
func (gs *gpuState) judge(now time.Time, force bool, event func(r *anomaly.Repair)) (j judged) {
	rs := &gs.repair
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rs.r == nil && !gs.startRepair() {
		return j
	}
	if event != nil {
		event(rs.r)
	}
	now = maxTime(now, rs.judged) // the sources' times interleave (a kernel record read late); the action's go forward
	hv := gs.health.Load()
	if !force && hv == rs.hv && now.Sub(rs.judged) < judgeEvery {
		return j
	}
	rs.judged, rs.hv = now, hv
	rs.last.Store(now.UnixNano())
	in := anomaly.RepairInput{Now: now}
	if hv != nil && !hv.At.IsZero() {
		in.Health = hv.Verdict
		vals := reading.Values(hv.Vals)
		in.Vals = &vals
	}
	gs.slot.Update(func(g *live.GPU) {
		switch g.State.Kind {
		case live.StateAnswering:
			in.Answered = true
		case live.StateLost:
			in.Lost = true
		case live.StateFailing:
			in.Failing = true
		case live.StateHung:
			in.HungSince = g.State.Since
		}
	})
	cur := rs.r.Judge(in)
	h, dirty := rs.r.History()
	if dirty {
		rs.gen++
	}
	if rs.gen > rs.disk.Load() { // changed, or an earlier write failed
		j.hist, j.gen = h, rs.gen
	}
	if cur.Equal(rs.cur) {
		return j
	}
	from := rs.cur.Action
	rs.cur = cur
	gs.slot.Update(func(g *live.GPU) {
		g.Action = cur
		if cur.Action != from {
			g.ActionSince = now
		}
	})
	// A change of the reasons alone, or between none and watch, is not a
	// line: nothing new is asked of anyone (status shows it); every change
	// of the action to or from a repair is.
	if cur.Action != from && (from.Drains() || cur.Action.Drains()) {
		j.line, j.hasLine = gs.event(now, sink.TypeAction, "action", cur.Action.String(), "from", from.String(), "reason", cur.Reason()), true
	}
	return j
}

// startRepair builds the GPU's repair action from its board's state file
// once its UUID is known; false while it is not.
func (gs *gpuState) startRepair() bool {
	m, uuid := gs.m, gs.g.Info().UUID
	if uuid == "" {
		return false
	}
	gs.repair.r = anomaly.NewRepair(m.repairBoot(), m.cfg.InspectAfter, m.readHistory(uuid, gs.log))
	return true
}

// readHistory reads the history of the board with uuid from its state
// file. One that does not read (corrupt, another board's, a link) is set
// aside as evidence, counted and logged, and a new history starts: the
// escalation across boots starts over.
func (m *Monitor) readHistory(uuid string, log *slog.Logger) action.History {
	h, err := sink.ReadBoardState(m.cfg.LogDir, uuid)
	if err == nil {
		return h
	}
	to, aerr := sink.SetAsideBoardState(m.cfg.LogDir, uuid, time.Now())
	m.reg.Add(boardStateSetAside, 1)
	log.Warn("the board's repair history does not read; set aside, starting a new one", "uuid", uuid, "error", err, "set_aside", to, "set_aside_error", aerr)
	return action.History{UUID: uuid}
}

// repairBoot is the boot the boards' histories count this run in: the
// kernel's boot id. Without one, this run is a boot of its own (counted):
// runs without an id are never merged into one boot, which would stop the
// escalation across boots.
func (m *Monitor) repairBoot() string {
	if m.ident.BootID != "" {
		return m.ident.BootID
	}
	lose(m.reg, m.log, bootUnknown, "the boot a board's history counts this run in (no boot id)")
	return "unknown-" + m.start.UTC().Format("20060102T150405.000000000Z")
}

// eventAction takes the GPU's own report (r.Wake: an Xid with its detail
// d, a recovery action, the GPU lost) into its repair action, before the
// report's crash snapshot is gathered (its header shows the action); what
// it returns is written after the report's own lines.
func (gs *gpuState) eventAction(r events.Record, d reading.XidDetail) judged {
	switch r.Kind {
	case reading.EventXid:
		e := xid.ExplainDetail(int(r.Code), d)
		return gs.judge(r.At, true, func(rp *anomaly.Repair) { rp.Xid(e, r.At) })
	case reading.EventRecovery:
		return gs.judge(r.At, true, func(rp *anomaly.Repair) { rp.Recovery(r.Code, r.At) })
	case reading.EventLost:
		return gs.judge(r.Seen, true, nil)
	}
	return judged{}
}

// AckResult is what an acknowledgement did.
type AckResult struct {
	GPU    int
	UUID   string
	Acked  action.Action  // the action acknowledged
	Now    action.Current // the GPU's action after it
	Record action.AckRecord
}

// Ack acknowledges the current action of the GPU sel names (its index or
// UUID) as an operator (by) does with `gpu-telemetry ack`: want must be
// that action (the operator says what they are clearing: a GPU whose
// action changed since they looked is refused). It writes the ACK line and
// the board's state file; the action returns to none, or watch while a
// condition still holds, until a new event.
func (m *Monitor) Ack(sel string, want action.Action, note, by string) (AckResult, error) {
	var gs *gpuState
	if i, err := strconv.Atoi(sel); err == nil {
		gs = m.byIndex[i]
	} else {
		for _, g := range m.gpus {
			if strings.EqualFold(g.g.Info().UUID, sel) {
				gs = g
			}
		}
	}
	if gs == nil {
		return AckResult{}, fmt.Errorf("no monitored GPU %q", sel)
	}
	now := time.Now()
	gs.judgeAction(now, true, nil) // the action as it is now
	rs := &gs.repair
	rs.mu.Lock()
	now = rs.judged // it acknowledges what was judged last
	if rs.r == nil {
		rs.mu.Unlock()
		return AckResult{}, fmt.Errorf("GPU %d: its UUID is not known yet", gs.idx)
	}
	cur := rs.cur
	if cur.Action != want {
		rs.mu.Unlock()
		return AckResult{}, fmt.Errorf("GPU %d's action is %s, not %s", gs.idx, cur.Action, want)
	}
	if cur.Action == action.None {
		rs.mu.Unlock()
		return AckResult{}, errors.New("GPU " + strconv.Itoa(gs.idx) + " has no action to acknowledge")
	}
	rec := rs.r.Ack(cur, now, by, note)
	rs.mu.Unlock()
	gs.slot.Update(func(g *live.GPU) {
		g.Ack = live.Ack{Time: rec.Time, Action: rec.Action, Note: rec.Note, By: rec.By}
	})
	m.eventLine(gs.event(now, sink.TypeAck, "action", rec.Action.String(), "by", by, "note", note, "classes", strings.Join(rec.Classes, ",")))
	gs.judgeAction(now, true, nil)
	res := AckResult{GPU: gs.idx, UUID: gs.g.Info().UUID, Acked: rec.Action, Record: rec}
	rs.mu.Lock()
	res.Now = rs.cur
	rs.mu.Unlock()
	return res, nil
}

// maxTime is the later of a and b.
func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// missingBoard judges the repair action of a board of the previous run
// that is not enumerated now, from its state file: after a boot that ended
// in Xid 79 or a recovery action it is a power cycle (a warm reboot did
// not bring it back). An action other than none is an ACTION line (by the
// board's UUID and previous index) and shows in the host view.
func (m *Monitor) missingBoard(b sink.Board) {
	if b.UUID == "" {
		return
	}
	r := anomaly.NewRepair(m.repairBoot(), m.cfg.InspectAfter, m.readHistory(b.UUID, m.log))
	cur := r.Judge(anomaly.RepairInput{Now: m.start, Missing: true})
	if h, dirty := r.History(); dirty {
		if err := sink.WriteBoardState(m.cfg.LogDir, h); err != nil {
			lose(m.reg, m.log, boardStateFails, "a board's state file", slog.String("uuid", b.UUID), slog.String("error", err.Error()))
		}
	}
	if cur.Action == action.None {
		return
	}
	m.states.mu.Lock()
	m.states.missing = append(m.states.missing, live.MissingBoard{Index: b.Index, UUID: b.UUID, Action: cur})
	m.states.mu.Unlock()
	m.eventLine(sink.EventLine{Time: m.start, UUID: b.UUID, GPU: -1, Type: sink.TypeAction,
		Fields: sink.KV("prev_gpu", strconv.Itoa(b.Index), "action", cur.Action.String(), "from", action.None.String(), "reason", cur.Reason())})
}
