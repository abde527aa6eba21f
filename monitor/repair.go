package monitor

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
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
	mu      sync.Mutex
	r       *anomaly.Repair // nil until the GPU's UUID is known
	cur     action.Current
	since   time.Time      // when cur became the GPU's action with these reasons
	written action.Current // the last ACTION line's
	judged  time.Time      // when it was last judged (wall)
	hv      *HealthView    // the health view last judged
	last    atomic.Int64   // judged, in Unix ns, for judgeActions without the lock
}

var boardStateFails = counters.Declare(counters.Def{Name: "board_state_write_failures", Loss: true, OwnLog: true,
	Help: "writes of a board's state file (action-<UUID>.json: its repair history across boots and its last ack) that failed; the escalation across boots misses what they held"})

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
// judges it at now: when it changed, the live view shows it and events.log
// has an ACTION line (repairState.line says when), and a change of the
// board's history is written to its state file. Without
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
	dirty   bool
}

// write writes the board's state file, then the ACTION line.
func (j judged) write(gs *gpuState) {
	m := gs.m
	if j.dirty {
		if err := sink.WriteBoardState(m.cfg.LogDir, j.hist); err != nil {
			lose(m.reg, m.log, boardStateFails, "a board's state file", slog.Int("gpu", gs.idx), slog.String("error", err.Error()))
		}
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
		case live.StateLost:
			in.Lost = true
		case live.StateFailing:
			in.Failing = true
		case live.StateHung:
			in.HungSince = g.State.Since
		}
	})
	cur := rs.r.Judge(in)
	j.hist, j.dirty = rs.r.History()
	if !cur.Equal(rs.cur) {
		from := rs.cur.Action
		rs.cur, rs.since = cur, now
		gs.slot.Update(func(g *live.GPU) {
			g.Action = cur
			if cur.Action != from {
				g.ActionSince = now
			}
		})
	}
	if rs.line(now) {
		from := rs.written.Action
		rs.written = rs.cur
		j.line, j.hasLine = gs.event(now, sink.TypeAction, "action", cur.Action.String(), "from", from.String(), "reason", cur.Reason()), true
	}
	return j
}

// line reports whether the GPU's action is to be an ACTION line now: every
// change of the action, and of its reasons while the action holds (what a
// scheduler would drain with), once the change has held for a judging
// round, so that a state that comes and goes each sample (a call hung for
// a moment, a reason whose words count the seconds) is not a line each
// time; a change to or from a repair at once (it asks something new of
// someone, and an event's crash snapshot names it). A line the same as
// the last one is never written.
func (rs *repairState) line(now time.Time) bool {
	cur, last := rs.cur, rs.written
	switch {
	case cur.Equal(last):
		return false
	case cur.Action != last.Action && (cur.Action.Drains() || last.Action.Drains()):
		return true
	}
	return now.Sub(rs.since) >= judgeEvery
}

// startRepair builds the GPU's repair action from its board's state file
// once its UUID is known; false while it is not.
func (gs *gpuState) startRepair() bool {
	m, uuid := gs.m, gs.g.Info().UUID
	if uuid == "" {
		return false
	}
	h, err := sink.ReadBoardState(m.cfg.LogDir, uuid)
	if err != nil {
		// A state file that does not read starts a new history: the
		// escalation across boots starts over, which the log says.
		gs.log.Warn("the board's repair history does not read; starting a new one", "error", err)
		h = action.History{UUID: uuid}
	}
	gs.repair.r = anomaly.NewRepair(m.ident.BootID, m.cfg.InspectAfter, h)
	return true
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
	GPU     int  // the GPU's index; a missing board's in the previous run
	Missing bool // the board is not enumerated now (host.missing_boards)
	UUID    string
	Acked   action.Action  // the action acknowledged
	Now     action.Current // the GPU's action after it
	Record  action.AckRecord
}

