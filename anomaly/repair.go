package anomaly

import (
	"cmp"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/action"
	"github.com/gpu-telemetry/gpu-telemetry/reading"
	"github.com/gpu-telemetry/gpu-telemetry/xid"
)

// A GPU's repair action (package action) is derived here from what the
// logger already knows, each source through one table with the source of
// every row: NVIDIA's Xid catalog's resolution bucket for each Xid report
// (for an Xid without one, what its entry implies) and the driver's
// recovery action (action.XidAction, action.RecoveryAction:
// the crash snapshots read the same table), the health verdict's reasons
// (their Action column in HealthReasonDefs), the retired pages of a GPU
// without row remapping, and the GPU's state (lost, hung, failing). The
// board's history across boots (action.History) escalates a critical class
// seen in enough earlier boots to Inspect, and a board that a warm reboot
// did not bring back after Xid 79 or a recovery action to PowerCycle.

// Thresholds of the repair action.
const (
	// RetiredPagesLimit: DCGM's memory watch fails a GPU with 63 or more
	// pages retired (SBE + DBE; DcgmGPUHardwareLimits.h), a board to return.
	RetiredPagesLimit = 63
	// HungReboot is how long a stuck NVML call lasts before the GPU's action
	// is a reboot: a call past the sample deadline for a second is a slow
	// driver; one stuck for a minute does not come back without a reset of
	// the driver, and a reset needs the driver to answer.
	HungReboot = time.Minute
	// watchHold is how long an Xid that asks only to be watched (an
	// application's fault) keeps the GPU at Watch since it last came: news
	// for an hour, on the monotonic clock (xidCause.age).
	watchHold = time.Hour
)

// Cause is one reason for a GPU's action: its class (what the board's
// history counts and an ack clears: "xid79", "recovery_2", "ecc_dbe",
// "lost"), the action it asks for and its words.
type Cause struct {
	Class  string
	Action action.Action
	Text   string
	// Since is when the condition began, where its source says (a hang:
	// its stuck sample's start); zero: not said. One after the last
	// Judge is a new occurrence of its class, even when the class was
	// active then (a hang that ended and another that began in between):
	// after it on the monotonic clock (sinceMono, RepairInput.Mono's;
	// zero: not read), the wall clock only where one of them was not
	// read on it (Instant.After).
	Since     time.Time
	sinceMono time.Duration
}

// RepairInput is a GPU's current state as the repair action weighs it.
type RepairInput struct {
	Now       time.Time
	Mono      time.Duration // the monotonic clock at Now (zero: not read), the one Repair.Xid's mono is on: an Xid's age (watchHold) runs on it, and the order of this run's hangs, acks and judgements (Instant)
	Health    HealthVerdict
	Vals      *reading.Values // the latest health readings (recovery action, retired pages); nil: none
	Lost      bool            // the driver reports the GPU lost
	Failing   bool            // every call of the last sample failed
	Missing   bool            // the board of the history is not enumerated in this boot
	Answered  bool            // the GPU's last sample was answered
	HungSince time.Time       // the stuck sample's start on the wall clock (zero: not hung): its shown start, what persists (the board's history)
	HungFor   time.Duration   // the hang's age on the monotonic clock, what HungReboot weighs: a step of the wall clock (chrony's makestep) neither ages a hang nor holds its reboot off; Mono less HungFor is its start there, the hang's identity (Cause.Since)
}

