package monitor

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpu-telemetry/gpu-telemetry/action"
	"github.com/gpu-telemetry/gpu-telemetry/sampler/fakenvml"
)

// clockRig is a rig of one GPU, with its worker running, whose monotonic
// clock (Config.mono) the test sets: the poll loop's ticks are driven by
// hand (Monitor.tick) at a wall time and a monotonic reading of the test's
// choosing, and the side goroutine's work is run by drain.
type clockRig struct {
	*rig
	gs   *gpuState
	mono atomic.Int64 // the monotonic clock, in ns
}

func newClockRig(t *testing.T) *clockRig {
	c := &clockRig{}
	c.rig = newRig(t, 1, func(cfg *Config) { cfg.mono = func() time.Duration { return time.Duration(c.mono.Load()) } })
	c.gs = c.m.gpus[0]
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.gs.w.Run(ctx)
	}()
	// The worker's last sample may still be writing (its row, the board's
	// state file) when the test ends: wait for it before the log directory
	// is removed, bounded, since a test may leave a call blocked.
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Log("the worker did not stop within 5 s")
		}
	})
	return c
}

// tick runs the poll loop's tick at wall, with the monotonic clock at mono.
func (c *clockRig) tick(wall time.Time, mono time.Duration) {
	c.mono.Store(int64(mono))
	c.m.tick(wall)
}

// inFlight waits until the sample is inside the call the tests block
// (GetTemperature). Any call in flight would not do: under load the sample
// can still be in the GetFieldValues before it when the next tick reports
// the hang, which then names that call.
func (c *clockRig) inFlight() {
	for fn, _, in := c.gs.g.InFlight(); !in || fn.String() != "nvmlDeviceGetTemperature"; fn, _, in = c.gs.g.InFlight() {
		time.Sleep(time.Millisecond)
	}
}

// idle waits until no sample is in flight.
func (c *clockRig) idle() {
	for _, busy := c.gs.w.Busy(); busy; _, busy = c.gs.w.Busy() {
		time.Sleep(time.Millisecond)
	}
}

// drain runs what the side goroutine would run, in order.
func (c *clockRig) drain() {
	for len(c.m.side.jobs) > 0 {
		(<-c.m.side.jobs).f()
	}
}

// events closes the snapshots and the CSV and returns events.log.
func (c *clockRig) events() string {
	c.t.Helper()
	if err := c.m.snaps.Close(c.t.Context()); err != nil {
		c.t.Fatal(err)
	}
	c.m.csv.Close()
	ev, err := os.ReadFile(filepath.Join(c.dir, "events.log"))
	if err != nil {
		c.t.Fatal(err)
	}
	return string(ev)
}

// A hang's length is measured on the monotonic clock, not the wall clock,
// which can step (NTP, an operator): the wall clock steps 7.3 s forward
// during a 20 s hang, and the stall logged and events.log's stall_ms still
// say 20 s, the NVML_HUNG line's elapsed_ms and the hang row the 2 s the
// sample had been stuck when it was reported.
func TestStallIsMeasuredOnTheMonotonicClock(t *testing.T) {
	r := newClockRig(t)
	release := r.devs[0].Block("GetTemperature", nil)
	defer release()
	// The sample comes back stamped with the real wall clock (classify):
	// it was dispatched 27.3 s before on the wall clock, 20 s before on the
	// monotonic one.
	dispatched := time.Now().Add(-27300 * time.Millisecond)
	r.tick(dispatched, 100*time.Second)
	r.inFlight()
	r.tick(dispatched.Add(2*time.Second), 102*time.Second) // reports the hang
	r.drain()
	r.mono.Store(int64(120 * time.Second))
	release()
	r.idle()
	r.drain()
	ev := r.events()
	for _, want := range []string{"type=NVML_HUNG function=nvmlDeviceGetTemperature elapsed_ms=2000 incident=", "type=NVML_RECOVERED stall_ms=20000\n"} {
		if !strings.Contains(ev, want) {
			t.Errorf("events.log lacks %q:\n%s", want, ev)
		}
	}
	if logs := r.logs.String(); !strings.Contains(logs, "stall=20s") {
		t.Errorf("stall not logged as 20s:\n%s", logs)
	}
	if rows := strings.Join(r.rows(0), "\n"); !strings.Contains(rows, "NVML_HUNG(nvmlDeviceGetTemperature,2000ms)") {
		t.Errorf("no hang row 2 s into the hang:\n%s", rows)
	}
}