// Ack acknowledges the current action of the GPU sel names (its index, its
// UUID or the start of it) as an operator (by) does with `gpu-telemetry
// ack`: want must be that action (the operator says what they are
// clearing: a GPU whose action changed since they looked is refused). It
// writes the ACK line and the board's state file; the action returns to
// none, or watch while a condition still holds, until a new event. A board
// of the previous run that is not enumerated now (host.missing_boards) is
// named by its UUID and acknowledged the same way (ackMissing).
func (m *Monitor) Ack(sel string, want action.Action, note, by string) (AckResult, error) {
	var gs *gpuState
	if i, err := strconv.Atoi(sel); err == nil {
		gs = m.byIndex[i]
	} else {
		var uuids []string
		for _, g := range m.gpus {
			uuids = append(uuids, g.g.Info().UUID)
		}
		m.states.mu.Lock()
		for _, b := range m.states.missing {
			uuids = append(uuids, b.UUID)
		}
		m.states.mu.Unlock()
		uuid, err := pickUUID(uuids, sel)
		if err != nil {
			return AckResult{}, err
		}
		for _, g := range m.gpus {
			if g.g.Info().UUID == uuid {
				gs = g
			}
		}
		if gs == nil {
			return m.ackMissing(uuid, want, note, by)
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

// pickUUID returns the one of uuids that sel names: the whole UUID, or
// the start of only one (case aside, as nvidia-smi prints them).
func pickUUID(uuids []string, sel string) (string, error) {
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

// ackMissing acknowledges the action of a board of the previous run that
// is not enumerated now, from its state file, as Ack does a GPU's: the ACK
// line and the ACTION line after it (by its UUID and prev_gpu=), its state
// file, and the action the host view shows.
func (m *Monitor) ackMissing(uuid string, want action.Action, note, by string) (AckResult, error) {
	res, lines, err := m.ackMissingState(uuid, want, note, by)
	for _, l := range lines {
		m.eventLine(l)
	}
	return res, err
}

// ackMissingState is ackMissing under the host's lock, which serialises
// the acks of missing boards (each reads, acknowledges and writes its state
// file); it returns the lines to write (outside the lock: a slow disk does
// not hold up status).
func (m *Monitor) ackMissingState(uuid string, want action.Action, note, by string) (AckResult, []sink.EventLine, error) {
	m.states.mu.Lock()
	defer m.states.mu.Unlock()
	i := slices.IndexFunc(m.states.missing, func(b live.MissingBoard) bool { return b.UUID == uuid })
	if i < 0 {
		return AckResult{}, nil, fmt.Errorf("no missing board %s", uuid)
	}
	b := &m.states.missing[i]
	h, err := sink.ReadBoardState(m.cfg.LogDir, uuid)
	if err != nil {
		return AckResult{}, nil, fmt.Errorf("the missing board %s: %w", uuid, err)
	}
	now := time.Now()
	r := anomaly.NewRepair(m.ident.BootID, m.cfg.InspectAfter, h)
	in := anomaly.RepairInput{Now: now, Missing: true}
	cur := r.Judge(in)
	switch {
	case cur.Action == action.None:
		return AckResult{}, nil, fmt.Errorf("the missing board %s has no action to acknowledge", uuid)
	case cur.Action != want:
		return AckResult{}, nil, fmt.Errorf("the missing board %s's action is %s, not %s", uuid, cur.Action, want)
	}
	rec := r.Ack(cur, now, by, note)
	after := r.Judge(in)
	h, _ = r.History()
	if err := sink.WriteBoardState(m.cfg.LogDir, h); err != nil {
		lose(m.reg, m.log, boardStateFails, "a board's state file", slog.String("uuid", uuid), slog.String("error", err.Error()))
	}
	prev := strconv.Itoa(b.Index)
	lines := []sink.EventLine{{Time: now, UUID: uuid, GPU: -1, Type: sink.TypeAck,
		Fields: sink.KV("prev_gpu", prev, "action", rec.Action.String(), "by", by, "note", note, "classes", strings.Join(rec.Classes, ","))}}
	if !after.Equal(b.Action) {
		lines = append(lines, sink.EventLine{Time: now, UUID: uuid, GPU: -1, Type: sink.TypeAction,
			Fields: sink.KV("prev_gpu", prev, "action", after.Action.String(), "from", b.Action.Action.String(), "reason", after.Reason())})
	}
	b.Action = after
	return AckResult{GPU: b.Index, Missing: true, UUID: uuid, Acked: rec.Action, Now: after, Record: rec}, lines, nil
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
	h, err := sink.ReadBoardState(m.cfg.LogDir, b.UUID)
	if err != nil {
		m.log.Warn("a missing board's repair history does not read", "uuid", b.UUID, "error", err)
		return
	}
	r := anomaly.NewRepair(m.ident.BootID, m.cfg.InspectAfter, h)
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
