package snapshot

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/internal/testutil"
)

func TestCrashStage2Golden(t *testing.T) {
	run := cannedRunner()
	m, _ := newTestManager(t, func(c *Config) { c.Runner = run })
	if d := crash(m, 3, testEvent, testCrashRequest); !d.Accepted {
		t.Fatalf("Crash = %+v, want accepted", d)
	}
	closeManager(t, m)
	dir := filepath.Join(m.cfg.Dir, "crashes")
	got := files(t, dir, "*")
	want := []string{"crash-20260314-092653.589-gpu3.log"}
	if !slices.Equal(got, want) {
		t.Fatalf("files = %v, want %v", got, want)
	}
	data, err := os.ReadFile(filepath.Join(dir, want[0]))
	if err != nil {
		t.Fatal(err)
	}
	testutil.Golden(t, "crash-stage2.golden", data)

	// dmesg once for three sections; the bus id in lspci form; no shell anywhere.
	wantCalls := []string{"dmesg", "free -h", "lspci -nnDvvvxxxx -s 0000:4b:00.0", "nvidia-smi", "setpci -s 0000:4b:00.0 VENDOR_ID", "uptime"}
	if calls := run.Calls(); !slices.Equal(calls, wantCalls) {
		t.Errorf("commands = %q, want %q", calls, wantCalls)
	}
	if c := counted(m); c["crash_snapshots"] != 1 || c["crash_snapshots_completed"] != 1 || c["snapshot_failures"] != 0 {
		t.Errorf("counters = %v", c)
	}
}

func TestCrashStage1Golden(t *testing.T) {
	req := testCrashRequest()
	req.Header.GPUIndex = 3
	req.Header.Title = crashTitle
	testutil.Golden(t, "crash-stage1.golden", renderCrash(&req, Section{}, nil, nil, 10*time.Second))
}

func TestHeaderAbsentGolden(t *testing.T) {
	// Nothing known: every absent value prints n/a, never 0.
	var b strings.Builder
	writeHeader(&b, &Header{GPUIndex: -1})
	testutil.Golden(t, "header-absent.golden", []byte(b.String()))
}

func TestSpikeGolden(t *testing.T) {
	m, _ := newTestManager(t, nil)
	d := spike(m, 1, func() SpikeRequest {
		h := testHeader()
		h.Reason = "FAN_SPIKE fan0 35% -> 78% in 100ms"
		h.EventNumber = 3
		return SpikeRequest{
			Header:      h,
			Columns:     []string{"timestamp", "gpu_temp", "power_w", "fan0_speed", "flags"},
			Values:      []string{"2026/03/14 09:26:53.589", "81", "", "78", "FAN_SPIKE"},
			CSVHeader:   testCSVHeader,
			Rows:        testRows(5),
			Thresholds:  thresholds(),
			FanPolicies: []string{"temperature_continuous_sw", "n/a"},
		}
	})
	if !d.Accepted {
		t.Fatalf("Spike = %+v", d)
	}
	closeManager(t, m)
	dir := filepath.Join(m.cfg.Dir, "spikes")
	names := files(t, dir, "*")
	if want := []string{"spike-20260314-092653.589-gpu1.log"}; !slices.Equal(names, want) {
		t.Fatalf("files = %v, want %v", names, want)
	}
	data, err := os.ReadFile(filepath.Join(dir, names[0]))
	if err != nil {
		t.Fatal(err)
	}
	testutil.Golden(t, "spike.golden", data)
	if calls := m.cfg.Runner.(*fakeRunner).Calls(); len(calls) != 0 {
		t.Errorf("spike ran commands %q, want none", calls)
	}
}