// Whether a sample is stuck is decided on the monotonic clock, whatever the
// wall clock does meanwhile (NTP or chrony stepping it, an RTC corrected
// after boot): a sample stuck in the driver is reported hung once it has
// been stuck for the deadline on the monotonic clock, and not before. Each
// case ticks at a wall time and a monotonic reading (from the first tick's)
// and says whether the GPU is reported hung after that tick; only the
// sample dispatched at the tick marked block gets stuck. The hang's length
// is the monotonic one, in events.log and in the published view (hung since
// the reporting tick's wall time less that length).
func TestHangDeadlineIsOnTheMonotonicClock(t *testing.T) {
	const d = time.Second // the rig's deadline
	type tick struct {
		wall, mono time.Duration
		block      bool // the sample dispatched at this tick gets stuck
		hung       bool // the GPU has been reported hung after this tick
	}
	cases := []struct {
		name    string
		ticks   []tick
		elapsed time.Duration // the hang's length when it was reported
	}{
		{"the wall clock steps back an hour while a sample is stuck", []tick{
			{0, 0, true, false},
			{-time.Hour + d/2, d / 2, false, false},
			{-time.Hour + 2*d, 2 * d, false, true},
		}, 2 * d},
		{"the wall clock steps forward an hour while a sample is stuck", []tick{
			{0, 0, true, false},
			{time.Hour, d / 2, false, false},
			{time.Hour + 2*d, 2 * d, false, true},
		}, 2 * d},
		{"the wall clock stepped back an hour after the last sample came back", []tick{
			{0, 0, false, false},
			{-time.Hour, d / 10, true, false},
			{-time.Hour + 2*d, 2 * d, false, true},
		}, 2*d - d/10},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := newClockRig(t)
			release := func() {}
			defer func() { release() }()
			wall0, mono0 := time.Now(), 100*time.Second
			for i, tk := range c.ticks {
				if tk.block {
					release = r.devs[0].Block("GetTemperature", nil)
				}
				r.tick(wall0.Add(tk.wall), mono0+tk.mono)
				if tk.block {
					r.inFlight()
				} else if i == 0 {
					r.idle() // the sample came back
				}
				r.drain()
				if hung := r.gs.slot.Get().HungRows > 0; hung != tk.hung {
					t.Fatalf("after the tick %v on the wall clock, %v on the monotonic one: reported hung %v, want %v",
						tk.wall, tk.mono, hung, tk.hung)
				}
				if st := r.gs.slot.Get().State; tk.hung && !st.Since.Equal(wall0.Add(tk.wall-c.elapsed)) {
					t.Errorf("published hung since %v, want %v before the tick at %v", st.Since, c.elapsed, wall0.Add(tk.wall))
				}
			}
			release()
			r.idle()
			r.drain()
			ev := r.events()
			if want := "type=NVML_HUNG function=nvmlDeviceGetTemperature elapsed_ms=" + strconv.FormatInt(c.elapsed.Milliseconds(), 10) + " incident="; !strings.Contains(ev, want) {
				t.Errorf("events.log lacks %q:\n%s", want, ev)
			}
		})
	}
}

// failQueries makes every query of the fake device return ret from now on.
func failQueries(d *fakenvml.Dev, ret nvml.Return) { d.SetAll(ret) }

// The back-off of a failing or lost GPU is kept on the monotonic clock, like
// the hang deadline: the wall clock stepping back an hour (NTP or chrony, an
// RTC corrected after boot) must not keep a GPU that came back unseen for an
// hour, and stepping forward must not retry it early. The GPU's samples fail
// at ticks 100 ms apart until it backs off; the wall clock then steps, and
// the GPU is sampled again, and its processes read again (they are held
// back while it backs off), when, and only when, the back-off has elapsed on
// the monotonic clock since its last failed sample.
func TestBackOffIsOnTheMonotonicClock(t *testing.T) {
	const gap = 100 * time.Millisecond
	kinds := []struct {
		name    string
		ret     nvml.Return
		samples int           // failed samples until the GPU backs off
		backOff time.Duration // then
		event   string        // in events.log, once
	}{
		{"failing", nvml.ERROR_UNKNOWN, failSlowAfter, failSlowEvery, "type=NVML_FAILED"},
		{"lost", nvml.ERROR_GPU_IS_LOST, 1, lostFirstRetry, "type=GPU_LOST"},
	}
	for _, k := range kinds {
		for _, step := range []time.Duration{-time.Hour, time.Hour} {
			t.Run(k.name+"/wall clock steps "+step.String(), func(t *testing.T) {
				r := newClockRig(t)
				go r.gs.pr.Run(t.Context())
				failQueries(r.devs[0], k.ret)
				wall0, mono0 := time.Now(), 100*time.Second
				failures := func() uint64 { return r.gs.slot.Get().Failures }
				reads := func() int { return r.devs[0].Count("GetComputeRunningProcesses") }
				tick := func(wall, mono time.Duration) {
					r.tick(wall0.Add(wall), mono0+mono)
					r.idle()
					for busy, _ := r.gs.pr.Busy(); busy; busy, _ = r.gs.pr.Busy() {
						time.Sleep(time.Millisecond)
					}
					r.drain()
				}
				for i := range k.samples {
					tick(time.Duration(i)*gap, time.Duration(i)*gap)
				}
				if n := failures(); n != uint64(k.samples) {
					t.Fatalf("%d failed samples, want %d", n, k.samples)
				}
				last := time.Duration(k.samples-1) * gap // the last failed sample, on both clocks
				for _, c := range []struct {
					mono   time.Duration // since the last failed sample
					sample bool          // the tick samples the GPU
				}{
					{gap, false},
					{k.backOff - gap, false},
					{k.backOff, true},
				} {
					before, read := failures(), reads()
					tick(last+step+c.mono, last+c.mono)
					if sampled := failures() > before; sampled != c.sample {
						t.Fatalf("a tick %v after the last failed sample on the monotonic clock, the wall clock stepped %v: sampled %v, want %v (back-off %v)",
							c.mono, step, sampled, c.sample, k.backOff)
					}
					if asked := reads() > read; asked != c.sample {
						t.Fatalf("a tick %v after the last failed sample on the monotonic clock, the wall clock stepped %v: processes read %v, want %v (back-off %v)",
							c.mono, step, asked, c.sample, k.backOff)
					}
				}
				if ev := r.events(); strings.Count(ev, k.event) != 1 {
					t.Errorf("events.log has not one %q:\n%s", k.event, ev)
				}
			})
		}
	}
}

