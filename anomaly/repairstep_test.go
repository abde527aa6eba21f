package anomaly

import (
	"strings"
	"testing"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/action"
	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

// hungMono is the input of a GPU judged at now on the wall clock, mono on
// the monotonic one, hung since sinceMono there (hung since since on the
// wall clock, which a step moved), or not hung with since zero.
func hungMono(now time.Time, mono time.Duration, since time.Time, sinceMono time.Duration) RepairInput {
	in := RepairInput{Now: now, Mono: mono, HungSince: since}
	if !since.IsZero() {
		in.HungFor = mono - sinceMono
	}
	return in
}

// wallStep is how the wall clock reads at the judgements after a step
// back of an hour at held: as the monitor gives it (never before its
// last judgement: held there), or as the wall clock reads it.
var wallStep = []struct {
	name string
	now  func(held time.Time, mono time.Duration) time.Time // mono: since the step
}{
	{"held at the last judgement", func(held time.Time, _ time.Duration) time.Time { return held }},
	{"as the wall clock reads", func(held time.Time, mono time.Duration) time.Time { return held.Add(-time.Hour + mono) }},
}

// TestNewHangAfterAWallStepBackIsNew: a hang acknowledged at watch ends,
// the wall clock steps back an hour (chrony's makestep, date -s) and a
// new hang begins. It is a new hang, ordered after the ack on the
// monotonic clock: watch, not acknowledged, then reboot a minute on,
// counted once. On the wall clock it began at the ack's time (the monitor
// holds its judgements there) or before it, and the ack covered it.
func TestNewHangAfterAWallStepBackIsNew(t *testing.T) {
	for _, tc := range wallStep {
		t.Run(tc.name, func(t *testing.T) {
			r := NewRepair("A", 0, action.History{})
			mono0 := 3 * time.Hour // the monotonic clock at t0
			acked := t0.Add(5 * time.Second)
			cur := r.Judge(hungMono(acked, mono0+5*time.Second, t0, mono0))
			if cur.Action != action.Watch {
				t.Fatalf("first hang, briefly: %v %q", cur.Action, cur.Reasons)
			}
			r.Ack(cur, acked, "root", "slow driver, known")
			// The wall clock steps back an hour right after the ack.
			step := mono0 + 5*time.Second
			if cur = r.Judge(hungMono(tc.now(acked, time.Second), step+time.Second, time.Time{}, 0)); cur.Action != action.None {
				t.Fatalf("first hang ended: %v %q, want none", cur.Action, cur.Reasons)
			}
			since, sinceMono := acked.Add(-time.Hour+2*time.Second), step+2*time.Second
			for _, j := range []struct {
				after time.Duration // since the step, on the monotonic clock
				want  action.Action
			}{
				{3 * time.Second, action.Watch},
				{4 * time.Second, action.Watch},
				{2*time.Second + HungReboot, action.Reboot},
				{3*time.Second + HungReboot, action.Reboot},
			} {
				cur = r.Judge(hungMono(tc.now(acked, j.after), step+j.after, since, sinceMono))
				if cur.Action != j.want || strings.Contains(cur.Reason(), "acknowledged") {
					t.Errorf("new hang, %v after the step: %v %q, want %v, not acknowledged", j.after, cur.Action, cur.Reasons, j.want)
				}
			}
			h, _ := r.History()
			if c := h.Boot("A").Classes["hung"]; c.Count != 1 || h.IsAcked("hung", c.Last) {
				t.Errorf("hung counted %+v, acknowledged %v: want the new hang's reboot once, not acknowledged", c, h.IsAcked("hung", c.Last))
			}
		})
	}
}

// TestHangBegunBeforeAWallStepBackIsOneHang: a hang whose stuck sample
// began just before the wall clock stepped back an hour began after every
// judgement since on the wall clock, before them on the monotonic one: it
// is one hang. Acknowledged at watch, it asks for reboot a minute on
// (the ack does not cover it), counted once; on the wall clock it began
// again at each judgement, its reboot acknowledged as it began (held) or
// counted again at each judgement.
func TestHangBegunBeforeAWallStepBackIsOneHang(t *testing.T) {
	for _, tc := range wallStep {
		t.Run(tc.name, func(t *testing.T) {
			r := NewRepair("A", 0, action.History{})
			mono0 := 3 * time.Hour
			if cur := r.Judge(hungMono(t0, mono0, time.Time{}, 0)); cur.Action != action.None {
				t.Fatalf("before the hang: %v %q", cur.Action, cur.Reasons)
			}
			// The stuck sample begins; the wall clock steps back an hour
			// before the next judgement.
			since, sinceMono := t0.Add(500*time.Millisecond), mono0+500*time.Millisecond
			step := sinceMono
			judge := func(after time.Duration) action.Current {
				return r.Judge(hungMono(tc.now(t0, after), step+after, since, sinceMono))
			}
			for _, after := range []time.Duration{time.Second, 2 * time.Second} {
				if cur := judge(after); cur.Action != action.Watch {
					t.Fatalf("hung %v: %v %q, want watch", after, cur.Action, cur.Reasons)
				}
			}
			r.Ack(r.Judge(hungMono(tc.now(t0, 3*time.Second), step+3*time.Second, since, sinceMono)), tc.now(t0, 3*time.Second), "root", "slow driver, known")
			if cur := judge(4 * time.Second); cur.Action != action.Watch || !strings.Contains(cur.Reason(), "acknowledged") {
				t.Errorf("after the ack at watch: %v %q, want watch (acknowledged)", cur.Action, cur.Reasons)
			}
			for i := range 3 {
				after := HungReboot + time.Duration(i)*time.Second
				if cur := judge(after); cur.Action != action.Reboot || strings.Contains(cur.Reason(), "acknowledged") {
					t.Errorf("hung %v: %v %q, want reboot, not acknowledged", after, cur.Action, cur.Reasons)
				}
			}
			h, _ := r.History()
			if c := h.Boot("A").Classes["hung"]; c.Count != 1 || h.IsAcked("hung", c.Last) {
				t.Errorf("hung counted %+v, acknowledged %v: want once, not acknowledged", c, h.IsAcked("hung", c.Last))
			}
		})
	}
}

// TestAbsorbCountsAHangBegunAfterAWallStepBack: this boot's history
// holds a hang an earlier run of the logger counted and acknowledged. The
// UUID reads late: the wall clock stepped back an hour after the judge
// without it (early) first judged, and a new hang reached reboot there.
// Absorb counts it (it began after early's first judgement on the
// monotonic clock, however the wall clock reads), recorded after the
// earlier run's ack, which does not cover it: counted twice in all, not
// acknowledged, also after a restart.
func TestAbsorbCountsAHangBegunAfterAWallStepBack(t *testing.T) {
	var h action.History
	h.UUID = "GPU-x"
	h.Count("A", "hung", t0)
	h.Acknowledge(action.AckRecord{Time: t0.Add(time.Second), Action: action.Reboot, Classes: []string{"hung"}})
	h.AckAs("hung", action.Reboot)
	first := t0.Add(10 * time.Minute)
	mono0 := 3 * time.Hour
	early := NewRepair("A", 0, action.History{})
	early.Judge(RepairInput{Now: first, Mono: mono0, Answered: true})
	since, sinceMono := first.Add(-time.Hour+time.Second), mono0+time.Second // after the step back
	for _, after := range []time.Duration{2 * time.Second, HungReboot + 2*time.Second} {
		early.Judge(hungMono(first.Add(-time.Hour+after), mono0+after, since, sinceMono))
	}
	r := NewRepair("A", 0, h)
	r.Absorb(early)
	got, _ := r.History()
	if c := got.Boot("A").Classes["hung"]; c.Count != 2 || got.IsAcked("hung", c.Last) {
		t.Errorf("hung counted %+v, acknowledged %v: want the earlier run's and the new hang, not acknowledged", c, got.IsAcked("hung", c.Last))
	}
	after := HungReboot + 3*time.Second
	if cur := r.Judge(hungMono(first.Add(-time.Hour+after), mono0+after, since, sinceMono)); cur.Action != action.Reboot || strings.Contains(cur.Reason(), "acknowledged") {
		t.Errorf("the board: %v %q, want reboot, not acknowledged", cur.Action, cur.Reasons)
	}
}

// TestAbsorbCarriesAnAckThroughAWallStepBack: a hang acknowledged at
// watch by index (early) before the UUID reads; then the wall clock steps
// back an hour and a new hang begins. The ack, the board's now, is
// ordered on the monotonic clock: the new hang is not covered by it.
func TestAbsorbCarriesAnAckThroughAWallStepBack(t *testing.T) {
	early := NewRepair("A", 0, action.History{})
	mono0 := 3 * time.Hour
	acked := t0.Add(5 * time.Second)
	early.Ack(early.Judge(hungMono(acked, mono0+5*time.Second, t0, mono0)), acked, "root", "")
	r := NewRepair("A", 0, action.History{UUID: "GPU-x"})
	r.Absorb(early)
	step := mono0 + 5*time.Second
	r.Judge(hungMono(acked, step+time.Second, time.Time{}, 0)) // held at the ack's time; the hang ended
	since, sinceMono := acked.Add(-time.Hour+2*time.Second), step+2*time.Second
	if cur := r.Judge(hungMono(acked, step+3*time.Second, since, sinceMono)); strings.Contains(cur.Reason(), "acknowledged") {
		t.Errorf("new hang after absorb and step: %v %q, want not acknowledged", cur.Action, cur.Reasons)
	}
	cur := r.Judge(hungMono(acked, step+2*time.Second+HungReboot, since, sinceMono))
	h, _ := r.History()
	if c := h.Boot("A").Classes["hung"]; cur.Action != action.Reboot || strings.Contains(cur.Reason(), "acknowledged") || c.Count != 1 {
		t.Errorf("reboot: %v %q count %+v", cur.Action, cur.Reasons, c)
	}
}

// TestAbsorbKeepsAnAckOfAHangBegunInThisRun: a hang begun after the first
// judgement of the judge without the UUID (early), acknowledged at watch
// there, goes on when the UUID reads: the ack is of this run, not an
// earlier one (which every occurrence begun since the first judgement is
// after), and still covers it.
func TestAbsorbKeepsAnAckOfAHangBegunInThisRun(t *testing.T) {
	early := NewRepair("A", 0, action.History{})
	mono0 := 3 * time.Hour
	early.Judge(RepairInput{Now: t0, Mono: mono0, Answered: true})
	since, sinceMono := t0.Add(time.Second), mono0+time.Second
	at := func(d time.Duration) RepairInput { return hungMono(t0.Add(d), mono0+d, since, sinceMono) }
	early.Ack(early.Judge(at(3*time.Second)), t0.Add(3*time.Second), "root", "slow driver, known")
	r := NewRepair("A", 0, action.History{UUID: "GPU-x"})
	r.Absorb(early)
	if cur := r.Judge(at(4 * time.Second)); cur.Action != action.Watch || !strings.Contains(cur.Reason(), "acknowledged") {
		t.Errorf("the board, the hang going on: %v %q, want watch (acknowledged)", cur.Action, cur.Reasons)
	}
}

// TestNewHangAfterAWallStepBackIsAfterAnEarlierRunsAck: an earlier run of
// the logger in this boot acknowledged a hang's reboot; in this run the
// wall clock steps back an hour after the first judgement, behind that
// ack, and a new hang begins. Begun after this run's first judgement, it
// is after every ack of an earlier run: reboot a minute on, not
// acknowledged, counted, recorded after the ack (a restart does not find
// it covered).
func TestNewHangAfterAWallStepBackIsAfterAnEarlierRunsAck(t *testing.T) {
	var h action.History
	h.Count("A", "hung", t0)
	h.Acknowledge(action.AckRecord{Time: t0.Add(time.Second), Action: action.Reboot, Classes: []string{"hung"}})
	h.AckAs("hung", action.Reboot)
	first := t0.Add(10 * time.Minute)
	mono0 := 3 * time.Hour
	r := NewRepair("A", 0, h)
	r.Judge(RepairInput{Now: first, Mono: mono0, Answered: true})
	since, sinceMono := first.Add(-time.Hour+time.Second), mono0+time.Second
	for _, j := range []struct {
		after time.Duration
		want  action.Action
	}{{2 * time.Second, action.Watch}, {HungReboot + 2*time.Second, action.Reboot}} {
		if cur := r.Judge(hungMono(first.Add(-time.Hour+j.after), mono0+j.after, since, sinceMono)); cur.Action != j.want || strings.Contains(cur.Reason(), "acknowledged") {
			t.Errorf("new hang, %v after the step: %v %q, want %v, not acknowledged", j.after, cur.Action, cur.Reasons, j.want)
		}
	}
	got, _ := r.History()
	if c := got.Boot("A").Classes["hung"]; c.Count != 2 || got.IsAcked("hung", c.Last) {
		t.Errorf("hung counted %+v, acknowledged %v: want the new hang counted, not acknowledged", c, got.IsAcked("hung", c.Last))
	}
}

// TestAbsorbCountsWhatItsLastCountBegan: Absorb tells a class's counts
// that began in this run from one that goes on from an earlier run by
// when each of early's counts of it began (on the monotonic clock), not by
// when its current occurrence began: a hang the earlier run counted,
// going on at early's first judgement at reboot, then another at watch,
// is counted once (the earlier run's); a hang begun after early's first
// judgement, the wall clock stepped back behind it, that reached reboot
// and ended before another at watch, is counted.
func TestAbsorbCountsWhatItsLastCountBegan(t *testing.T) {
	first, mono0 := t0.Add(10*time.Minute), 3*time.Hour
	for _, tc := range []struct {
		name   string
		judge  []RepairInput // of early, after its first judgement, at first and mono0, of nothing
		want   uint64
		source string
	}{
		{"the earlier run's hang at reboot, then one at watch", []RepairInput{
			hungMono(first, mono0, first.Add(-2*time.Minute), mono0-2*time.Minute),
			hungMono(first.Add(time.Second), mono0+time.Second, time.Time{}, 0),
			hungMono(first.Add(3*time.Second), mono0+3*time.Second, first.Add(2*time.Second), mono0+2*time.Second),
		}, 1, "the earlier run counted the hang that goes on; the one at watch is not counted yet"},
		{"a hang at reboot after a step back, then one at watch", []RepairInput{
			{Now: first, Mono: mono0, Answered: true},
			hungMono(first.Add(-time.Hour+2*time.Second), mono0+2*time.Second, first.Add(-time.Hour+time.Second), mono0+time.Second),
			hungMono(first.Add(-time.Hour+HungReboot+2*time.Second), mono0+HungReboot+2*time.Second, first.Add(-time.Hour+time.Second), mono0+time.Second),
			hungMono(first.Add(-time.Hour+HungReboot+3*time.Second), mono0+HungReboot+3*time.Second, time.Time{}, 0),
			hungMono(first.Add(-time.Hour+HungReboot+5*time.Second), mono0+HungReboot+5*time.Second, first.Add(-time.Hour+HungReboot+4*time.Second), mono0+HungReboot+4*time.Second),
		}, 2, "the earlier run's hang and the one that reached reboot in this run"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := action.History{UUID: "GPU-x"}
			h.Count("A", "hung", t0) // an earlier run of the logger in this boot
			early := NewRepair("A", 0, action.History{})
			for _, in := range tc.judge {
				early.Judge(in)
			}
			r := NewRepair("A", 0, h)
			r.Absorb(early)
			got, _ := r.History()
			if c := got.Boot("A").Classes["hung"]; c.Count != tc.want {
				t.Errorf("hung counted %+v, want %d: %s", c, tc.want, tc.source)
			}
		})
	}
}