func TestCrashCooldown(t *testing.T) {
	type step struct {
		at       time.Duration // from incidentTime
		gpu      int
		accepted bool
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"within 60s suppressed, at 60s accepted", []step{
			{0, 0, true}, {time.Second, 0, false}, {59*time.Second + 999*time.Millisecond, 0, false}, {60 * time.Second, 0, true},
		}},
		{"GPUs independent", []step{
			{0, 0, true}, {time.Second, 1, true}, {2 * time.Second, 0, false}, {3 * time.Second, 1, false}, {4 * time.Second, 2, true},
		}},
		{"clock stepped back counts as expired", []step{
			{0, 0, true}, {-time.Hour, 0, true}, {-time.Hour + time.Second, 0, false},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, clk := newTestManager(t, nil)
			var accepted int
			suppressed := map[int]uint64{}
			for i, s := range tt.steps {
				clk.mu.Lock()
				clk.t = incidentTime.Add(s.at)
				clk.mu.Unlock()
				d := crash(m, s.gpu, testEvent, testCrashRequest)
				if d.Accepted != s.accepted {
					t.Fatalf("step %d (%v, gpu %d): Accepted = %v, want %v", i, s.at, s.gpu, d.Accepted, s.accepted)
				}
				if s.accepted {
					accepted++
				} else {
					suppressed[s.gpu]++
					if d.CooldownLeft <= 0 || d.CooldownLeft > DefaultCrashCooldown {
						t.Errorf("step %d: CooldownLeft = %v", i, d.CooldownLeft)
					}
				}
				// The GPU's own count, which its crash snapshots' headers show.
				if d.Suppressed != suppressed[s.gpu] {
					t.Errorf("step %d: suppressed for gpu %d = %d, want %d", i, s.gpu, d.Suppressed, suppressed[s.gpu])
				}
			}
			closeManager(t, m)
			if n := len(files(t, filepath.Join(m.cfg.Dir, "crashes"), "crash-*.log")); n != accepted {
				t.Errorf("%d crash files, want %d", n, accepted)
			}
		})
	}
}

func TestCrashBurst(t *testing.T) {
	// One Xid 79 floods dozens of events within a second: one snapshot.
	rec := &recorder{}
	m, clk := newTestManager(t, func(c *Config) { c.Logger = slog.New(rec) })
	var accepted int
	var last Decision
	for i := range 50 {
		d := crash(m, 2, testEvent, testCrashRequest)
		last = d
		if d.Accepted {
			accepted++
		} else if d.Burst != uint64(i) {
			t.Errorf("request %d: Burst = %d, want %d", i, d.Burst, i)
		}
		clk.Advance(10 * time.Millisecond)
	}
	closeManager(t, m)
	if accepted != 1 {
		t.Errorf("accepted %d, want 1", accepted)
	}
	if n := files(t, filepath.Join(m.cfg.Dir, "crashes"), "*"); len(n) != 1 {
		t.Errorf("files = %v, want exactly 1", n)
	}
	if n := counted(m)["crash_snapshots_suppressed"]; n != 49 || last.Suppressed != 49 {
		t.Errorf("suppressed = %d (gpu 2: %d), want 49", n, last.Suppressed)
	}
	warns := rec.messages(slog.LevelWarn, "crash snapshot suppressed by cooldown")
	if len(warns) != 3 {
		t.Fatalf("%d suppression warnings, want the first 3 of the burst", len(warns))
	}
	for i, w := range warns {
		if w["gpu"] != int64(2) || w["count"] != uint64(i+1) {
			t.Errorf("warning %d = %v, want gpu 2 count %d", i, w, i+1)
		}
	}
}

func TestSuppressedCountInNextHeader(t *testing.T) {
	m, clk := newTestManager(t, nil)
	crash(m, 0, testEvent, testCrashRequest)
	for range 5 {
		crash(m, 0, testEvent, testCrashRequest)
	}
	clk.Advance(DefaultCrashCooldown)
	d := crash(m, 0, testEvent, testCrashRequest)
	if !d.Accepted || d.Suppressed != 5 {
		t.Fatalf("Crash = %+v, want accepted with 5 suppressed", d)
	}
	closeManager(t, m)
	names := files(t, filepath.Join(m.cfg.Dir, "crashes"), "crash-*.log")
	if len(names) != 2 {
		t.Fatalf("files = %v", names)
	}
	data, _ := os.ReadFile(filepath.Join(m.cfg.Dir, "crashes", names[1]))
	if !strings.Contains(string(data), "Suppressed by cooldown: 5\n") {
		t.Errorf("second snapshot does not show 5 suppressed:\n%s", data)
	}
}

func TestSpikeCooldownGlobal(t *testing.T) {
	m, clk := newTestManager(t, nil)
	steps := []struct {
		at       time.Duration
		gpu      int
		accepted bool
	}{
		{0, 0, true},
		{5 * time.Second, 1, false}, // global: another GPU is suppressed too
		{9 * time.Second, 0, false},
		{10 * time.Second, 1, true},
	}
	for i, s := range steps {
		clk.mu.Lock()
		clk.t = incidentTime.Add(s.at)
		clk.mu.Unlock()
		if d := spike(m, s.gpu, func() SpikeRequest { return SpikeRequest{} }); d.Accepted != s.accepted {
			t.Errorf("step %d: Accepted = %v, want %v", i, d.Accepted, s.accepted)
		}
	}
	closeManager(t, m)
	if c := counted(m); c["spike_snapshots"] != 2 || c["spike_snapshots_suppressed"] != 2 {
		t.Errorf("counters = %v, want 2 written, 2 suppressed", c)
	}
	if n := files(t, filepath.Join(m.cfg.Dir, "spikes"), "spike-*.log"); len(n) != 2 {
		t.Errorf("files = %v", n)
	}
}

