package e2e

import (
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/internal/testutil"
	"github.com/gpu-telemetry/gpu-telemetry/reading"
	"github.com/gpu-telemetry/gpu-telemetry/sink"
)

// gpusMissingDoc is the status document's count of GPUs missing since
// this start.
type gpusMissingDoc struct {
	Host struct {
		GPUsMissing int `json:"gpus_missing"`
	} `json:"host"`
}

// TestBoardGoneAcrossARestartIsCriticalAtStart: the logger is killed with
// two boards; after the restart one is not enumerated. The start names it
// in a critical GPU_MISSING line (UUID, serial, the kernel's bus id), the
// boot log lists it, and status and the metrics count it.
func TestBoardGoneAcrossARestartIsCriticalAtStart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := start(t, opts{scenario: "gpus 2\n", dir: dir})
	p.waitFor("rows of both GPUs", 20*time.Second, func() bool { return rowCount(p.csvFile(0)) > 5 && rowCount(p.csvFile(1)) > 5 })
	gone, ok := sink.ParseBoardLine(readFile(t, p.csvFile(1)))
	a, err := reading.ParsePCIAddr(gone.Bus)
	if !ok || gone.UUID == "" || gone.Serial == "" || err != nil {
		t.Fatalf("GPU 1's board line: %+v %v", gone, err)
	}
	p.signal(syscall.SIGKILL)
	p.wait(10 * time.Second)

	p = start(t, opts{scenario: "gpus 1\n", dir: dir, args: []string{"--metrics-listen", "127.0.0.1:0"}})
	addr := p.metricsAddr()
	want := "uuid=" + gone.UUID + ` level=critical gpu=? source=start type=GPU_MISSING detail="` + gone.UUID + " (serial " + gone.Serial + ") at " + a.String() + ` missing since this boot"`
	p.waitForEvent("the GPU_MISSING line", 20*time.Second, want)
	var boot string
	p.waitFor("the boot log", 20*time.Second, func() bool {
		if m := snapshots(dir, "boot-*.log"); len(m) == 1 {
			boot = m[0]
		}
		return boot != ""
	})
	testutil.Contains(t, "boot log", readFile(t, boot), "=== GPUs missing at this start ===\n"+gone.UUID+" (serial "+gone.Serial+") at "+a.String()+" missing since this boot\n")
	testutil.Contains(t, "metrics", scrapeMetrics(t, addr), "\ngpu_telemetry_gpus_missing 1\n")
	p.waitFor("the control socket", 20*time.Second, func() bool { return p.socketPath() != "" })
	var d gpusMissingDoc
	p.waitFor("status", 20*time.Second, func() bool {
		_, d, _ = statusAs[gpusMissingDoc](t, p.socketPath())
		return d.Host.GPUsMissing == 1
	})
	if _, out := status(t, "--socket", p.socketPath()); !strings.Contains(out, "GPUs missing since this start: 1 (GPU_MISSING in events.log)") {
		t.Errorf("status text does not count the missing GPU:\n%s", out)
	}
	testutil.Contains(t, "the logger's log", p.stderr.String(), `msg="a GPU of the previous run is not enumerated"`)
	p.stop()
	if n := strings.Count(events(dir), "type=GPU_MISSING"); n != 1 {
		t.Errorf("%d GPU_MISSING lines, want 1:\n%s", n, events(dir))
	}
}

// TestExpectGPUsChecksAFirstBoot: a first start in an empty directory has
// no previous run; --expect-gpus makes fewer GPUs than expected a critical
// GPU_MISSING line and the count; as many as expected is none.
func TestExpectGPUsChecksAFirstBoot(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		expect  int
		missing int
	}{{3, 1}, {2, 0}} {
		t.Run(strconv.Itoa(tc.expect), func(t *testing.T) {
			dir := t.TempDir()
			p := start(t, opts{scenario: "gpus 2\n", dir: dir, args: []string{"--expect-gpus", strconv.Itoa(tc.expect)}})
			p.waitForRows(1, 3, 20*time.Second)
			p.waitFor("the control socket", 20*time.Second, func() bool { return p.socketPath() != "" })
			var d gpusMissingDoc
			p.waitFor("status", 20*time.Second, func() bool {
				var code int
				code, d, _ = statusAs[gpusMissingDoc](t, p.socketPath())
				return code >= 0 && d.Host.GPUsMissing == tc.missing
			})
			p.stop()
			ev := events(dir)
			if tc.missing == 0 {
				if strings.Contains(ev, "GPU_MISSING") {
					t.Errorf("as many GPUs as expected, yet:\n%s", ev)
				}
				return
			}
			testutil.Contains(t, "events.log", ev, `level=critical gpu=? source=start type=GPU_MISSING detail="3 GPUs expected, 2 enumerated" expected=3 enumerated=2`)
		})
	}
}

// TestBoardGoneWithAGPUSubsetIsMissing: with --gpu selecting some GPUs, a
// board of the previous run that the driver no longer enumerates is still
// missing (a board replaced at index 1); one the driver enumerates but
// --gpu no longer selects is not.
func TestBoardGoneWithAGPUSubsetIsMissing(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := start(t, opts{scenario: "gpus 3\n", dir: dir, args: []string{"--gpu", "0,1"}})
	p.waitFor("rows", 20*time.Second, func() bool { return rowCount(p.csvFile(1)) > 5 })
	gone, ok := sink.ParseBoardLine(readFile(t, p.csvFile(1)))
	kept, ok0 := sink.ParseBoardLine(readFile(t, p.csvFile(0)))
	if !ok || gone.UUID == "" || !ok0 || kept.UUID == "" {
		t.Fatalf("the board lines: GPU 0 %+v, GPU 1 %+v", kept, gone)
	}
	p.signal(syscall.SIGKILL)
	p.wait(10 * time.Second)

	p = start(t, opts{scenario: "gpus 3\ngpu 1 uuid GPU-11111111-2222-3333-4444-555555555555\n", dir: dir, args: []string{"--gpu", "0,1"}})
	p.waitForEvent("the GPU_MISSING line", 20*time.Second, "uuid="+gone.UUID+" level=critical gpu=? source=start type=GPU_MISSING")
	p.signal(syscall.SIGKILL)
	p.wait(10 * time.Second)

	// Board 0 is still enumerated, only no longer selected: not missing.
	// The replaced board is still missing (an earlier run missed it).
	p = start(t, opts{scenario: "gpus 3\ngpu 1 uuid GPU-11111111-2222-3333-4444-555555555555\n", dir: dir, args: []string{"--gpu", "1"}})
	p.waitFor("the start's inventory", 20*time.Second, func() bool { return strings.Contains(p.stderr.String(), "first sample of every GPU written") })
	p.stop()
	ev := events(dir)
	if strings.Contains(ev, "uuid="+kept.UUID+" level=critical gpu=? source=start type=GPU_MISSING") {
		t.Errorf("board 0, not selected, is said missing:\n%s", ev)
	}
	if n := strings.Count(ev, "uuid="+gone.UUID+" level=critical gpu=? source=start type=GPU_MISSING"); n != 2 {
		t.Errorf("%d GPU_MISSING lines of the replaced board, want 2 (one per start):\n%s", n, ev)
	}
}
