package monitor

import (
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
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
	file    boardFile      // the board's state file; its versions under mu
}

// boardFile writes a board's state file in the order of its versions. The
// file is written after the repair's lock is released (the ACTION line
// follows the event's own lines), by whichever goroutine judged: gen
// numbers each change of the history (under the repair's lock), and the
// writes, one at a time (mu), write a copy only when it is newer than the
// one on disk (disk): an older copy never lands over a newer one, and a
// copy not yet on disk is written again at the next judgement.
type boardFile struct {
	gen  uint64
	mu   sync.Mutex
	disk atomic.Uint64
}

// stage takes the history h after a judgement (dirty: it changed) and
// returns the copy still to write with its version; 0: the one on disk is
// the latest. Under the repair's lock.
func (f *boardFile) stage(h action.History, dirty bool) (action.History, uint64) {
	if dirty {
		f.gen++
	}
	if f.gen > f.disk.Load() { // changed, or an earlier write failed
		return h, f.gen
	}
	return action.History{}, 0
}

// pending reports whether a version is not on disk yet. Under the
// repair's lock.
func (f *boardFile) pending() bool { return f.gen > f.disk.Load() }

// write writes h, version gen (0: nothing), unless a newer copy is on disk
// already; a failure is counted and logged (who names the board), and the
// next stage gives the copy again.
func (f *boardFile) write(m *Monitor, h action.History, gen uint64, who slog.Attr) {
	if gen == 0 {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if gen <= f.disk.Load() {
		return
	}
	if err := sink.WriteBoardState(m.cfg.LogDir, h); err != nil {
		lose(m.reg, m.log, boardStateFails, "a board's state file", who, slog.String("error", err.Error()))
		return
	}
	f.disk.Store(gen)
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
// (its worker is stuck) or an application's Xid expires. A missing
// board's state file whose last write failed is written again.
func (m *Monitor) judgeActions(now time.Time) {
	for _, gs := range m.gpus {
		if now.UnixNano()-gs.repair.last.Load() >= int64(judgeEvery) {
			gs.judgeAction(now, false, nil)
		}
	}
	m.states.mu.Lock()
	var retry []*missingBoard
	for _, b := range m.states.missing {
		if b.file.pending() {
			retry = append(retry, b)
		}
	}
	m.states.mu.Unlock()
	for _, b := range retry {
		b.writeState()
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
	gen     uint64 // hist's version (boardFile.gen); 0: nothing to write
}

// write writes the board's state file, unless a newer copy is on disk
// already, then the ACTION line.
func (j judged) write(gs *gpuState) {
	gs.repair.file.write(gs.m, j.hist, j.gen, slog.Int("gpu", gs.idx))
	if j.hasLine {
		gs.m.eventLine(j.line)
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
	j.hist, j.gen = rs.file.stage(rs.r.History())
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
	gs.repair.r = anomaly.NewRepair(m.repairBoot(), m.cfg.InspectAfter, m.readHistory(uuid, gs.log))
	// An event reason an earlier run raised in this boot and nobody
	// acknowledged holds again, as this boot's Xids do (NewRepair): a
	// restart of the logger does not reset the baseboard.
	for rs := range anomaly.NumHealthReasons {
		if anomaly.IsEventReason(rs) && gs.repair.r.Unacked(anomaly.HealthReasonDefs[rs].Name) {
			gs.tr.Restore(rs)
		}
	}
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
			uuids = append(uuids, b.view.UUID)
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

// missingBoard is a board of the previous run that is not enumerated now
// (host.missing_boards): its repair action, judged from its state file at
// start, and that file. Its fields are under the host's lock (hostStates).
type missingBoard struct {
	m    *Monitor
	view live.MissingBoard // what the host view shows
	r    *anomaly.Repair
	file boardFile
	hist action.History // the copy to write, version file.gen
}

// stage takes the board's history after a judgement into the copy to
// write. Under the host's lock.
func (b *missingBoard) stage() {
	if h, gen := b.file.stage(b.r.History()); gen != 0 {
		b.hist = h
	}
}

// writeState writes the board's state file if a version is not on disk,
// as a GPU's is written (boardFile): in order, again after a failure.
func (b *missingBoard) writeState() {
	m := b.m
	m.states.mu.Lock()
	h, gen := b.hist, b.file.gen
	m.states.mu.Unlock()
	b.file.write(m, h, gen, slog.String("uuid", b.view.UUID))
}

// ackMissing acknowledges the action of a board of the previous run that
// is not enumerated now, as Ack does a GPU's: the ACK line and the ACTION
// line after it (by its UUID and prev_gpu=), its state file (written as a
// GPU's, in order and again after a failure), and the action the host view
// shows.
func (m *Monitor) ackMissing(uuid string, want action.Action, note, by string) (AckResult, error) {
	b, res, lines, err := m.ackMissingState(uuid, want, note, by)
	if err != nil {
		return res, err
	}
	b.writeState()
	for _, l := range lines {
		m.eventLine(l)
	}
	return res, nil
}

// ackMissingState is ackMissing under the host's lock, which serialises
// the acks of missing boards; it returns the board and the lines to write
// (outside the lock: a slow disk does not hold up status).
func (m *Monitor) ackMissingState(uuid string, want action.Action, note, by string) (*missingBoard, AckResult, []sink.EventLine, error) {
	m.states.mu.Lock()
	defer m.states.mu.Unlock()
	i := slices.IndexFunc(m.states.missing, func(b *missingBoard) bool { return b.view.UUID == uuid })
	if i < 0 {
		return nil, AckResult{}, nil, fmt.Errorf("no missing board %s", uuid)
	}
	b := m.states.missing[i]
	now := time.Now()
	in := anomaly.RepairInput{Now: now, Missing: true}
	cur := b.r.Judge(in)
	switch {
	case cur.Action == action.None:
		return nil, AckResult{}, nil, fmt.Errorf("the missing board %s has no action to acknowledge", uuid)
	case cur.Action != want:
		return nil, AckResult{}, nil, fmt.Errorf("the missing board %s's action is %s, not %s", uuid, cur.Action, want)
	}
	rec := b.r.Ack(cur, now, by, note)
	after := b.r.Judge(in)
	b.stage()
	prev := strconv.Itoa(b.view.Index)
	lines := []sink.EventLine{{Time: now, UUID: uuid, GPU: -1, Type: sink.TypeAck,
		Fields: sink.KV("prev_gpu", prev, "action", rec.Action.String(), "by", by, "note", note, "classes", strings.Join(rec.Classes, ","))}}
	if !after.Equal(b.view.Action) {
		lines = append(lines, sink.EventLine{Time: now, UUID: uuid, GPU: -1, Type: sink.TypeAction,
			Fields: sink.KV("prev_gpu", prev, "action", after.Action.String(), "from", b.view.Action.Action.String(), "reason", after.Reason())})
	}
	b.view.Action = after
	return b, AckResult{GPU: b.view.Index, Missing: true, UUID: uuid, Acked: rec.Action, Now: after, Record: rec}, lines, nil
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
// board's UUID and previous index) and shows in the host view; it reports
// whether there was one.
func (m *Monitor) missingBoard(b sink.Board) bool {
	if b.UUID == "" {
		return false
	}
	mb := &missingBoard{m: m, view: live.MissingBoard{Index: b.Index, UUID: b.UUID},
		r: anomaly.NewRepair(m.repairBoot(), m.cfg.InspectAfter, m.readHistory(b.UUID, m.log))}
	cur := mb.r.Judge(anomaly.RepairInput{Now: m.start, Missing: true})
	mb.stage() // not shared yet: no lock
	mb.writeState()
	if cur.Action == action.None {
		return false
	}
	mb.view.Action = cur
	m.states.mu.Lock()
	m.states.missing = append(m.states.missing, mb)
	m.states.mu.Unlock()
	m.eventLine(sink.EventLine{Time: m.start, UUID: b.UUID, GPU: -1, Type: sink.TypeAction,
		Fields: sink.KV("prev_gpu", prevIndex(b.Index), "action", cur.Action.String(), "from", action.None.String(), "reason", cur.Reason())})
	return true
}

// prevIndex is a missing board's index in the run that last saw it; "" when
// no run this one can read saw it (missingFromState).
func prevIndex(i int) string {
	if i < 0 {
		return ""
	}
	return strconv.Itoa(i)
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
// seen cannot be told from missing ones: nothing is raised. It returns the
// GPU_MISSING lines' details, for the boot log.
func (m *Monitor) missingFromState() (texts []string) {
	seen, identified := m.enumeratedUUIDs()
	if !identified {
		return nil
	}
	for _, b := range m.boards() {
		if b.UUID == "" {
			return nil
		}
	}
	m.states.mu.Lock()
	for _, b := range m.states.missing {
		seen[b.view.UUID] = true
	}
	m.states.mu.Unlock()
	paths, err := filepath.Glob(filepath.Join(m.cfg.LogDir, "action-*.json"))
	if err != nil {
		return nil
	}
	for _, p := range paths {
		uuid := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(p), "action-"), ".json")
		if seen[uuid] {
			continue
		}
		h, err := sink.ReadBoardState(m.cfg.LogDir, uuid)
		if err != nil {
			continue // not a board's (a link, another name): readHistory says why when the board is judged
		}
		r := anomaly.NewRepair(m.repairBoot(), m.cfg.InspectAfter, h)
		if !r.Judge(anomaly.RepairInput{Now: m.start, Missing: true}).Action.Drains() {
			continue
		}
		if !m.missingBoard(sink.Board{Index: -1, UUID: uuid}) {
			continue
		}
		line := sink.EarlierMissingEvent(m.start, uuid)
		m.log.Error("a GPU an earlier run missed is still not enumerated", "detail", line.Get("detail"))
		m.eventLine(line)
		texts = append(texts, line.Get("detail"))
		m.states.mu.Lock()
		m.states.boardsMissing++
		m.states.mu.Unlock()
	}
	return texts
}