func TestFlushBeforeSnapshot(t *testing.T) {
	var mu sync.Mutex
	var log []string
	var dir string
	m, _ := newTestManager(t, func(c *Config) {
		dir = c.Dir
		c.Flush = func(gpu int) error {
			// The snapshot file must not exist yet when the CSV is flushed.
			crashes := files(t, filepath.Join(dir, "crashes"), "*.log")
			spikes := files(t, filepath.Join(dir, "spikes"), "*.log")
			mu.Lock()
			defer mu.Unlock()
			log = append(log, "flush", strings.Join(append(crashes, spikes...), ","))
			return errors.New("disk full") // a failed flush does not stop the snapshot
		}
	})
	crash(m, 5, testEvent, testCrashRequest)
	closeManager(t, m)
	mu.Lock()
	defer mu.Unlock()
	if want := []string{"flush", ""}; !slices.Equal(log, want) {
		t.Errorf("flush log = %q, want %q (flush before any file)", log, want)
	}
	if n := files(t, filepath.Join(dir, "crashes"), "crash-*-gpu5.log"); len(n) != 1 {
		t.Errorf("files = %v", n)
	}
}

func TestSpikeFlushBeforeSnapshot(t *testing.T) {
	var flushed []int
	var seen []string
	var dir string
	m, _ := newTestManager(t, func(c *Config) {
		dir = c.Dir
		c.Flush = func(gpu int) error {
			flushed = append(flushed, gpu)
			seen = files(t, filepath.Join(dir, "spikes"), "*")
			return nil
		}
	})
	spike(m, 4, func() SpikeRequest { return SpikeRequest{} })
	closeManager(t, m)
	if !slices.Equal(flushed, []int{4}) || len(seen) != 0 {
		t.Errorf("flushed %v with files %v present, want [4] before any file", flushed, seen)
	}
	if n := files(t, filepath.Join(dir, "spikes"), "*"); len(n) != 1 {
		t.Errorf("files = %v", n)
	}
}

func TestStage1WhileCommandBlocked(t *testing.T) {
	// lspci hangs: the operator still gets the header and the rows at once,
	// and Close kills the hung command.
	run := cannedRunner()
	run.block = map[string]chan struct{}{"lspci": make(chan struct{})} // never released
	m, _ := newTestManager(t, func(c *Config) {
		c.Runner = run
		c.CommandTimeout = time.Hour // only Close can end it
	})
	start := time.Now()
	if d := crash(m, 3, testEvent, testCrashRequest); !d.Accepted {
		t.Fatal("not accepted")
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("Crash took %v; it must not wait for the snapshot", took)
	}
	path := filepath.Join(m.cfg.Dir, "crashes", "crash-20260314-092653.589-gpu3.log")
	waitFor(t, "stage-1 file", func() bool { _, err := os.Stat(path); return err == nil })
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	testutil.Golden(t, "crash-stage1-blocked.golden", data)
	waitFor(t, "lspci to start", func() bool { return slices.Contains(run.Calls(), "lspci -nnDvvvxxxx -s 0000:4b:00.0") })

	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	err = m.Close(ctx)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Close = %v, want an error wrapping the deadline", err)
	}
	data, err = os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := string(data)
	testutil.Contains(t, "stage-2 file", s,
		"=== PCIe device state ===\npartial output\n(canceled: the daemon is shutting down)\n",
		"GPU has fallen off the bus.", // the other diagnostics made it
		"\n=== End of snapshot ===\n",
	)
	if d := crash(m, 3, testEvent, testCrashRequest); !d.Closed || d.Accepted {
		t.Errorf("Crash after Close = %+v, want Closed", d)
	}
	if d := spike(m, 3, nil); !d.Closed || d.Accepted {
		t.Errorf("Spike after Close = %+v, want Closed", d)
	}
	if n := counted(m)["snapshots_refused_at_shutdown"]; n != 2 {
		t.Errorf("snapshots_refused_at_shutdown = %d after a crash and a spike request past Close, want 2", n)
	}
	if err := m.Close(context.Background()); err != nil {
		t.Errorf("second Close = %v", err)
	}
}

