package snapshot

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/action"
	"github.com/gpu-telemetry/gpu-telemetry/internal/counters"
	"github.com/gpu-telemetry/gpu-telemetry/internal/testutil"
	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

// incidentTime is the fixed time of the test incidents, in UTC for determinism.
var incidentTime = time.Date(2026, 3, 14, 9, 26, 53, 589_000_000, time.UTC)

// testClock is an injected wall clock that moves only when told.
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock(t time.Time) *testClock { return &testClock{t: t} }

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *testClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// fakeResult is a canned answer of the fake runner.
type fakeResult struct {
	out string
	err error
}

// fakeRunner answers from canned results; a program without one is
// "missing". A program listed in block waits until its channel is closed or
// its context is done (a hung lspci).
type fakeRunner struct {
	results map[string]fakeResult
	block   map[string]chan struct{}

	mu    sync.Mutex
	calls []string
}

func (f *fakeRunner) Run(ctx context.Context, name string, args ...string) ([]byte, error) {
	f.mu.Lock()
	f.calls = append(f.calls, strings.Join(append([]string{name}, args...), " "))
	f.mu.Unlock()
	if ch := f.block[name]; ch != nil {
		select {
		case <-ch:
		case <-ctx.Done():
			return []byte("partial output\n"), fmt.Errorf("%s: killed: %w", name, ctx.Err())
		}
	}
	r, ok := f.results[name]
	if !ok {
		return nil, &NotInstalledError{Name: name} // as ExecRunner says it
	}
	return []byte(r.out), r.err
}

// Calls returns the command lines run so far, sorted.
func (f *fakeRunner) Calls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := slices.Clone(f.calls)
	slices.Sort(c)
	return c
}

const cannedDmesg = `[    0.000000] Linux version 6.8.0-52-generic (buildd@lcy02-amd64-046)
[    4.118822] nvidia: loading out-of-tree module taints kernel.
[    4.392114] nvidia-nvlink: Nvlink Core is being initialized, major device number 508
[    5.001300] NVRM: loading NVIDIA UNIX x86_64 Kernel Module  570.86.15
[ 1021.555123] e1000e 0000:00:1f.6 eno1: NIC Link is Up 1000 Mbps Full Duplex
[86400.101010] pcieport 0000:4a:01.0: AER: Uncorrected (Fatal) error received: 0000:4b:00.0
[86400.101011] nvidia 0000:4b:00.0: PCIe Bus Error: severity=Uncorrected (Fatal), type=Transaction Layer
[86400.120000] NVRM: Xid (PCI:0000:4b:00): 79, pid=2314, GPU has fallen off the bus.
[86400.120100] NVRM: GPU 0000:4b:00.0: GPU has fallen off the bus.
[86400.130000] systemd-journald[512]: Data hash table of /var/log/journal is full
`

const cannedLspci = `4b:00.0 3D controller: NVIDIA Corporation GH100 [H100 SXM5 80GB] (rev ff) (prog-if ff)
	!!! Unknown header type 7f
	Kernel driver in use: nvidia
	Kernel modules: nvidiafb, nouveau, nvidia_drm, nvidia
`

// cannedRunner returns the fake runner of the golden files: dmesg, lspci,
// setpci and uptime answer, nvidia-smi fails, free is missing, uptime times out.
func cannedRunner() *fakeRunner {
	return &fakeRunner{results: map[string]fakeResult{
		"dmesg":  {out: cannedDmesg},
		"lspci":  {out: cannedLspci},
		"setpci": {out: "ffff\n"},
		"nvidia-smi": {
			out: "Unable to determine the device handle for GPU0000:4B:00.0: Unknown Error\n",
			err: fmt.Errorf("nvidia-smi: exit status 255"),
		},
		"uptime": {err: &TimeoutError{Name: "uptime", After: 5 * time.Second}},
	}}
}

// testHeader is a full header as the daemon would fill it.
func testHeader() Header {
	return Header{
		Time:        incidentTime,
		Version:     "gpu-telemetry 1.0.0",
		Host:        reading.Identity{Host: "gpu-node-07", MachineID: "4f0c8d6a2b7e4e1c9a3d5b7f1e2c4a6b", BootID: "9b1d3f5e-7a2c-4e6b-8d0f-1a3c5e7b9d2f"},
		GPUName:     "NVIDIA H100 80GB HBM3",
		BusID:       "00000000:4B:00.0",
		UUID:        "GPU-8a1c7c8e-43d6-5a0e-11b2-9c1f0e3d7a21",
		Serial:      "1652022014513",
		Reason:      "Xid 79: GPU has fallen off the bus (kmsg)",
		KernelClock: "printk clock = CLOCK_MONOTONIC - 37.000412 s, drift +200.0 ppm; last confirmed 10.0 s ago (1234 records, 2 of them our markers, 0 steps)",
		Uptime:      3*time.Hour + 2*time.Minute + 5*time.Second + 400*time.Millisecond,
		Samples:     109250,
		PeakTempC:   reading.Some[uint32](83),
		PeakPowerW:  reading.Some(699.4),
		EventNumber: 4,
		Counters: []Counter{
			{"pwr_breach", 0}, {"fan_inv", 2}, {"spur_throt", 1}, {"spikes", 3}, {"tdp_changes", 0},
		},
	}
}