// The status line's window (and the rates over it) is measured on the
// monotonic clock: the wall clock was an hour ahead when the summary window
// began and has been stepped back since, and the window still says the 30 s
// that passed, not minus an hour.
func TestStatusWindowIsOnTheMonotonicClock(t *testing.T) {
	r := newClockRig(t)
	r.tick(time.Now().Add(time.Hour), 100*time.Second) // begins a summary window
	r.drain()
	r.mono.Store(int64(130 * time.Second))
	if w := r.m.collect().Window; w != 30*time.Second {
		t.Errorf("status window %v, want 30s", w)
	}
}

// A hang's start on the wall clock is reckoned once, at its first report:
// the wall clock stepped forward (chrony's makestep) by more than the
// hang's age, and the stuck call changing (common on a dying GPU), leave
// the published start where it was, and the repair action sees the same
// hang: its acknowledgement still covers it. (Reckoned again at each
// report, the start moved past the last judgement: a new hang, counted
// again, the ack no longer covering it.)
func TestHangStartSurvivesAWallClockStep(t *testing.T) {
	r := newClockRig(t)
	entered := make(chan string, 16)
	var releases []func()
	defer func() {
		for _, f := range releases {
			f()
		}
	}()
	releases = append(releases, r.devs[0].Block("GetTemperature", entered))
	wall0, mono0 := time.Now().Add(-10*time.Second), 100*time.Second
	r.tick(wall0, mono0)
	r.inFlight()
	r.tick(wall0.Add(2*time.Second), mono0+2*time.Second)
	r.drain()
	if st := r.gs.slot.Get().State; st.Function != "nvmlDeviceGetTemperature" || !st.Since.Equal(wall0) {
		t.Fatalf("published %+v, want hung in nvmlDeviceGetTemperature since %v", st, wall0)
	}
	if _, err := r.m.Ack("0", action.Watch, "looking", "root"); err != nil {
		t.Fatal(err)
	}
	// The sample moves on to the next call, stuck there too.
	for _, fn := range []string{"GetPowerManagementLimit", "GetPerformanceState", "GetClockInfo", "GetUtilizationRates", "GetMemoryInfo_v2"} {
		releases = append(releases, r.devs[0].Block(fn, entered))
	}
	<-entered // GetTemperature's
	releases[0]()
	next := "nvml" + strings.Replace(<-entered, "Get", "DeviceGet", 1)
	step := wall0.Add(40 * time.Second) // 30 s ahead of the real clock, 37 s on the hang's clock
	r.tick(step, mono0+3*time.Second)
	r.drain()
	if st := r.gs.slot.Get().State; st.Function != next || !st.Since.Equal(wall0) {
		t.Errorf("after the step: published %+v, want hung in %s since %v", st, next, wall0)
	}
	r.gs.judgeAction(step, true, nil)
	if cur := r.gs.slot.Get().Action; cur.Action != action.Watch || !strings.Contains(cur.Reason(), "(acknowledged)") {
		t.Errorf("after the step: %v %q, want watch, acknowledged", cur.Action, cur.Reasons)
	}
}

