package monitor

import (
	"cmp"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/action"
	"github.com/gpu-telemetry/gpu-telemetry/action/board"
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

// repairState is a GPU's repair action (board.Board) under its lock: the
// worker (samples), the event goroutines (Xids, recovery actions, kernel
// lines), watchLosses once a second (hangs, expiries) and the control
// socket (acks) judge it.
type repairState struct {
	mu sync.Mutex
	// b is the GPU's board: nil until first judged; one without a UUID
	// while the UUID is not known, its events kept in early (startRepair).
	b     *board.Board
	early earlyEvents
	cur   action.Current
	// When cur became the GPU's action with these reasons, on the wall
	// clock and on Config.mono: an ACTION line's hold is on either (line).
	since     time.Time
	sinceMono time.Duration
	written   action.Current // the last ACTION line's
	judged    time.Time      // when it was last judged (wall)
	hv        *HealthView    // the health view last judged
	// When it was last judged, for judgeActions without the lock (due):
	// in Unix ns, and on Config.mono (ns).
	last, lastMono atomic.Int64
}

// due reports whether judgeEvery has passed since the last judgement on
// either clock: on the wall clock, the one the action's times go by (an
// Xid taken up from the board's history ages on it); on the monotonic one,
// so that the wall clock stepped back (chrony's makestep) does not hold
// judgements off, and a hang's reboot or an application's Xid's expiry
// with them.
func (rs *repairState) due(now time.Time, mono time.Duration) bool {
	return now.UnixNano()-rs.last.Load() >= int64(judgeEvery) || mono-time.Duration(rs.lastMono.Load()) >= judgeEvery
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
// (its worker is stuck) or an application's Xid expires. Each judgement
// saves its board (judged.write), so a GPU's newest copy that a Save left
// to a later one (another write in progress: Save never waits for it) or
// whose write failed is written within a second, without a new event; a
// missing board's is saved here.
func (m *Monitor) judgeActions(now time.Time) {
	mono := m.cfg.mono()
	for _, gs := range m.gpus {
		if gs.repair.due(now, mono) {
			gs.judgeAction(now, false, nil)
		}
	}
	m.states.mu.Lock()
	missing := m.states.missing
	m.states.mu.Unlock()
	for _, b := range missing {
		if b.Pending() {
			m.saveBoard(b.Board, slog.String("uuid", b.UUID()))
		}
	}
}

// judgeAction takes event (nil: none) into the GPU's repair action and
// judges it at now: when it changed, the live view shows it and events.log
// has an ACTION line (repairState.line says when), and a change of the
// board's history is written to its state file. Without
// force, and without a change of the GPU's health view, it judges at most
// every judgeEvery.
func (gs *gpuState) judgeAction(now time.Time, force bool, event func(r repairEvents)) {
	gs.judge(now, force, event).write(gs)
}

// judged is what a judgement leaves to write: the ACTION line and the
// board's history, written after the lines of the event that moved it
// (and, for an incident, once its crash snapshot has the action).
type judged struct {
	line sink.EventLine // Type "": none
	b    *board.Board   // the board whose history to save; nil: not judged
}

// write writes the board's state file, unless the newest copy is on disk
// already, then the ACTION line.
func (j judged) write(gs *gpuState) {
	if j.b != nil {
		gs.m.saveBoard(j.b, slog.Int("gpu", gs.idx))
	}
	if j.line.Type != "" {
		gs.m.eventLine(j.line)
	}
}

// judge is judgeAction but for the writing, which it leaves to the caller.
func (gs *gpuState) judge(now time.Time, force bool, event func(r repairEvents)) (j judged) {
	rs := &gs.repair
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rs.b == nil || rs.b.UUID() == "" {
		gs.startRepair()
	}
	if event != nil {
		event(rs.b.Repair())
		if rs.b.UUID() == "" {
			event(&rs.early) // for its board, once its UUID is known
		}
	}
	if rs.judged.After(now) {
		now = rs.judged // the sources' times interleave (a kernel record read late); the action's go forward
	}
	hv, mono := gs.health.Load(), gs.m.cfg.mono()
	if !force && hv == rs.hv && !rs.due(now, mono) {
		return j
	}
	rs.judged, rs.hv = now, hv
	rs.last.Store(now.UnixNano())
	rs.lastMono.Store(int64(mono))
	in := anomaly.RepairInput{Now: now} // Mono: read under the slot's lock below
	if hv != nil && !hv.At.IsZero() {
		in.Health = hv.Verdict
		vals := reading.Values(hv.Vals)
		in.Vals = &vals
	}
	// A hang's age runs on the monotonic clock from its start there, as the
	// slot shows it (a step of the wall clock neither ages it nor holds it
	// back): Mono less its age is that start, which tells one hang from
	// the next and orders it against an ack; its start on the wall clock is
	// shown. The clock is read under the slot's lock, after the hang it
	// shows was published: read before, a hang published meanwhile would be
	// younger than nothing, and would seem to begin again at the next
	// judgement.
	gs.slot.Update(func(g *live.GPU) {
		in.Mono = gs.m.cfg.mono()
		switch g.State.Kind {
		case live.StateAnswering:
			in.Answered = true
		case live.StateLost:
			in.Lost = true
		case live.StateFailing:
			in.Failing = true
		case live.StateHung:
			in.HungSince, in.HungFor = g.State.Since, g.State.HungFor(in.Mono)
		}
	})
	cur := rs.b.Judge(in)
	j.b = rs.b
	if !cur.Equal(rs.cur) {
		from := rs.cur.Action
		rs.cur, rs.since, rs.sinceMono = cur, now, mono
		gs.slot.Update(func(g *live.GPU) {
			g.Action = cur
			if cur.Action != from {
				g.ActionSince = now
			}
		})
	}
	if rs.line(now, mono) {
		from := rs.written.Action
		rs.written = rs.cur
		j.line = gs.event(now, sink.TypeAction, "action", cur.Action.String(), "from", from.String(), "reason", cur.Reason())
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
// the last one is never written. The hold is judgeEvery on either clock,
// as judgements are due (repairState.due): on the wall clock alone, which
// judge holds at the last judgement's time while it is behind it, a step
// back held every change off until the wall clock caught up.
func (rs *repairState) line(now time.Time, mono time.Duration) bool {
	cur, last := rs.cur, rs.written
	switch {
	case cur.Equal(last):
		return false
	case cur.Action != last.Action && (cur.Action.Drains() || last.Action.Drains()):
		return true
	}
	return now.Sub(rs.since) >= judgeEvery || mono-rs.sinceMono >= judgeEvery
}

// startRepair builds the GPU's repair action from its board's state file
// once its UUID is known. Until then (a GPU stuck at start: a restart in
// the middle of a GSP fault) its action is judged by a board without a
// UUID, from its state and events alone: evidence is kept by UUID, never
// under an index, which the next start may give another board. Once the
// UUID is known, what that board counted in this boot goes into the
// board's history (anomaly.Repair.Absorb) and its events into its judge.
func (gs *gpuState) startRepair() {
	m, rs, uuid := gs.m, &gs.repair, gs.g.Info().UUID
	if uuid == "" {
		if rs.b == nil {
			rs.b = m.newBoard(action.History{})
		}
		return
	}
	early := rs.b
	rs.b = m.openBoard(uuid, gs.log)
	if early != nil {
		if esc := rs.b.Repair().Absorb(early.Repair()); len(esc) > 0 {
			gs.log.Warn("the board's history escalates beyond the action acknowledged before its UUID read; that ack does not cover it", "uuid", uuid, "classes", esc)
		}
	}
	rs.early.replay(rs.b.Repair())
	rs.early = earlyEvents{}
	// An event reason an earlier run raised in this boot and nobody
	// acknowledged holds again, as this boot's Xids do (NewRepair): a
	// restart of the logger does not reset the baseboard.
	for r := range anomaly.NumHealthReasons {
		if anomaly.IsEventReason(r) && rs.b.Repair().Unacked(anomaly.HealthReasonDefs[r].Name) {
			gs.tr.Restore(r)
		}
	}
}

// openBoard opens the repair action of the board with uuid from its state
// file. One that does
// not read (corrupt, another board's, a link) is set aside as evidence,
// counted and logged, and a new history starts: the escalation across
// boots starts over.
func (m *Monitor) openBoard(uuid string, log *slog.Logger) *board.Board {
	h, err := board.Read(m.cfg.LogDir, uuid)
	if err != nil {
		to, aerr := board.SetAside(m.cfg.LogDir, uuid, time.Now())
		m.reg.Add(boardStateSetAside, 1)
		log.Warn("the board's repair history does not read; set aside, starting a new one", "uuid", uuid, "error", err, "set_aside", to, "set_aside_error", aerr)
		h = action.History{UUID: uuid}
	}
	return m.newBoard(h)
}

// newBoard is the board of history h (zero: a board not identified yet,
// which has none) judged in this run's boot (repairBoot). A board's history
// started without the kernel's boot id is counted (repair_boots_unknown):
// once a board, when it is first read (a missing board is read again by
// each missingFromState, and by missingBoard before); a GPU judged before
// its UUID is known has no history yet, and its board's is counted once
// the UUID is.
func (m *Monitor) newBoard(h action.History) *board.Board {
	if m.ident.BootID == "" && h.UUID != "" {
		if _, again := m.states.bootUnknown.LoadOrStore(h.UUID, true); !again {
			lose(m.reg, m.log, bootUnknown, "the boot a board's history counts this run in (no boot id)")
		}
	}
	return board.New(m.cfg.LogDir, m.repairBoot(), m.cfg.InspectAfter, h)
}

// repairEvents are the events a GPU's repair action takes in
// (anomaly.Repair's, and earlyEvents').
type repairEvents interface {
	Xid(e xid.Explanation, t time.Time, mono time.Duration)
	Recovery(v uint64, t time.Time)
	InitFailed()
}

// earlyEvents are the events of a GPU taken in while its UUID was not
// known, for its board's judge once it is: each Xid report with how many
// times it came and when it last did (all that a judge and the board's
// history keep of it), the last recovery action and whether the driver
// failed to initialise the board. Bounded by the kinds of report, not by
// their number.
type earlyEvents struct {
	xids       map[xid.Explanation]earlyXid
	recovery   reading.Opt[uint64]
	recoveryAt time.Time
	initFailed bool
}

type earlyXid struct {
	n    int
	at   time.Time
	mono time.Duration
}

// Xid notes the Xid report e at t (mono on Config.mono).
func (ee *earlyEvents) Xid(e xid.Explanation, t time.Time, mono time.Duration) {
	if ee.xids == nil {
		ee.xids = map[xid.Explanation]earlyXid{}
	}
	x := ee.xids[e]
	x.n++
	if x.n == 1 || mono > x.mono {
		x.mono = mono
	}
	if t.After(x.at) {
		x.at = t
	}
	ee.xids[e] = x
	if e.HasRecovery {
		ee.Recovery(e.Recovery, t)
	}
}

// Recovery notes the recovery action v an event reported at t.
func (ee *earlyEvents) Recovery(v uint64, t time.Time) {
	if !t.Before(ee.recoveryAt) {
		ee.recovery, ee.recoveryAt = reading.Some(v), t
	}
}

// InitFailed notes that the driver failed to initialise the board.
func (ee *earlyEvents) InitFailed() { ee.initFailed = true }

// replay takes the events into r, each Xid report as many times as it
// came, in the order they last came (the newest of a class is the one a
// judge keeps), the recovery action last.
func (ee *earlyEvents) replay(r repairEvents) {
	es := slices.Collect(maps.Keys(ee.xids))
	slices.SortStableFunc(es, func(a, b xid.Explanation) int {
		return cmp.Or(ee.xids[a].at.Compare(ee.xids[b].at), cmp.Compare(a.Code, b.Code))
	})
	for _, e := range es {
		for range ee.xids[e].n {
			r.Xid(e, ee.xids[e].at, ee.xids[e].mono)
		}
	}
	if v, ok := ee.recovery.Get(); ok {
		r.Recovery(v, ee.recoveryAt)
	}
	if ee.initFailed {
		r.InitFailed()
	}
}

// repairBoot is the boot the boards' histories count this run in: the
// kernel's boot id. Without one, this run is a boot of its own (counted,
// newBoard): runs without an id are never merged into one boot, which
// would stop the escalation across boots.
func (m *Monitor) repairBoot() string {
	return cmp.Or(m.ident.BootID, "unknown-"+m.start.UTC().Format("20060102T150405.000000000Z"))
}

// wake takes the GPU's own report (r.Wake: an Xid with its detail d, a
// recovery action, the GPU lost) into its live view and its repair action,
// before the report's crash snapshot is gathered (its header shows the
// action), and has the poll loop sample the GPU at once; what it returns
// is written after the report's own lines.
func (gs *gpuState) wake(r events.Record, d reading.XidDetail) judged {
	gs.nextTry.Store(0)
	switch r.Kind {
	case reading.EventXid:
		gs.slot.Update(func(g *live.GPU) { g.Xid(r.Code, r.At, xid.Name(int(r.Code))) })
		// Its age (an application's Xid is watched for an hour) runs on the
		// monotonic clock from when it happened: a record read after the
		// fact (r.At before r.Seen, both reckoned at its read) is that much
		// older.
		e, mono := xid.ExplainDetail(int(r.Code), d), gs.m.cfg.mono()-max(r.Seen.Sub(r.At), 0)
		return gs.judge(r.At, true, func(rp repairEvents) { rp.Xid(e, r.At, mono) })
	case reading.EventRecovery:
		gs.slot.Update(func(g *live.GPU) { g.Recovery(r.Code, r.At, xid.RecoveryActionName(r.Code)) })
		return gs.judge(r.At, true, func(rp repairEvents) { rp.Recovery(r.Code, r.At) })
	case reading.EventLost:
		gs.slot.Update(func(g *live.GPU) { g.Lost(r.Seen) })
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
}

// Ack acknowledges the current action of the GPU sel names (its index, its
// UUID or the start of it; a GPU whose UUID is not known yet, by its
// index) as an operator (by) does with `gpu-telemetry ack`: want must be that action (the operator says what they are
// clearing: a GPU whose action changed since they looked is refused). It
// writes the ACK line and the board's state file; the action returns to
// none, or watch while a condition still holds, until a new event. A board
// of the previous run that is not enumerated now (host.missing_boards) is
// named by its UUID and acknowledged the same way (ackMissing).
//
// An acknowledgement is done once it holds in the action (the reply says
// the action acknowledged and the action now, not that its file is
// written): it does not wait for the state file, whose write may be stuck
// in fsync behind another (board.Board.Save), and a control client must
// not hang on the disk. The file follows within a second (judgeActions);
// a write that fails is counted in board_state_write_failures and logged,
// and tried again.
func (m *Monitor) Ack(sel string, want action.Action, note, by string) (AckResult, error) {
	var gs *gpuState
	if i, err := strconv.Atoi(sel); err == nil {
		if gs = m.byIndex[i]; gs == nil {
			return AckResult{}, fmt.Errorf("no monitored GPU %q", sel)
		}
	} else {
		var uuids []string
		for _, g := range m.gpus {
			uuids = append(uuids, g.g.Info().UUID)
		}
		m.states.mu.Lock()
		for _, b := range m.states.missing {
			uuids = append(uuids, b.UUID())
		}
		m.states.mu.Unlock()
		uuid, err := board.Pick(uuids, sel)
		if err != nil {
			return AckResult{}, err
		}
		i := slices.Index(uuids, uuid)
		if i >= len(m.gpus) {
			return m.ackMissing(uuid, want, note, by)
		}
		gs = m.gpus[i]
	}
	now := time.Now()
	gs.judgeAction(now, true, nil) // the action as it is now
	rs := &gs.repair
	rs.mu.Lock()
	now = rs.judged // it acknowledges what was judged last
	// A GPU whose UUID is not known yet (stuck at start) is acknowledged by
	// its index, in its judge without a history: its board's history takes
	// the ack once the UUID is known (startRepair: Absorb).
	rec, err := rs.b.Ack("GPU "+strconv.Itoa(gs.idx), rs.cur, want, now, by, note)
	rs.mu.Unlock()
	if err != nil {
		return AckResult{}, err
	}
	// The event reasons the ack covers (nvswitch_fatal) go with the next
	// sample, as an acknowledged Xid goes; one raised since the action was
	// judged is not acknowledged.
	for rs := range anomaly.NumHealthReasons {
		if anomaly.IsEventReason(rs) && slices.Contains(rec.Classes, anomaly.HealthReasonDefs[rs].Name) {
			gs.tr.Clear(rs)
		}
	}
	gs.slot.Update(func(g *live.GPU) {
		g.Ack = live.Ack{Time: rec.Time, Action: rec.Action, Note: rec.Note, By: rec.By}
	})
	m.eventLine(gs.event(now, sink.TypeAck, "action", rec.Action.String(), "by", by, "note", note, "classes", strings.Join(rec.Classes, ",")))
	gs.judgeAction(now, true, nil)
	res := AckResult{GPU: gs.idx, UUID: gs.g.Info().UUID, Acked: rec.Action}
	rs.mu.Lock()
	res.Now = rs.cur
	rs.mu.Unlock()
	return res, nil
}

// ackMissing acknowledges the action of a board of the previous run that
// is not enumerated now, as Ack does a GPU's (board.Missing.Ack): under
// the host's lock, which serialises the acks of missing boards; its state
// file (written as a GPU's, in order and again after a failure) and its
// lines outside it (a slow disk does not hold up status).
func (m *Monitor) ackMissing(uuid string, want action.Action, note, by string) (AckResult, error) {
	m.states.mu.Lock()
	i := slices.IndexFunc(m.states.missing, func(b *board.Missing) bool { return b.UUID() == uuid })
	if i < 0 {
		m.states.mu.Unlock()
		return AckResult{}, fmt.Errorf("no missing board %s", uuid)
	}
	b := m.states.missing[i]
	rec, lines, err := b.Ack(want, time.Now(), by, note)
	res := AckResult{GPU: b.Index, Missing: true, UUID: uuid, Acked: rec.Action, Now: b.Action}
	m.states.mu.Unlock()
	if err != nil {
		return AckResult{}, err
	}
	m.saveBoard(b.Board, slog.String("uuid", uuid))
	for _, l := range lines {
		m.eventLine(l)
	}
	return res, nil
}

// missingBoard judges the repair action of a board of the previous run
// that is not enumerated now, from its state file (board.NewMissing). An
// action other than none is an ACTION line (by the board's UUID and
// previous index) and shows in the host view.
func (m *Monitor) missingBoard(b sink.Board) {
	if b.UUID == "" {
		return
	}
	mb := board.NewMissing(m.openBoard(b.UUID, m.log), b.Index, m.start)
	m.saveBoard(mb.Board, slog.String("uuid", b.UUID))
	if mb.Action.Action != action.None {
		m.addMissing(mb)
	}
}

// addMissing shows the missing board b in the host view, where ackMissing
// finds it, and writes its ACTION line.
func (m *Monitor) addMissing(b *board.Missing) {
	m.states.mu.Lock()
	m.states.missing = append(m.states.missing, b)
	m.states.mu.Unlock()
	m.eventLine(b.Line(m.start))
}

// missingFromState raises the boards that the comparison with the previous
// run cannot see because that run missed them already (a restart in the
// same boot, a power cycle that did not bring them back): every board with
// a state file in the log directory that is not enumerated now keeps its
// action until it is acknowledged, when that action takes it out of
// service, and is a missing board as one missing from the previous run's
// inventory is (its GPU_MISSING line, counted in gpus_missing): a restart
// must not clear the page while the board is still gone. With --gpu
// selecting some GPUs, the boards the driver enumerates but that are not
// selected are not missing; with a GPU not identified yet, the boards not
// seen cannot be told from missing ones: nothing is raised until every GPU
// is (lateBoard calls it again). A board raised is not raised again (it is
// among the host's missing boards), so that no line is doubled. It returns
// the GPU_MISSING lines' details, for the boot log.
func (m *Monitor) missingFromState() (texts []string) {
	seen, identified := m.enumeratedUUIDs()
	if !identified {
		return nil
	}
	if slices.ContainsFunc(m.boards(), func(b sink.Board) bool { return b.UUID == "" }) {
		return nil
	}
	m.states.mu.Lock()
	for _, b := range m.states.missing {
		seen[b.UUID()] = true
	}
	m.states.mu.Unlock()
	for _, uuid := range board.Stored(m.cfg.LogDir) {
		if seen[uuid] {
			continue
		}
		h, err := board.Read(m.cfg.LogDir, uuid)
		if err != nil {
			continue // not a board's (a link, another name): openBoard says why when the board is judged
		}
		mb := board.NewMissing(m.newBoard(h), -1, m.start)
		if !mb.Action.Action.Drains() {
			continue
		}
		m.saveBoard(mb.Board, slog.String("uuid", uuid))
		m.addMissing(mb)
		line := sink.EarlierMissingEvent(m.start, uuid)
		m.log.Error("a GPU an earlier run missed is still not enumerated", "detail", line.Get("detail"))
		m.eventLine(line)
		texts = append(texts, line.Get("detail"))
		m.states.boardsMissing.Add(1)
	}
	return texts
}