const testCSVHeader = "timestamp,gpu_temp,power_w,fan0_speed,flags"

// testRows returns n CSV rows, oldest first.
func testRows(n int) []string {
	rows := make([]string, n)
	for i := range rows {
		t := incidentTime.Add(time.Duration(i-n+1) * 100 * time.Millisecond)
		rows[i] = fmt.Sprintf("%s,%d,%.2f,%d,", t.Format("2006/01/02 15:04:05.000"), 70+i%10, 650.5+float64(i), 60)
	}
	rows[n-1] = incidentTime.Format("2006/01/02 15:04:05.000") + ",,,,NVML_FAILED:GPU is lost"
	return rows
}

// testCrashRequest is the request of the golden crash files: 60 rows (the
// last 50 are kept) and one extra section.
// testEvent is the event the tests' crash requests are for.
var testEvent = Event{Reason: "Xid 79: GPU has fallen off the bus (kmsg)", What: "GPU has fallen off the bus (Xid 79)", Stage: StageLost, Asks: action.Reboot}

func testCrashRequest() CrashRequest {
	return CrashRequest{
		Header:    testHeader(),
		CSVHeader: testCSVHeader,
		Rows:      testRows(60),
		Extra:     []Section{{"Running processes", "pid 2314 python3 train.py (79000 MiB)\n"}},
	}
}

// newTestManager returns a Manager writing into a temp dir with a fixed clock
// and the canned runner, without follow-ups, and closes it at the end.
func newTestManager(t *testing.T, mod func(*Config)) (*Manager, *testClock) {
	t.Helper()
	clk := newClock(incidentTime)
	cfg := Config{
		Dir:       t.TempDir(),
		Runner:    cannedRunner(),
		Now:       clk.Now,
		FollowUps: []time.Duration{},
		HostRoot:  fakeHost(t),
		Counters:  counters.New(),
	}
	if mod != nil {
		mod(&cfg)
	}
	m := New(cfg)
	t.Cleanup(func() { // bounded: a writer that never ends fails its test, not the run's timeout
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = m.Close(ctx)
	})
	return m, clk
}

// counted returns the counters of the registry m was given by name, those
// not 0, as every output reads them (Registry.Read).
func counted(m *Manager) map[string]uint64 {
	c := map[string]uint64{}
	for _, v := range m.counts.Read() {
		if v.Value != 0 {
			c[v.Name] = v.Value
		}
	}
	return c
}

// closeManager closes m, failing the test on error.
func closeManager(t *testing.T, m *Manager) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := m.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

// crashText closes m and returns the text of its one crash snapshot file.
func crashText(t *testing.T, m *Manager) string {
	t.Helper()
	closeManager(t, m)
	names := files(t, filepath.Join(m.cfg.Dir, "crashes"), "*")
	if len(names) != 1 {
		t.Fatalf("crash files %v, want one", names)
	}
	b, err := os.ReadFile(filepath.Join(m.cfg.Dir, "crashes", names[0]))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// files returns the names in dir matching pattern, sorted.
func files(t *testing.T, dir, pattern string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, pattern))
	if err != nil {
		t.Fatal(err)
	}
	for i := range m {
		m[i] = filepath.Base(m[i])
	}
	slices.Sort(m)
	return m
}

// waitFor polls cond until it holds or a generous deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	if !testutil.WaitUntil(10*time.Second, cond) {
		t.Fatalf("timed out waiting for %s", what)
	}
}

// recorder is a slog handler that keeps the records.
type recorder struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (r *recorder) Enabled(context.Context, slog.Level) bool { return true }
func (r *recorder) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	r.recs = append(r.recs, rec.Clone())
	r.mu.Unlock()
	return nil
}
func (r *recorder) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *recorder) WithGroup(string) slog.Handler      { return r }

// messages returns the records at level with message msg, as their attrs.
func (r *recorder) messages(level slog.Level, msg string) []map[string]any {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []map[string]any
	for _, rec := range r.recs {
		if rec.Level != level || rec.Message != msg {
			continue
		}
		attrs := map[string]any{}
		rec.Attrs(func(a slog.Attr) bool {
			attrs[a.Key] = a.Value.Any()
			return true
		})
		out = append(out, attrs)
	}
	return out
}

// crash asks m for a crash snapshot of gpu for ev as the monitor does:
// Decide, then, when accepted, the request gathered (build; nil: the zero
// request) handed to Crash.
func crash(m *Manager, gpu int, ev Event, build func() CrashRequest) Decision {
	d := m.Decide(gpu, ev)
	if d.Accepted {
		var req CrashRequest
		if build != nil {
			req = build()
		}
		req.Decision = d
		m.Crash(req)
	}
	return d
}

// spike is crash for a spike snapshot: DecideSpike, then Spike.
func spike(m *Manager, gpu int, build func() SpikeRequest) Decision {
	d := m.DecideSpike(gpu)
	if d.Accepted {
		var req SpikeRequest
		if build != nil {
			req = build()
		}
		req.Decision = d
		m.Spike(req)
	}
	return d
}