// Causes lists what the GPU's current state asks for (not its Xids: Repair
// keeps those), in a fixed order: the state, the recovery action, the
// health reasons in table order, the retired pages.
func Causes(in RepairInput) []Cause {
	var out []Cause
	add := func(class string, a action.Action, text string) {
		out = append(out, Cause{Class: class, Action: a, Text: text})
	}
	hung := func(a action.Action, text string) {
		add(hungClass, a, text)
		out[len(out)-1].Since = in.HungSince
		if in.Mono != 0 {
			out[len(out)-1].sinceMono = in.Mono - in.HungFor
		}
	}
	switch {
	case in.Missing:
		add(missingClass, action.Reboot, "the board is not enumerated")
	case in.Lost:
		add("lost", action.Reboot, "the driver reports the GPU lost") // NVML_ERROR_GPU_IS_LOST: only a reboot brings it back
	case !in.HungSince.IsZero() && in.HungFor >= HungReboot:
		hung(action.Reboot, "an NVML call stuck for "+in.HungFor.Truncate(time.Second).String())
	case !in.HungSince.IsZero():
		hung(action.Watch, "an NVML call stuck past the deadline")
	case in.Failing:
		add("failing", action.ResetGPU, "every NVML call fails")
	}
	if in.Vals != nil {
		if v, ok := in.Vals[reading.HRecoveryAction].Get(); ok && v != 0 {
			add("recovery_"+strconv.FormatUint(v, 10), action.RecoveryAction(v), "the driver's recovery action "+strconv.FormatUint(v, 10)+" ("+reading.RecoveryActionName(v)+")")
		}
	}
	for r := range NumHealthReasons {
		d := &HealthReasonDefs[r]
		if in.Health.Has(r) && d.Action != action.None {
			add(d.Name, d.Action, "health: "+d.Help)
		}
	}
	if in.Vals != nil {
		sbe, sok := in.Vals[reading.HRetiredSBE].Get()
		dbe, dok := in.Vals[reading.HRetiredDBE].Get()
		if sok && dok && sbe+dbe >= RetiredPagesLimit {
			add("retired_pages", action.Inspect, strconv.FormatUint(sbe+dbe, 10)+" pages retired (DCGM fails at "+strconv.Itoa(RetiredPagesLimit)+")")
		} else if p, ok := in.Vals[reading.HRetiredPending].Get(); ok && p != 0 {
			// DCGM warns; the retirement applies when the driver reloads.
			add("retired_pending", action.ResetGPU, "pages wait to be retired at the next GPU reset")
		}
	}
	return out
}

// Repair derives one board's action over time: it keeps the board's Xid
// reports and recovery actions of this boot, and its history across boots
// (which it updates: History says what to write back). Time arrives as a
// value; it does no I/O. Not safe for concurrent use.
type Repair struct {
	boot         string
	inspectAfter int
	hist         action.History
	xids         map[string]xidCause // this boot's Xid causes, by class
	began        map[string]Instant  // when each class last began in this run (Watch classes too); from the history: on the wall clock only
	active       map[string]bool     // the classes of the last Judge
	counted      map[string]bool     // the classes whose current occurrence this boot's history counts
	countedAt    map[string]Instant  // when each class's last occurrence counted in this run began (Absorb records it)
	countedNew   map[string]uint64   // how many occurrences of each class counted in this run began after its source was first read (Absorb adds them where the history knows the class)
	// read: the sources this run's judgements read (early's too: Absorb),
	// first: when each was first read (its Wall zero: not yet). A class
	// found when its source is first read goes on from an earlier run in
	// this boot; one judged absent at a judgement that read it is new when
	// it appears.
	read       [numSources]bool
	first      [numSources]Instant
	lastJudge  Instant             // the last Judge's time
	recovery   reading.Opt[uint64] // the last recovery action an event reported, until the field decides (Judge)
	field      reading.Opt[uint64] // the recovery action field's last reading present (Judge); absent: never read
	fieldAtEv  reading.Opt[uint64] // field when recovery's event came: the event stands while the field is absent or still reads it
	initFailed bool                // RmInitAdapter failed for the board in this boot
	dirty      bool                // hist changed since Dirty was last asked
	last       []Cause

	// ackedGPU: the GPU's action that the last ack in this run of each
	// class acknowledged (what the class asked for then is the history's
	// AckedAs): Absorb weighs a repair acknowledged at less than Inspect
	// against the board's history.
	ackedGPU map[string]action.Action
	// ackedMono: when the last ack of each class was made in this run,
	// on the monotonic clock (Instant.Mono; the history's Acked has it on
	// the wall clock): an occurrence begun in this run is ordered against
	// it there (acked). A class acknowledged in an earlier run has none.
	ackedMono map[string]time.Duration
}

type xidCause struct {
	Cause
	at   time.Time     // when it last came, on the wall clock: the reasons' order, the board's history
	mono time.Duration // the same on the monotonic clock (RepairInput.Mono): its age
	// wallOnly: taken up from the board's history (an earlier run of the
	// logger in this boot), which keeps the wall clock only: a monotonic
	// reading means nothing after a restart, so it ages on the wall clock.
	wallOnly bool
}