// absorbClock is the Absorb tests' clock: at(d) is the wall and monotonic
// time d after the first judgement (ten minutes after t0, 3 h monotonic);
// state(set)(d) is the input at(d) that set fills in.
func absorbClock() (at func(time.Duration) (time.Time, time.Duration), state func(set func(*RepairInput)) func(time.Duration) RepairInput) {
	first, mono0 := t0.Add(10*time.Minute), 3*time.Hour
	at = func(d time.Duration) (time.Time, time.Duration) { return first.Add(d), mono0 + d }
	state = func(set func(*RepairInput)) func(time.Duration) RepairInput {
		return func(d time.Duration) RepairInput {
			now, m := at(d)
			in := RepairInput{Now: now, Mono: m}
			set(&in)
			return in
		}
	}
	return at, state
}

// TestAbsorbCountsEachOccurrenceOnce: this boot's history holds a class an
// earlier run of the logger counted; the judge without the UUID (early)
// finds it going on at its first judgement and counts it (it has no
// history; a hang at watch then, once it reaches its reboot), the class
// ends, and a new occurrence begins and is counted. Absorb counts the new
// one for the board, not the earlier run's again: two in all, whatever
// the class (a hang, lost, every call failing, a recovery action, a
// health reason); and the board's own judgement of the new one going on
// counts nothing more.
func TestAbsorbCountsEachOccurrenceOnce(t *testing.T) {
	at, state := absorbClock()
	// hang: the earlier run's hang, stuck since old before the first
	// judgement, until ends after it; a new one from a second after that.
	hang := func(old, ends time.Duration) func(time.Duration) RepairInput {
		return func(d time.Duration) RepairInput {
			now, m := at(d)
			if d < ends {
				since, sinceMono := at(-old)
				return hungMono(now, m, since, sinceMono)
			}
			since, sinceMono := at(ends + time.Second)
			return hungMono(now, m, since, sinceMono)
		}
	}
	for _, tc := range []struct {
		name, class string
		on          func(d time.Duration) RepairInput // the class's state d after the first judgement
		ends        time.Duration                     // when the earlier run's occurrence ends (a second later the new one begins)
	}{
		{"a hang at reboot", "hung", hang(2*time.Minute, time.Second), time.Second},
		{"a hang at watch, then its reboot", "hung", hang(2*time.Second, HungReboot+time.Second), HungReboot + time.Second},
		{"lost", "lost", state(func(in *RepairInput) { in.Lost = true }), time.Second},
		{"failing", "failing", state(func(in *RepairInput) { in.Failing = true }), time.Second},
		{"a recovery action", "recovery_2", state(func(in *RepairInput) { in.Vals = vals(uint64(reading.HRecoveryAction), 2) }), time.Second},
		{"a health reason", "ecc_dbe", state(func(in *RepairInput) { in.Health = verdict(ReasonDBE) }), time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := action.History{UUID: "GPU-x"}
			h.Count("A", tc.class, t0) // an earlier run of the logger in this boot
			early := NewRepair("A", 0, action.History{})
			now, m := at(tc.ends)
			late := tc.ends + HungReboot + 2*time.Second // the new occurrence asks for its repair (a hang: its reboot)
			for _, in := range []RepairInput{tc.on(0), tc.on(tc.ends - time.Second), {Now: now, Mono: m, Answered: true, Vals: vals(uint64(reading.HRecoveryAction), 0, uint64(reading.HDBEVolatile), 0)}, tc.on(tc.ends + time.Second), tc.on(late)} {
				early.Judge(in)
			}
			if c := early.hist.Boot("A").Classes[tc.class]; c.Count != 2 {
				t.Fatalf("early counted %+v, want the one going on at its first judgement and the new one", c)
			}
			r := NewRepair("A", 0, h)
			r.Absorb(early)
			r.Judge(tc.on(late + time.Second))
			got, _ := r.History()
			if c := got.Boot("A").Classes[tc.class]; c.Count != 2 {
				t.Errorf("%s counted %+v, want 2: the earlier run's occurrence (early found it going on) once, and the new one", tc.class, c)
			}
		})
	}
}

