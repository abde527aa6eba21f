package monitor

import (
	"context"
	"os"
	"path/filepath"
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
	for _, _, stuck := gs.w.Stuck(now, r.m.cfg.Deadline); !stuck; _, _, stuck = gs.w.Stuck(now, r.m.cfg.Deadline) {
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