// age is how long before in the Xid last came: on the monotonic clock, so
// that a step of the wall clock (chrony's makestep, date -s) neither ends an
// application's Xid's watch at once nor holds it for hours.
func (x xidCause) age(in RepairInput) time.Duration {
	if x.wallOnly {
		return in.Now.Sub(x.at)
	}
	return in.Mono - x.mono
}

// NewRepair starts a board's repair action in boot id from its history (its
// state file; zero: none), escalating a critical class seen in inspectAfter
// earlier boots (0: action.DefaultInspectAfter). The current boot's Xid
// and recovery classes in the history (a restart of the logger in the same
// boot) are taken up again; a boot new to the history is added to it.
func NewRepair(boot string, inspectAfter int, h action.History) *Repair {
	r := &Repair{boot: boot, inspectAfter: cmp.Or(inspectAfter, action.DefaultInspectAfter), hist: cloneHistory(h),
		xids: map[string]xidCause{}, began: map[string]Instant{}, active: map[string]bool{}, counted: map[string]bool{}, countedAt: map[string]Instant{}, countedNew: map[string]uint64{},
		ackedGPU: map[string]action.Action{}, ackedMono: map[string]time.Duration{}}
	// Every boot the board is seen in is recorded, quiet ones too: the
	// warm-reboot check looks at the boot just before this one.
	n := len(r.hist.Boots)
	r.hist.Boot(boot)
	r.dirty = len(r.hist.Boots) != n
	for _, b := range r.hist.Boots {
		if b.BootID != boot {
			continue
		}
		for class, c := range b.Classes {
			r.began[class], r.counted[class] = Instant{Wall: c.Last}, true
			if class == missingClass {
				r.began[class] = Instant{Wall: r.missingSince(c.Last)}
			}
			if code, ok := xidClass(class); ok {
				e := xid.ExplainDetail(code, reading.XidDetail{})
				r.xids[class] = xidCause{Cause: xidCauseOf(e), at: c.Last, wallOnly: true}
			}
		}
	}
	return r
}

// Unacked reports whether class began in this boot (an earlier run of the
// logger counted it in the board's history) and no acknowledgement since
// cleared it.
func (r *Repair) Unacked(class string) bool {
	c, ok := r.hist.Boot(r.boot).Classes[class]
	return ok && c.Count > 0 && !r.hist.IsAcked(class, c.Last)
}

func xidClass(class string) (int, bool) {
	if len(class) < 4 || class[:3] != "xid" {
		return 0, false
	}
	n, err := strconv.Atoi(class[3:])
	return n, err == nil
}

func xidCauseOf(e xid.Explanation) Cause {
	text := "Xid " + strconv.Itoa(e.Code) + " " + e.Name + ": " + action.XidSource(e)
	return Cause{Class: "xid" + strconv.Itoa(e.Code), Action: action.XidAction(e), Text: text}
}

// Xid takes an Xid report at t on the wall clock, mono on the monotonic
// one (RepairInput.Mono's), into the board's causes: a new event, which an
// earlier acknowledgement of its class does not cover.
func (r *Repair) Xid(e xid.Explanation, t time.Time, mono time.Duration) {
	if e.HasRecovery {
		r.Recovery(e.Recovery, t)
	}
	c := xidCauseOf(e)
	if c.Action == action.None {
		return
	}
	r.xids[c.Class] = xidCause{Cause: c, at: t, mono: mono}
	r.begin(c, Instant{t, mono})
}

// Recovery takes a recovery action an event reported (Xid 154's text, an
// NVML event): it decides while the recovery action field is absent or
// still reads what it read when the event came; any other reading of the
// field (its value, or a value after it) replaces it (Judge).
// The events are watched from the run's first judgement: one after it is
// news (Judge), whether the field was read or not.
func (r *Repair) Recovery(v uint64, t time.Time) {
	r.recovery, r.fieldAtEv = reading.Some(v), r.field
	if r.read[srcState] && !r.read[srcRecovery] {
		r.read[srcRecovery], r.first[srcRecovery] = true, r.first[srcState]
	}
}

// InitFailed notes that the driver failed to initialise the board in this
// boot (RmInitAdapter failed).
func (r *Repair) InitFailed() { r.initFailed = true }