func TestDiagnosticsOverallBound(t *testing.T) {
	// A runner that ignores its context is abandoned at DiagnosticsTimeout.
	release := make(chan struct{})
	defer close(release)
	run := cannedRunner()
	m, _ := newTestManager(t, func(c *Config) {
		c.Runner = ignoringRunner{run, release}
		c.DiagnosticsTimeout = 50 * time.Millisecond
	})
	crash(m, 0, testEvent, testCrashRequest)
	testutil.Contains(t, "snapshot", crashText(t, m), "=== nvidia-smi (may fail) ===\n(no answer within 50ms; abandoned)\n")
}

// ignoringRunner blocks nvidia-smi until released, whatever its context says.
type ignoringRunner struct {
	*fakeRunner
	release chan struct{}
}

func (r ignoringRunner) Run(ctx context.Context, name string, args ...string) ([]byte, error) {
	if name == "nvidia-smi" {
		<-r.release
	}
	return r.fakeRunner.Run(ctx, name, args...)
}

func TestCommandTimeoutSection(t *testing.T) {
	run := cannedRunner()
	run.block = map[string]chan struct{}{"setpci": make(chan struct{})}
	m, _ := newTestManager(t, func(c *Config) {
		c.Runner = run
		c.CommandTimeout = 20 * time.Millisecond
		// The whole capture's bound is far off (by default it is twice
		// the command's, 40 ms, which a loaded machine can pass before
		// the runner answers): this test is the command's own timeout.
		c.DiagnosticsTimeout = 10 * time.Second
	})
	crash(m, 0, testEvent, testCrashRequest)
	testutil.Contains(t, "snapshot", crashText(t, m), "=== GPU register test (ffff = off bus) ===\npartial output\n(timed out after 20ms)\n")
}

func TestInvalidBusIDNotPassed(t *testing.T) {
	run := cannedRunner()
	m, _ := newTestManager(t, func(c *Config) { c.Runner = run })
	crash(m, 0, testEvent, func() CrashRequest {
		r := testCrashRequest()
		r.Header.BusID = "00000000:4B:00.0; reboot"
		return r
	})
	data := crashText(t, m)
	for _, c := range run.Calls() {
		if strings.HasPrefix(c, "lspci") || strings.HasPrefix(c, "setpci") {
			t.Errorf("ran %q with an invalid bus id", c)
		}
	}
	want := "=== PCIe device state ===\n(not run: not a PCI address: \"00000000:4B:00.0; reboot\": expected nothing or a function .0 to .7 after the device (want a form like 00000000:4B:00.0, 0000:4b:00.0 or PCI:0000:4b:00))\n"
	testutil.Contains(t, "snapshot", data, want)
}

func TestSameMillisecondNoCollision(t *testing.T) {
	// Two accepted snapshots of one GPU in the same millisecond both survive.
	clk := newClock(incidentTime)
	m, _ := newTestManager(t, func(c *Config) {
		c.CrashCooldown = time.Nanosecond
		c.Now = func() time.Time { clk.Advance(time.Microsecond); return clk.Now() }
	})
	for range 3 {
		if d := crash(m, 7, testEvent, testCrashRequest); !d.Accepted {
			t.Fatalf("not accepted: %+v", d)
		}
	}
	closeManager(t, m)
	dir := filepath.Join(m.cfg.Dir, "crashes")
	got := testutil.Entries(t, dir)
	slices.Sort(got)
	want := []string{
		"crash-20260314-092653.589-gpu7-2.log",
		"crash-20260314-092653.589-gpu7-3.log",
		"crash-20260314-092653.589-gpu7.log",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("entries = %v, want %v", got, want)
	}
	for _, n := range got {
		data, _ := os.ReadFile(filepath.Join(dir, n))
		if !strings.HasSuffix(string(data), "\n=== End of snapshot ===\n") {
			t.Errorf("%s is not a complete stage-2 file", n)
		}
	}
}