// A hang's age, which asks for a reboot after anomaly.HungReboot, is on the
// monotonic clock; its start on the wall clock only names it. The wall
// clock stepped forward by more than HungReboot during a hang of seconds
// leaves it watch, not a reboot counted in the board's history; stepped
// back, it does not hold the reboot off: the once-a-second round
// (judgeActions) still judges, and the reboot comes a minute into the hang
// on the monotonic clock.
func TestHangAgeIsOnTheMonotonicClock(t *testing.T) {
	type round struct {
		wall    time.Duration // from the hang's start on the wall clock, stepped after the first round
		mono    time.Duration // from the hang's start on the monotonic clock
		want    action.Action
		wantWhy string
	}
	for _, tc := range []struct {
		name      string
		rounds    []round
		wantCount uint64
	}{
		{"forward past HungReboot", []round{
			{2 * time.Second, 2 * time.Second, action.Watch, "stuck past the deadline"},
			{2*time.Minute + 3*time.Second, 3 * time.Second, action.Watch, "stuck past the deadline"},
			{2*time.Minute + 5*time.Second, 5 * time.Second, action.Watch, "stuck past the deadline"},
		}, 0},
		{"back", []round{
			{2 * time.Second, 2 * time.Second, action.Watch, "stuck past the deadline"},
			{-5*time.Minute + 3*time.Second, 3 * time.Second, action.Watch, "stuck past the deadline"},
			{-5*time.Minute + 30*time.Second, 30 * time.Second, action.Watch, "stuck past the deadline"},
			{-5*time.Minute + 61*time.Second, 61 * time.Second, action.Reboot, "stuck for 1m1s"},
		}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newClockRig(t)
			defer r.devs[0].Block("GetTemperature", nil)()
			wall0, mono0 := time.Now().Add(-10*time.Second), 100*time.Second
			r.tick(wall0, mono0)
			r.inFlight()
			for i, rd := range tc.rounds {
				wall := wall0.Add(rd.wall)
				r.tick(wall, mono0+rd.mono)
				r.drain()
				r.m.judgeActions(wall)
				if cur := r.gs.slot.Get().Action; cur.Action != rd.want || !strings.Contains(cur.Reason(), rd.wantWhy) {
					t.Errorf("round %d (hung %v, %v on the wall clock): %v %q, want %v %q", i, rd.mono, rd.wall, cur.Action, cur.Reasons, rd.want, rd.wantWhy)
				}
				// The status and the metrics (hung_s, stall_seconds) show that age too.
				if v := r.m.board.View(); v.GPUs[0].State.HungFor(v.Host.Mono) != rd.mono {
					t.Errorf("round %d (hung %v, %v on the wall clock): the view shows a hang of %v", i, rd.mono, rd.wall, v.GPUs[0].State.HungFor(v.Host.Mono))
				}
			}
			if st := r.gs.slot.Get().State; !st.Since.Equal(wall0) {
				t.Errorf("published %+v, want hung since %v", st, wall0)
			}
			rs := &r.gs.repair
			rs.mu.Lock()
			h, _ := rs.b.Repair().History()
			rs.mu.Unlock()
			var n uint64
			for _, b := range h.Boots {
				n += b.Classes["hung"].Count
			}
			if n != tc.wantCount {
				t.Errorf("hung counted %d times in the board's history, want %d", n, tc.wantCount)
			}
		})
	}
}

// TestActionLineAfterAWallStepBack: a new action that does not drain (a
// hang's watch) is an ACTION line once it has held judgeEvery on the
// monotonic clock, also after the wall clock stepped back 5 min: judge
// holds the wall clock at the last judgement's time until it catches up,
// and the hold measured on it kept the line back for the step's length.
func TestActionLineAfterAWallStepBack(t *testing.T) {
	r := newClockRig(t)
	defer r.devs[0].Block("GetTemperature", nil)()
	wall0, mono0 := time.Now().Add(-10*time.Second), 100*time.Second
	r.tick(wall0, mono0)
	r.inFlight()
	r.m.judgeActions(wall0) // not hung yet: none
	back := wall0.Add(-5 * time.Minute)
	for _, at := range []time.Duration{2 * time.Second, 4 * time.Second} {
		r.tick(back.Add(at), mono0+at)
		r.drain()
		r.m.judgeActions(back.Add(at))
	}
	if cur := r.gs.slot.Get().Action; cur.Action != action.Watch {
		t.Fatalf("hung 4 s: %v %q, want watch", cur.Action, cur.Reasons)
	}
	if ev := r.events(); !strings.Contains(ev, "type=ACTION action=watch from=none") {
		t.Errorf("no ACTION line for the watch held 2 s after the wall clock stepped back:\n%s", ev)
	}
}
