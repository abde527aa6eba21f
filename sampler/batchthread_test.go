package sampler

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/reading"
	"github.com/gpu-telemetry/gpu-telemetry/sampler/fakenvml"
)

// TestBatchThreadSwitchesOnARunNotAnOutlier: a GPU moves to its C thread
// only after switchAfter slow batches in a row, and back only after as many
// fast ones: one batch preempted for milliseconds on a busy machine, or one
// quick answer from a slow driver, changes nothing.
func TestBatchThreadSwitchesOnARunNotAnOutlier(t *testing.T) {
	slow, fast, middle := 5*time.Millisecond, 2*time.Microsecond, 100*time.Microsecond
	var th batchThread
	feed := func(d time.Duration, n int) {
		for range n {
			th.on = th.decide(d)
		}
	}
	feed(fast, 20)
	feed(slow, 1)
	feed(fast, 1)
	feed(slow, switchAfter-1)
	if th.on {
		t.Fatal("on the thread before switchAfter slow batches in a row")
	}
	feed(middle, 1) // neither slow nor fast: breaks the run
	feed(slow, switchAfter-1)
	if th.on {
		t.Fatal("a batch between the thresholds did not break the run")
	}
	feed(slow, 1)
	if !th.on {
		t.Fatalf("not on the thread after %d slow batches in a row", switchAfter)
	}
	feed(fast, switchAfter-1)
	feed(slow, 1)
	feed(fast, switchAfter-1)
	if !th.on {
		t.Fatal("back to the direct call before switchAfter fast batches in a row")
	}
	feed(middle, switchAfter)
	if !th.on {
		t.Fatal("batches between the thresholds moved it back")
	}
	feed(fast, switchAfter)
	if th.on {
		t.Fatalf("still on the thread after %d fast batches", switchAfter)
	}
}

// TestBatchThreadStartFailureCounted: a batch thread that cannot be started
// leaves the GPU on direct calls, and is counted each time (it is tried
// again) and logged once.
func TestBatchThreadStartFailureCounted(t *testing.T) {
	var logs bytes.Buffer
	h := openFake(t, &fakenvml.Lib{Devs: []*fakenvml.Dev{fakenvml.NewDev()}})
	g := h.GPUs[0]
	g.log = slog.New(slog.NewTextHandler(&logs, nil))
	defer func(f func(*cThread) bool) { threadStart = f }(threadStart)
	threadStart = func(*cThread) bool { return false }
	x := &nativeExec{threadFailed: g.batchThreadFailed}
	for range 3 {
		if x.th.start(x) || x.th.t != nil {
			t.Fatal("a thread that failed to start is in use")
		}
	}
	if n := g.BatchThreadFailures(); n != 3 {
		t.Errorf("BatchThreadFailures = %d, want 3", n)
	}
	if n := strings.Count(logs.String(), "cannot start the GPU's batch thread"); n != 1 {
		t.Errorf("logged %d times, want once:\n%s", n, logs.String())
	}
}

// TestExecStartFailureCountedAndLogged: a GPU whose executor cannot be
// started has failed samples that say why; the failure is counted each time
// (it is tried again with the static facts), logged once, and the GPU is
// sampled once the executor starts.
func TestExecStartFailureCountedAndLogged(t *testing.T) {
	var logs bytes.Buffer
	d := fakenvml.NewDev()
	lib := &fakenvml.Lib{Devs: []*fakenvml.Dev{d}}
	defer func(f func(*native, int, time.Duration, func()) (*nativeExec, error)) { startNative = f }(startNative)
	startNative = func(*native, int, time.Duration, func()) (*nativeExec, error) {
		return nil, errors.New("no NVML handle for the GPU")
	}
	h := openFake(t, lib)
	g := h.GPUs[0]
	g.log = slog.New(slog.NewTextHandler(&logs, nil))
	var s reading.Sample
	g.nextStatic = time.Time{}
	g.Sample(&s) // a retry that fails again
	if s.Status != reading.StatusFailed || !strings.Contains(s.Err, "no NVML handle for the GPU") {
		t.Fatalf("a GPU without an executor: status %v, error %q; want failed, with why", s.Status, s.Err)
	}
	if n := g.NativeExecFailures(); n != 2 {
		t.Errorf("NativeExecFailures = %d, want 2 (at start and at the retry)", n)
	}
	g.Sample(&s) // before the retry interval: not tried again
	if n := g.NativeExecFailures(); n != 2 {
		t.Errorf("NativeExecFailures = %d before the retry interval, want 2", n)
	}
	startNative = newNativeExec
	g.nextStatic = time.Time{}
	g.Sample(&s)
	if s.Status != reading.StatusOK || !s.TempC.OK || s.TempC.V != 60 {
		t.Errorf("once the executor starts: status %v, error %q, temperature %v; want a sample", s.Status, s.Err, s.TempC)
	}
	out := logs.String()
	if n := strings.Count(out, "cannot start the GPU's executor"); n != 0 {
		t.Errorf("logged %d times after the first (at start, before this test's logger), want 0:\n%s", n, out)
	}
}
