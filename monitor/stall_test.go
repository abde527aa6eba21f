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
)

// A hang's length is measured on the monotonic clock, not the wall clock,
// which can step (NTP, an operator): the wall clock steps 7.3 s forward
// during a 20 s hang, and the stall logged and events.log's stall_ms still
// say 20 s, the NVML_HUNG line's elapsed_ms and the hang row the 2 s the
// sample had been stuck when it was reported.
func TestStallIsMeasuredOnTheMonotonicClock(t *testing.T) {
	var mono atomic.Int64 // the monotonic clock the test steps, in ns
	mono.Store(int64(100 * time.Second))
	r := newRig(t, 1, func(c *Config) { c.mono = func() time.Duration { return time.Duration(mono.Load()) } })
	gs := r.m.gpus[0]
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go gs.w.Run(ctx)
	drain := func() {
		for len(r.m.side) > 0 { // what the side goroutine would run, in order
			(<-r.m.side)()
		}
	}
	release := r.devs[0].Block("GetTemperature", nil)
	defer release()
	// The sample comes back stamped with the real wall clock (classify):
	// it was dispatched 27.3 s before on the wall clock, 20 s before on the
	// monotonic one.
	dispatched := time.Now().Add(-27300 * time.Millisecond)
	r.m.tick(dispatched)
	now := dispatched.Add(2 * time.Second)
	for _, _, in := gs.g.InFlight(); !in; _, _, in = gs.g.InFlight() {
		time.Sleep(time.Millisecond) // until the sample is inside the blocked call
	}
	mono.Add(int64(2 * time.Second))
	r.m.tick(now) // reports the hang
	drain()
	mono.Add(int64(18 * time.Second))
	release()
	for _, busy := gs.w.Busy(); busy; _, busy = gs.w.Busy() {
		time.Sleep(time.Millisecond)
	}
	drain()
	if err := r.m.snaps.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	r.m.csv.Close()
	ev, err := os.ReadFile(filepath.Join(r.dir, "events.log"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"type=NVML_HUNG function=nvmlDeviceGetTemperature elapsed_ms=2000\n", "type=NVML_RECOVERED stall_ms=20000\n"} {
		if !strings.Contains(string(ev), want) {
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
			var mono atomic.Int64 // the monotonic clock the test steps, in ns
			r := newRig(t, 1, func(c *Config) { c.mono = func() time.Duration { return time.Duration(mono.Load()) } })
			gs := r.m.gpus[0]
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			go gs.w.Run(ctx)
			idle := func() {
				for _, busy := gs.w.Busy(); busy; _, busy = gs.w.Busy() {
					time.Sleep(time.Millisecond)
				}
			}
			drain := func() {
				for len(r.m.side) > 0 { // what the side goroutine would run, in order
					(<-r.m.side)()
				}
			}
			release := func() {}
			defer func() { release() }()
			wall0, mono0 := time.Now(), 100*time.Second
			for i, tk := range c.ticks {
				if tk.block {
					release = r.devs[0].Block("GetTemperature", nil)
				}
				mono.Store(int64(mono0 + tk.mono))
				r.m.tick(wall0.Add(tk.wall))
				if tk.block {
					for _, _, in := gs.g.InFlight(); !in; _, _, in = gs.g.InFlight() {
						time.Sleep(time.Millisecond) // until the sample is inside the blocked call
					}
				} else if i == 0 {
					idle() // the sample came back
				}
				drain()
				if hung := gs.slot.Get().HungRows > 0; hung != tk.hung {
					t.Fatalf("after the tick %v on the wall clock, %v on the monotonic one: reported hung %v, want %v",
						tk.wall, tk.mono, hung, tk.hung)
				}
				if st := gs.slot.Get().State; tk.hung && !st.Since.Equal(wall0.Add(tk.wall-c.elapsed)) {
					t.Errorf("published hung since %v, want %v before the tick at %v", st.Since, c.elapsed, wall0.Add(tk.wall))
				}
			}
			release()
			idle()
			drain()
			if err := r.m.snaps.Close(t.Context()); err != nil {
				t.Fatal(err)
			}
			r.m.csv.Close()
			ev, err := os.ReadFile(filepath.Join(r.dir, "events.log"))
			if err != nil {
				t.Fatal(err)
			}
			if want := "type=NVML_HUNG function=nvmlDeviceGetTemperature elapsed_ms=" + strconv.FormatInt(c.elapsed.Milliseconds(), 10) + "\n"; !strings.Contains(string(ev), want) {
				t.Errorf("events.log lacks %q:\n%s", want, ev)
			}
		})
	}
}
