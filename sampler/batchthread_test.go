package sampler

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/internal/testutil"
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

// TestNativeExecStartFailureCountedAndLogged: a C executor that cannot be
// started leaves the GPU on go-nvml calls, and is counted each time (it is
// tried again with the static facts) and logged once, with why.
func TestNativeExecStartFailureCountedAndLogged(t *testing.T) {
	var logs bytes.Buffer
	d := fakenvml.NewDev()
	h := openFake(t, &fakenvml.Lib{Devs: []*fakenvml.Dev{d}})
	g := h.GPUs[0]
	g.log = slog.New(slog.NewTextHandler(&logs, nil))
	defer func(f func(int, time.Duration, func()) (executor, error)) { startNative = f }(startNative)
	startNative = func(int, time.Duration, func()) (executor, error) {
		return nil, errors.New("no NVML handle for the GPU")
	}
	for range 2 {
		if _, ok := g.chooseExec(d, 0, true).(*goExec); !ok {
			t.Fatal("a GPU whose native executor failed is not on go-nvml calls")
		}
	}
	if n := g.NativeExecFailures(); n != 2 {
		t.Errorf("NativeExecFailures = %d, want 2", n)
	}
	out := logs.String()
	if n := strings.Count(out, "cannot start the GPU's native executor"); n != 1 {
		t.Errorf("logged %d times, want once:\n%s", n, out)
	}
	testutil.Contains(t, "the log line", out, "native_exec_failures", `error="no NVML handle for the GPU"`) // the key every error is logged under
	if _, ok := g.chooseExec(d, 0, false).(*goExec); !ok || g.NativeExecFailures() != 2 {
		t.Error("a GPU on a library other than the driver's tried the native executor")
	}
}