// TestAbsorbCountsWhatBeganBeforeTheBoardsFirstJudgement: an earlier run
// of the logger in this boot counted a class and acknowledged it; this
// run judges the GPU by index twice without it (its source read: the
// health readings there), then it begins again and
// the UUID reads. The board's first judgement (right after Absorb) finds
// a new occurrence, as the board itself would have judged it: counted,
// not covered by the earlier run's ack (a hang: watch, then reboot a
// minute on). Absorb without early's judgements took it for the one the
// earlier run counted, going on: acknowledged, not counted.
func TestAbsorbCountsWhatBeganBeforeTheBoardsFirstJudgement(t *testing.T) {
	at, state := absorbClock()
	hang := func(d time.Duration) RepairInput { // stuck from 2 s after the first judgement
		now, m := at(d)
		since, sinceMono := at(2 * time.Second)
		return hungMono(now, m, since, sinceMono)
	}
	for _, tc := range []struct {
		name, class string
		on          func(d time.Duration) RepairInput // the class's state d after the first judgement, from 2 s on
		acked       action.Action                     // what the earlier run's ack acknowledged
	}{
		{"a hang", "hung", hang, action.Reboot},
		{"lost", "lost", state(func(in *RepairInput) { in.Lost = true }), action.Reboot},
		{"failing", "failing", state(func(in *RepairInput) { in.Failing = true }), action.ResetGPU},
		{"a recovery action", "recovery_2", state(func(in *RepairInput) { in.Vals = vals(uint64(reading.HRecoveryAction), 2) }), action.RecoveryAction(2)},
		{"a health reason", "ecc_dbe", state(func(in *RepairInput) { in.Health = verdict(ReasonDBE) }), HealthReasonDefs[ReasonDBE].Action},
	} {
		for _, byIndex := range []bool{false, true} {
			t.Run(tc.name+map[bool]string{false: ", judged by its board", true: ", judged by index, then absorbed"}[byIndex], func(t *testing.T) {
				h := action.History{UUID: "GPU-x"}
				h.Count("A", tc.class, t0) // an earlier run of the logger in this boot
				h.Acknowledge(action.AckRecord{Time: t0.Add(time.Second), Action: tc.acked, Classes: []string{tc.class}})
				h.AckAs(tc.class, tc.acked)
				r := NewRepair("A", 0, h)
				judge := r
				if byIndex {
					judge = NewRepair("A", 0, action.History{})
				}
				for _, d := range []time.Duration{0, time.Second} { // the class read absent (its source read: TestAClassGoesOnWhenItsSourceIsFirstRead)
					now, m := at(d)
					judge.Judge(RepairInput{Now: now, Mono: m, Answered: true, Vals: vals(uint64(reading.HRecoveryAction), 0, uint64(reading.HDBEVolatile), 0)})
				}
				if byIndex {
					r.Absorb(judge)
				}
				for _, d := range []time.Duration{3 * time.Second, HungReboot + 3*time.Second} {
					cur := r.Judge(tc.on(d))
					if strings.Contains(strings.Join(cur.Reasons, "; "), "(acknowledged)") {
						t.Errorf("at %v: %v %q, want the new %s not covered by the earlier run's ack", d, cur.Action, cur.Reasons, tc.class)
					}
					if d > HungReboot && cur.Action != tc.acked {
						t.Errorf("at %v: %v %q, want %v", d, cur.Action, cur.Reasons, tc.acked)
					}
				}
				got, _ := r.History()
				if c := got.Boot("A").Classes[tc.class]; c.Count != 2 {
					t.Errorf("%s counted %+v, want 2: the earlier run's and the new one", tc.class, c)
				}
			})
		}
	}
}