func TestWriteFailureCountedAndCleaned(t *testing.T) {
	rec := &recorder{}
	m, _ := newTestManager(t, func(c *Config) { c.Logger = slog.New(rec) })
	m.files.Ops.Write = func(*os.File, []byte) (int, error) { return 0, errors.New("no space left on device") }
	crash(m, 0, testEvent, testCrashRequest)
	spike(m, 0, func() SpikeRequest { return SpikeRequest{} })
	closeManager(t, m)
	for _, sub := range []string{"crashes", "spikes"} {
		if e := testutil.Entries(t, filepath.Join(m.cfg.Dir, sub)); len(e) != 0 {
			t.Errorf("%s holds %v after failed writes, want nothing", sub, e)
		}
	}
	if c := counted(m); c["snapshot_failures"] != 2 || c["crash_snapshots"] != 0 {
		t.Errorf("counters = %v, want 2 failures", c)
	}
	if w := rec.messages(slog.LevelWarn, "snapshot failed"); len(w) != 2 {
		t.Errorf("%d failure warnings, want 2", len(w))
	}
}

func TestStage2FailureKeepsStage1(t *testing.T) {
	m, _ := newTestManager(t, nil)
	var mu sync.Mutex
	calls := 0
	m.files.Ops.Write = func(f *os.File, p []byte) (int, error) {
		mu.Lock()
		calls++
		n := calls
		mu.Unlock()
		if n == 2 { // stage 2
			_, _ = f.Write(p[:len(p)/2]) // a torn write must never become visible
			return 0, errors.New("I/O error")
		}
		return f.Write(p)
	}
	crash(m, 0, testEvent, testCrashRequest)
	closeManager(t, m)
	dir := filepath.Join(m.cfg.Dir, "crashes")
	e := testutil.Entries(t, dir)
	if len(e) != 1 {
		t.Fatalf("entries = %v, want only the stage-1 file", e)
	}
	data, _ := os.ReadFile(filepath.Join(dir, e[0]))
	if !strings.HasSuffix(string(data), "(stage 1 of 2: diagnostics pending) ===\n") {
		t.Errorf("stage-1 file damaged:\n%s", data)
	}
	if c := counted(m); c["crash_snapshots"] != 1 || c["crash_snapshots_completed"] != 0 || c["snapshot_failures"] != 1 {
		t.Errorf("counters = %v", c)
	}
}

// A snapshot Decide accepted whose request never comes (the work that was
// to gather it was dropped) holds nothing: Close returns at once. Reported
// Lost, it is counted as a failure and logged with its path, and the
// incident no longer names its file.
func TestDecidedSnapshotLost(t *testing.T) {
	rec := &recorder{}
	m, _ := newTestManager(t, func(c *Config) { c.Logger = slog.New(rec) })
	d := m.Decide(0, Event{Reason: "Xid 79", Stage: StageLost})
	if !d.Accepted || d.Snapshot == "" || d.Incident == "" {
		t.Fatalf("not accepted: %+v", d)
	}
	if _, snap := m.Incident(0); snap != d.Snapshot {
		t.Errorf("the incident's snapshot %q before the request, want the decided %q", snap, d.Snapshot)
	}
	m.Lost(d, "dropped by the test")
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := m.Close(ctx); err != nil {
		t.Fatalf("Close waits for a lost snapshot: %v", err)
	}
	if c := counted(m); c["snapshot_failures"] != 1 || c["crash_snapshots"] != 0 {
		t.Errorf("counters %v; want 1 failure, none written", c)
	}
	if id, snap := m.Incident(0); id != d.Incident || snap != "" {
		t.Errorf("incident %q, snapshot %q after the loss; want %q, none", id, snap, d.Incident)
	}
	logged := rec.messages(slog.LevelWarn, "snapshot abandoned before it was built")
	if len(logged) != 1 || logged[0]["path"] != d.Snapshot || logged[0]["why"] != "dropped by the test" {
		t.Errorf("loss logged as %v", logged)
	}
	if names := files(t, filepath.Join(m.cfg.Dir, "crashes"), "*"); len(names) != 0 {
		t.Errorf("files written for a lost snapshot: %v", names)
	}
}

// A request handed after Close is refused and counted; the incident no
// longer names its file.
func TestRequestAfterCloseRefused(t *testing.T) {
	m, _ := newTestManager(t, nil)
	d := m.Decide(0, Event{Reason: "Xid 79", Stage: StageLost})
	closeManager(t, m)
	if m.Crash(CrashRequest{Decision: d}) {
		t.Error("a crash request handed after Close was taken")
	}
	if c := counted(m); c["snapshots_refused_at_shutdown"] != 1 || c["crash_snapshots"] != 0 {
		t.Errorf("counters %v; want 1 refused, none written", c)
	}
	if _, snap := m.Incident(0); snap != "" {
		t.Errorf("the incident names %q, a file refused", snap)
	}
}