// begin records that c began at t: counted in this boot's history (on the
// wall clock) when it asks for a repair. One after the class's last ack on
// the monotonic clock, the wall clock stepped back between them, begins
// after it on the wall clock too (afterAck).
func (r *Repair) begin(c Cause, t Instant) {
	if !r.ackCovers(c.Class, t) {
		t = r.afterAck(c.Class, t)
	}
	r.began[c.Class] = t
	r.counted[c.Class] = c.Action.Drains()
	if c.Action.Drains() {
		r.hist.Count(r.boot, c.Class, t.Wall)
		r.countedAt[c.Class] = t
		if first := r.first[sourceOf(c.Class)]; !first.Wall.IsZero() && t.After(first) { // not one found when its source was first read, nor its reboot later
			r.countedNew[c.Class]++
		}
		r.dirty = true
	}
}

// Judge returns the board's current action, with its reasons, the deciding
// one first.
func (r *Repair) Judge(in RepairInput) action.Current {
	causes := Causes(in)
	if f := in.Vals; f != nil && f[reading.HRecoveryAction].OK {
		r.field = f[reading.HRecoveryAction]
	}
	if f := in.Vals; f != nil && f[reading.HRecoveryAction].OK && (!r.recovery.OK || f[reading.HRecoveryAction] == r.recovery || f[reading.HRecoveryAction] != r.fieldAtEv) {
		// The field reads the event's value, or one other than it read
		// when the event came (it moved on: the event was missed, or
		// replayed out of order), or there is no event: the field decides
		// from now on (a later 0, after a GPU reset, clears the class; a
		// later timeout brings no event back).
		r.recovery = reading.Opt[uint64]{}
	} else if r.recovery.OK {
		// The field not read, or still reading what it read when the event
		// came (a view read before the event, carried by a faster sample):
		// the event stands in for it; no time is compared, so a stale 0
		// never clears it.
		ev := Causes(RepairInput{Vals: &reading.Values{reading.HRecoveryAction: r.recovery}})
		if i := slices.IndexFunc(causes, func(c Cause) bool { return sourceOf(c.Class) == srcRecovery }); i >= 0 {
			causes = slices.Replace(causes, i, i+1, ev...) // in the field's place
		} else {
			causes = append(causes, ev...)
		}
	}
	if b := r.hist.Boot(r.boot); in.Answered && !b.Answered {
		b.Answered, r.dirty = true, true
	}
	if c, ok := r.warmRebootFailed(in); ok {
		causes = append(causes, c)
	}
	shown := in.reads(r.recovery.OK)
	causes = r.goOn(causes, shown)
	// State causes that began since the last Judge are new events: after
	// a Judge that read the class's source (early's too: Absorb), one that
	// was absent, or that began again since. A class already begun in this
	// boot when the logger restarted goes on, also when its source is read
	// only later (no health readings while the GPU was stuck at start).
	now, at := map[string]bool{}, Instant{in.Now, in.Mono}
	for _, c := range causes {
		now[c.Class] = true
		_, known := r.began[c.Class]
		begins := (!r.active[c.Class] || Instant{c.Since, c.sinceMono}.After(r.lastJudge)) && (r.read[sourceOf(c.Class)] || !known || r.active[c.Class])
		if !begins {
			r.ackAsOfOldFile(c) // before ackedBelow: the restart's first judgement already asks for what the ack does not cover
		}
		switch {
		case begins:
			b := at
			if c.Class == missingClass {
				b.Wall = r.missingSince(b.Wall) // an absence that goes on began when it began
			}
			r.begin(c, b)
			r.ackAsOfOldFile(c) // one begun behind an old file's ack: covered at what it asks now, not at its reboot later
		case r.ackedBelow(c):
			// An ack covers the action acknowledged, not a greater one the
			// same occurrence asks for later (a hang acknowledged while it
			// was watch, now past HungReboot; one an earlier run in this
			// boot counted too): the greater begins now, unacknowledged,
			// after the ack also when judged at its time (the judgement
			// right after it, or while the wall clock is behind it: Now
			// never goes back), so that it no longer covers it.
			r.begin(c, r.afterAck(c.Class, at)) // after it on the monotonic clock too: a later judgement
		case c.Action.Drains() && !r.counted[c.Class]:
			// A condition that began as news and now asks for a repair
			// (a hang past HungReboot) is counted once, as of when it
			// began.
			r.begin(c, r.began[c.Class])
		}
	}
	// The Xids in the order they last happened (the reasons' order must
	// not change from one Judge to the next without an event).
	xs := slices.SortedFunc(maps.Values(r.xids), func(a, b xidCause) int {
		return cmp.Or(a.at.Compare(b.at), cmp.Compare(a.Class, b.Class))
	})
	for _, x := range xs {
		if x.Action == action.Watch && x.age(in) >= watchHold {
			continue
		}
		causes = append(causes, x.Cause)
		now[x.Class] = true
	}
	for s, ok := range shown {
		if ok && r.first[s].Wall.IsZero() { // this run's: early's, absorbed
			r.first[s] = at
		}
		r.read[s] = r.read[s] || ok
	}
	r.active, r.lastJudge = now, at
	r.last = causes

	cur := action.Current{}
	type ranked struct {
		a    action.Action
		text string
	}
	var rs []ranked
	for _, c := range causes {
		a, text := c.Action, c.Text
		if r.acked(c.Class) {
			if _, isXid := r.xids[c.Class]; isXid {
				continue // an acknowledged event: gone until it happens again
			}
			a, text = min(a, action.Watch), text+" (acknowledged)"
		} else if a.Drains() {
			if n := r.earlierBoots(c.Class); n >= r.inspectAfter {
				a, text = action.Inspect, text+"; the same in "+strconv.Itoa(n)+" earlier boots"
			}
		}
		if a != action.None {
			rs = append(rs, ranked{a, text})
		}
	}
	slices.SortStableFunc(rs, func(x, y ranked) int { return cmp.Compare(y.a, x.a) })
	for _, x := range rs {
		cur.Action = max(cur.Action, x.a)
		cur.Reasons = append(cur.Reasons, x.text)
	}
	return cur
}