// TestAClassGoesOnWhenItsSourceIsFirstRead: an earlier run of the logger
// in this boot counted a recovery action or a health reason and
// acknowledged it; this run judges the GPU twice before any health
// reading (a GPU stuck at start), then the readings show the class. It
// is the occurrence the earlier run counted, found when its source is
// first read: covered by that run's ack, not counted again, whether the
// board judged it, or a judge by index that the board absorbed before the
// readings came or after. Judged absent before, without a reading that
// could show it, it was new: counted a second time and not acknowledged.
func TestAClassGoesOnWhenItsSourceIsFirstRead(t *testing.T) {
	first, mono0 := t0.Add(10*time.Minute), 3*time.Hour
	for _, tc := range []struct {
		name, class string
		vals        *reading.Values
		health      HealthVerdict
	}{
		{"a recovery action", "recovery_2", vals(uint64(reading.HRecoveryAction), 2), HealthVerdict{}},
		{"a health reason", "ecc_dbe", vals(uint64(reading.HRecoveryAction), 0), verdict(ReasonDBE)},
		{"retired pages pending", "retired_pending", vals(uint64(reading.HRetiredPending), 1), HealthVerdict{}},
	} {
		for _, path := range []struct {
			name     string
			byIndex  bool
			absorbAt time.Duration // the index judge's last judgement before Absorb
		}{
			{"judged by its board", false, 0},
			{"judged by index, absorbed before the readings", true, time.Second},
			{"judged by index with the readings, then absorbed", true, 2 * time.Second},
		} {
			t.Run(tc.name+", "+path.name, func(t *testing.T) {
				h := action.History{UUID: "GPU-x"}
				h.Count("A", tc.class, t0) // an earlier run of the logger in this boot
				h.Acknowledge(action.AckRecord{Time: t0.Add(time.Second), Action: action.Reboot, Classes: []string{tc.class}})
				r := NewRepair("A", 0, h)
				judge := r
				if path.byIndex {
					judge = NewRepair("A", 0, action.History{})
				}
				for _, d := range []time.Duration{0, time.Second, 2 * time.Second, 3 * time.Second} {
					in := RepairInput{Now: first.Add(d), Mono: mono0 + d, Answered: true, Vals: tc.vals, Health: tc.health}
					if d < 2*time.Second { // stuck: no readings
						in = hungMono(first.Add(d), mono0+d, first.Add(-time.Second), mono0-time.Second)
					}
					cur := judge.Judge(in)
					if d >= 2*time.Second && judge == r && (cur.Action != action.Watch || !strings.Contains(strings.Join(cur.Reasons, "; "), "(acknowledged)")) {
						t.Errorf("at %v: %v %q, want watch: the earlier run's %s, acknowledged", d, cur.Action, cur.Reasons, tc.class)
					}
					if path.byIndex && d == path.absorbAt {
						r.Absorb(judge)
						judge = r
					}
				}
				got, _ := r.History()
				if c := got.Boot("A").Classes[tc.class]; c.Count != 1 {
					t.Errorf("%s counted %+v, want 1: the earlier run's, going on", tc.class, c)
				}
			})
		}
	}
}