// A decided snapshot handed later (behind the rows it ends with) is written
// where the decision said.
func TestDecidedSnapshotBuiltLater(t *testing.T) {
	m, _ := newTestManager(t, nil)
	d := m.Decide(0, Event{Reason: "Xid 79", Stage: StageLost})
	if d2 := m.Decide(0, Event{Reason: "Xid 79 again", Stage: StageLost}); d2.Accepted || d2.Incident != d.Incident {
		t.Errorf("a repeat inside the cooldown: %+v, want suppressed in incident %s", d2, d.Incident)
	}
	req := testCrashRequest()
	req.Decision = d
	m.Crash(req)
	closeManager(t, m)
	if _, err := os.Stat(d.Snapshot); err != nil {
		t.Errorf("decided snapshot: %v", err)
	}
}

// A header says whether the fan guard held the fans; without --fan-guard
// it has no such line.
func TestHeaderFanGuardLine(t *testing.T) {
	var with, without strings.Builder
	writeHeader(&with, &Header{GPUIndex: 0, FanGuard: "holding fans 0,1 at 78 % (firmware wanted 53 %), 73 °C"})
	writeHeader(&without, &Header{GPUIndex: 0})
	if !strings.Contains(with.String(), "\nFan guard: holding fans 0,1 at 78 % (firmware wanted 53 %), 73 °C\n\n") {
		t.Errorf("header:\n%s", with.String())
	}
	if strings.Contains(without.String(), "Fan guard") {
		t.Errorf("a header without the guard:\n%s", without.String())
	}
}

// A crash snapshot whose stage 1 cannot be written is lost as one dropped
// before it was built (Lost) is: the incident no longer names the file, and
// the follow-ups of the incident it began, which has no snapshot on disk,
// are cancelled, counted and logged instead of vanishing with it (at the
// +1ms follow-up's time or at Close, whichever comes first).
func TestStage1FailureUnnamesAndCancelsFollowUps(t *testing.T) {
	rec := &recorder{}
	m, _ := newTestManager(t, func(c *Config) {
		c.Logger = slog.New(rec)
		c.FollowUps = []time.Duration{time.Millisecond, time.Hour}
	})
	m.files.Ops.Write = func(*os.File, []byte) (int, error) { return 0, errors.New("input/output error") }
	d := crash(m, 0, testEvent, testCrashRequest)
	closeManager(t, m)
	if c := counted(m); c["snapshot_failures"] != 1 || c["follow_ups_canceled"] != 2 || c["follow_ups"] != 0 {
		t.Errorf("counters %v; want 1 failure, the 2 follow-ups cancelled", c)
	}
	if id, snap := m.Incident(0); id != d.Incident || snap != "" {
		t.Errorf("incident %q names %q after its snapshot failed; want %q naming none", id, snap, d.Incident)
	}
	logged := int64(0)
	for _, l := range rec.messages(slog.LevelInfo, "crash follow-ups canceled") {
		logged += l["canceled"].(int64)
	}
	if logged != 2 {
		t.Errorf("cancelled follow-ups logged as %v", rec.messages(slog.LevelInfo, "crash follow-ups canceled"))
	}
	// A later event of the incident points at no missing file either.
	if later := m.Decide(0, Event{Reason: "xid79 again", Stage: StageLost}); later.Accepted || later.Snapshot != "" {
		t.Errorf("a later event: accepted %v, snapshot %q; want suppressed, naming none", later.Accepted, later.Snapshot)
	}
}

// The first spike snapshot the cooldown holds back is said at Info (the
// rest of its burst only at Debug, all counted).
func TestSpikeSuppressionLogged(t *testing.T) {
	rec := &recorder{}
	m, _ := newTestManager(t, func(c *Config) { c.Logger = slog.New(rec) })
	for gpu := range 3 {
		spike(m, gpu, nil)
	}
	closeManager(t, m)
	info := rec.messages(slog.LevelInfo, "spike snapshot suppressed by cooldown")
	if len(info) != 1 || info[0]["gpu"] != int64(1) || info[0]["count"] != uint64(1) {
		t.Errorf("suppressions said at Info: %v, want the first (gpu 1)", info)
	}
	if c := counted(m); c["spike_snapshots_suppressed"] != 2 {
		t.Errorf("counters %v", c)
	}
}