// source is what shows a class of cause to Judge: a class is judged
// absent only where its source is read (absent is not zero): a reading
// missing from one judgement (a field entry that timed out, a failed
// sample) is no absence.
type source uint8

const (
	srcState          source = iota // the GPU's state (lost, hung, failing, missing), its Xids: read at every judgement
	srcRecovery                     // the recovery action: its field, or an event's (Recovery)
	srcRetired                      // the retired pages' counts (retired_pages)
	srcRetiredPending               // the pages waiting to be retired (retired_pending)
	srcHealth                       // health reason 0's readings; reason r's is srcHealth+r (HealthReasonDef.Readings)
	numSources        = srcHealth + source(NumHealthReasons)
)

// sourceOf is the source that shows class (Causes names the classes).
func sourceOf(class string) source {
	if r, ok := ReasonNamed(class); ok {
		return srcHealth + source(r)
	}
	switch {
	case class == "retired_pages":
		return srcRetired
	case class == "retired_pending":
		return srcRetiredPending
	case strings.HasPrefix(class, "recovery_"):
		return srcRecovery
	}
	return srcState
}

// reads reports which sources in reads: those whose readings are present
// (a health reason's: any one of its own, HealthReasonDef.Readings; one
// that names none, any reading of the sample), a health reason also where
// the verdict shows it; event: a recovery action an event reported
// (Recovery) stands in for its field.
func (in RepairInput) reads(event bool) (s [numSources]bool) {
	var v reading.Values
	if in.Vals != nil {
		v = *in.Vals
	}
	present := func(id reading.ID) bool { return v[id].OK }
	s[srcState] = true
	s[srcRecovery] = event || present(reading.HRecoveryAction)
	s[srcRetired] = present(reading.HRetiredSBE) && present(reading.HRetiredDBE)
	s[srcRetiredPending] = present(reading.HRetiredPending)
	sampled := slices.ContainsFunc(v[:], func(c reading.Opt[uint64]) bool { return c.OK })
	for r := range NumHealthReasons {
		ids := HealthReasonDefs[r].Readings
		s[srcHealth+source(r)] = in.Health.Has(r) || len(ids) == 0 && sampled || slices.ContainsFunc(ids, present)
	}
	return s
}

// goOn adds to causes each class of the last Judge that this one finds
// neither present nor absent (its source not read: shown), as it was, in
// its place among them: an absent reading is not an absence, so the class
// goes on through the gap (its ack with it) and is not new when its
// reading is back.
func (r *Repair) goOn(causes []Cause, shown [numSources]bool) []Cause {
	in := func(class string) int {
		return slices.IndexFunc(causes, func(c Cause) bool { return c.Class == class })
	}
	for i, c := range r.last {
		if _, isXid := r.xids[c.Class]; isXid || shown[sourceOf(c.Class)] || in(c.Class) >= 0 {
			continue
		}
		at := 0 // after the one before it at the last Judge
		for j := i - 1; j >= 0 && at == 0; j-- {
			at = in(r.last[j].Class) + 1
		}
		causes = slices.Insert(causes, at, c)
	}
	return causes
}