// TestARecoveryEventAfterTheFirstJudgementIsNew: the events are watched
// from the run's first judgement, so a recovery action an event reports
// after it is news, also while no reading of the field has come (a GPU
// stuck at start): counted, not covered by an earlier run's ack of the
// same class, whether the board judged it or a judge by index that the
// board absorbed (the event given to both, as the monitor replays it).
func TestARecoveryEventAfterTheFirstJudgementIsNew(t *testing.T) {
	first, mono0 := t0.Add(10*time.Minute), 3*time.Hour
	stuck := func(d time.Duration) RepairInput {
		return hungMono(first.Add(d), mono0+d, first.Add(-time.Second), mono0-time.Second)
	}
	for _, byIndex := range []bool{false, true} {
		t.Run(map[bool]string{false: "judged by its board", true: "judged by index, then absorbed"}[byIndex], func(t *testing.T) {
			h := action.History{UUID: "GPU-x"}
			h.Count("A", "recovery_2", t0) // an earlier run of the logger in this boot
			h.Acknowledge(action.AckRecord{Time: t0.Add(time.Second), Action: action.Reboot, Classes: []string{"recovery_2"}})
			r := NewRepair("A", 0, h)
			judge := r
			if byIndex {
				judge = NewRepair("A", 0, action.History{})
			}
			judge.Judge(stuck(0))
			judge.Recovery(2, first.Add(time.Second))
			if byIndex {
				r.Absorb(judge)
				r.Recovery(2, first.Add(time.Second))
			}
			if cur := r.Judge(stuck(2 * time.Second)); cur.Action != action.Reboot || strings.Contains(cur.Reason(), "(acknowledged)") {
				t.Errorf("%v %q, want reboot: the new recovery action, not acknowledged", cur.Action, cur.Reasons)
			}
			got, _ := r.History()
			if c := got.Boot("A").Classes["recovery_2"]; c.Count != 2 {
				t.Errorf("recovery_2 counted %+v, want 2: the earlier run's and the new one", c)
			}
		})
	}
}
