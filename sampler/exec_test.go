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

// TestExecStartFailureCountedAndLogged: a GPU whose executor cannot be
// started has failed samples that say why; the failure is counted each time
// (it is tried again with the static facts), logged once, and the GPU is
// sampled once the executor starts.
func TestExecStartFailureCountedAndLogged(t *testing.T) {
	var logs bytes.Buffer
	d := fakenvml.NewDev()
	lib := &fakenvml.Lib{Devs: []*fakenvml.Dev{d}}
	defer func(f func(*native, int, time.Duration) (*nativeExec, error)) { startNative = f }(startNative)
	startNative = func(*native, int, time.Duration) (*nativeExec, error) {
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