// missingClass is the class of a board that is not enumerated.
const missingClass = "missing"

// hungClass is the class of a GPU whose NVML call is stuck: the one class
// whose action grows during one occurrence (watch, then reboot).
const hungClass = "hung"

// missingSince is when the board's absence, found at t in this boot, began:
// a board missing in the boots before this one too, without answering in
// any of them, has been gone since the first of those, and each of those
// boots records that time (begin). An acknowledgement made during that
// absence (a board sent back, a slot left empty) holds across the reboots
// it lasts, and those boots do not count towards inspect; once the board
// is enumerated again (a boot without "missing") or answers, a later
// absence is a new event.
func (r *Repair) missingSince(t time.Time) time.Time {
	if r.hist.Boot(r.boot).Answered { // it answered earlier in this boot (the logger restarted since)
		return t
	}
	for _, b := range r.hist.Earlier(r.boot) {
		c, ok := b.Classes[missingClass]
		if b.Answered || !ok || c.Count == 0 {
			break
		}
		t = c.Last
	}
	return t
}

// earlierBoots counts the earlier boots in which class began after the
// last acknowledgement of it.
func (r *Repair) earlierBoots(class string) int {
	n := 0
	for _, b := range r.hist.Earlier(r.boot) {
		if c, ok := b.Classes[class]; ok && c.Count > 0 && !r.hist.IsAcked(class, c.Last) {
			n++
		}
	}
	return n
}

// warmRebootFailed is PowerCycle for a board that did not come back in
// this boot (missing, failing to initialise, lost or failing without
// having answered once) whose previous boot ended in Xid 79 or a recovery
// action that asked for a reset or reboot: a warm reboot does not recover
// some Blackwell GPUs after Xid 79/154, only a cold power cycle does
// (NVIDIA/open-gpu-kernel-modules issues 1353, 1200). A board that
// answered in this boot came back: a new fault is judged as itself.
func (r *Repair) warmRebootFailed(in RepairInput) (Cause, bool) {
	if r.hist.Boot(r.boot).Answered || !in.Missing && !in.Lost && !in.Failing && !r.initFailed {
		return Cause{}, false
	}
	prev := r.hist.Earlier(r.boot)
	if len(prev) == 0 {
		return Cause{}, false
	}
	var what string
	for class, c := range prev[0].Classes {
		if r.hist.IsAcked(class, c.Last) {
			continue
		}
		if class == "xid79" || class == "warm_reboot_failed" {
			what = cmp.Or(what, class)
		} else if v, ok := strings.CutPrefix(class, "recovery_"); ok {
			// Only a recovery action that asked for a reset or a reboot:
			// one the reboot should have done.
			if n, err := strconv.ParseUint(v, 10, 64); err == nil {
				if a := action.RecoveryAction(n); a == action.ResetGPU || a == action.DrainAndReset || a == action.Reboot {
					what = cmp.Or(what, class)
				}
			}
		}
	}
	if what == "" {
		return Cause{}, false
	}
	return Cause{Class: "warm_reboot_failed", Action: action.PowerCycle,
		Text: "warm reboot did not recover it (" + what + " in the previous boot)"}, true
}

// History returns the board's history and whether it changed since the
// last call (then it is to be written).
func (r *Repair) History() (action.History, bool) {
	d := r.dirty
	r.dirty = false
	return cloneHistory(r.hist), d
}

// cloneHistory is a copy of h that shares nothing with it.
func cloneHistory(h action.History) action.History {
	h.Boots = slices.Clone(h.Boots)
	for i := range h.Boots {
		h.Boots[i].Classes = maps.Clone(h.Boots[i].Classes)
	}
	if h.Ack != nil {
		a := *h.Ack
		a.Classes = slices.Clone(a.Classes)
		h.Ack = &a
	}
	h.Acked = maps.Clone(h.Acked)
	h.AckedAs = maps.Clone(h.AckedAs)
	return h
}
