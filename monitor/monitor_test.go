package monitor

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpu-telemetry/gpu-telemetry/anomaly"
	"github.com/gpu-telemetry/gpu-telemetry/internal/counters"
	"github.com/gpu-telemetry/gpu-telemetry/internal/kclock"
	"github.com/gpu-telemetry/gpu-telemetry/internal/testutil"
	"github.com/gpu-telemetry/gpu-telemetry/kmsg"
	"github.com/gpu-telemetry/gpu-telemetry/live"
	"github.com/gpu-telemetry/gpu-telemetry/reading"
	"github.com/gpu-telemetry/gpu-telemetry/runstate"
	"github.com/gpu-telemetry/gpu-telemetry/sampler"
	"github.com/gpu-telemetry/gpu-telemetry/sampler/fakenvml"
	"github.com/gpu-telemetry/gpu-telemetry/sink"
	"github.com/gpu-telemetry/gpu-telemetry/snapshot"

	// The parts cmd builds after New declare counters too: linked in, as in
	// the daemon, the outputs show theirs (at 0) as the daemon's do.
	_ "github.com/gpu-telemetry/gpu-telemetry/live/control"
	_ "github.com/gpu-telemetry/gpu-telemetry/live/metrics/limit"
)

// fakeRunner answers every diagnostic at once.
type fakeRunner struct{}

func (fakeRunner) Run(_ context.Context, name string, args ...string) ([]byte, error) {
	return []byte(name + " output\n"), nil
}

// plainLog appends lines to a file without lumberjack's background goroutine.
type plainLog struct {
	mu   sync.Mutex
	path string
}

func (l *plainLog) Line(s string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	f, err := os.OpenFile(l.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = f.WriteString(s + "\n")
	return err
}
func (l *plainLog) Reopen() error { return nil }

// Close writes last, as a sink.LineLog's Close does.
func (l *plainLog) Close(last ...string) error {
	for _, s := range last {
		if err := l.Line(s); err != nil {
			return err
		}
	}
	return nil
}

func (l *plainLog) Waiting() int { return 0 }

type rig struct {
	lib   *fakenvml.Lib
	t     testing.TB
	dir   string
	devs  []*fakenvml.Dev
	m     *Monitor
	logs  *testutil.LogBuf
	sigs  chan os.Signal
	steps []string
}

// newRig builds a monitor over n fake GPUs writing into a temp dir.
func newRig(t testing.TB, n int, tweak func(*Config)) *rig {
	t.Helper()
	return newRigOn(t, fakeLib(n), tweak)
}

// fakeLib is a fake driver with n GPUs.
func fakeLib(n int) *fakenvml.Lib {
	lib := &fakenvml.Lib{InitRet: nvml.SUCCESS}
	for i := range n {
		d := fakenvml.NewDev()
		d.UUID = "GPU-" + string(rune('a'+i))
		d.Bus = "00000000:0" + string(rune('1'+i)) + ":00.0"
		lib.Devs = append(lib.Devs, d)
	}
	return lib
}

// newRigOn builds a monitor over the fake driver lib writing into a temp
// dir. A rig that is never run closes its CSV files at the end of the test,
// as Run would have.
func newRigOn(t testing.TB, lib *fakenvml.Lib, tweak func(*Config)) *rig {
	t.Helper()
	return newRigClock(t, lib, kclock.Clock{}, tweak)
}

// newRigClock is newRigOn on the kernel log clock kc (kclock.Anchored):
// a test that places kernel records in the past chooses the boot's length
// instead of taking the host's uptime. The zero kc is the host's own clock.
func newRigClock(t testing.TB, lib *fakenvml.Lib, kc kclock.Clock, tweak func(*Config)) *rig {
	t.Helper()
	return newRigOpen(t, lib, sampler.OpenOptions{KernelClock: kc}, tweak)
}

// newRigOpen is newRigOn with the driver opened with o (its Config and
// Counters are the rig's): a --gpu selection, a kernel log clock.
func newRigOpen(t testing.TB, lib *fakenvml.Lib, o sampler.OpenOptions, tweak func(*Config)) *rig {
	t.Helper()
	r := &rig{t: t, dir: t.TempDir(), logs: &testutil.LogBuf{}, sigs: make(chan os.Signal, 4), lib: lib, devs: lib.Devs}
	reg := counters.New()
	o.Config, o.Counters = sampler.DefaultConfig(100*time.Millisecond), reg
	host, err := sampler.Open(lib, o)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	cfg := Config{
		Version: "test", Host: "testhost", LogDir: r.dir, Interval: 100 * time.Millisecond, Anomaly: anomaly.DefaultConfig(),
		CSV: sink.CSVConfig{RetentionDays: 14, FsyncEvery: time.Second}, Snapshots: snapshot.Config{Runner: fakeRunner{}, FollowUps: []time.Duration{}},
		Logger:   slog.New(slog.NewTextHandler(r.logs, nil)),
		HostRoot: t.TempDir(),
		Counters: reg,
		openLog: func(dir, name string, _ int, _ *counters.Registry) lineLog {
			return &plainLog{path: filepath.Join(dir, name)}
		},
		newTicker: newGoTicker,
		trace: func(s string) {
			mu.Lock()
			r.steps = append(r.steps, s)
			mu.Unlock()
		},
	}
	if tweak != nil {
		tweak(&cfg)
	}
	// Run leaves a clean-stop marker still being written after
	// cleanStopBound (a loaded machine, a test's stalled hook) to finish
	// on its own: wait for it before the temp dir is removed, or its late
	// file lands in a directory being removed.
	// (Not a WaitGroup: nothing orders an abandoned write's Add before
	// the Wait.)
	var marks struct {
		sync.Mutex
		done []chan struct{}
	}
	mark := cfg.markCleanStop
	if mark == nil {
		mark = runstate.MarkCleanStop
	}
	cfg.markCleanStop = func(dir string, at time.Time) error {
		done := make(chan struct{})
		marks.Lock()
		marks.done = append(marks.done, done)
		marks.Unlock()
		defer close(done)
		return mark(dir, at)
	}
	t.Cleanup(func() {
		marks.Lock()
		pending := marks.done
		marks.Unlock()
		for _, done := range pending {
			<-done
		}
	})
	m, err := New(cfg, host)
	if err != nil {
		t.Fatal(err)
	}
	r.m = m
	t.Cleanup(func() {
		// A snapshot the test's events began is written by the Manager's
		// own goroutines: wait for it before the temp dir is removed (a
		// no-op after Run, which closed it).
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		m.snaps.Close(ctx)
		m.csv.Close() // a no-op after Run
	})
	return r
}

// run runs the monitor, calls during (when not nil), lets it run for d more
// (fake time inside a synctest bubble) and stops it. It returns how long Run
// took to return once stopped.
func (r *rig) run(d time.Duration, during func()) (stopping time.Duration) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- r.m.Run(ctx, r.sigs) }()
	if during != nil {
		during()
	}
	time.Sleep(d)
	stop := time.Now()
	cancel()
	if err := <-done; err != nil {
		r.t.Errorf("Run: %v", err)
	}
	return time.Since(stop)
}

// statusLine renders st as the daemon's status line, without the time.
func statusLine(st Status) string {
	var b bytes.Buffer
	log := slog.New(slog.NewTextHandler(&b, &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey {
			return slog.Attr{}
		}
		return a
	}}))
	log.LogAttrs(context.Background(), slog.LevelInfo, "status", st.Attrs()...)
	return b.String()
}

// csvPath is GPU gpu's CSV of today, named by its board.
func (r *rig) csvPath(gpu int) string {
	uuid := r.devs[gpu].UUID
	return filepath.Join(r.dir, sink.FileName(gpu, sink.BoardID(uuid), time.Now()))
}

func (r *rig) rows(gpu int) []string {
	r.t.Helper()
	paths, _ := filepath.Glob(filepath.Join(r.dir, "gpu"+string(rune('0'+gpu))+"-*deep-*.csv"))
	var rows []string
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			r.t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
		rows = append(rows, lines[2:]...) // after the board line and the header
	}
	return rows
}

// snapshotEnd returns a snapshot file's text and the last of its telemetry
// rows.
func snapshotEnd(t *testing.T, path string) (text, lastRow string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	_, rows, _ := strings.Cut(string(b), "=== Last 50 telemetry readings ===\n")
	rows, _, _ = strings.Cut(rows, "\n\n")
	lines := strings.Split(rows, "\n")
	return string(b), strings.TrimSpace(lines[len(lines)-1])
}

// oneSnapshot fails t unless exactly one file under dir matches glob (a
// snapshot), and returns its text and last telemetry row (see snapshotEnd).
func oneSnapshot(t *testing.T, dir, glob string) (text, lastRow string) {
	t.Helper()
	paths, _ := filepath.Glob(filepath.Join(dir, glob))
	if len(paths) != 1 {
		t.Fatalf("snapshots %s: %v, want 1", glob, paths)
	}
	return snapshotEnd(t, paths[0])
}

func rowTime(t testing.TB, row string) time.Time {
	t.Helper()
	ts, err := time.Parse(sink.TimestampLayout, row[:strings.IndexByte(row, ',')])
	if err != nil {
		t.Fatal(err)
	}
	return ts
}

func TestCadenceWithoutDrift(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 2, nil)
		start := time.Now()
		r.run(10*time.Second+50*time.Millisecond, nil)
		for gpu := range 2 {
			rows := r.rows(gpu)
			if len(rows) != 101 {
				t.Fatalf("gpu %d: %d rows in 10.05 s at 100 ms, want 101", gpu, len(rows))
			}
			for k, row := range rows {
				// Fake time: every row is taken exactly on its tick.
				if got, want := rowTime(t, row), start.Add(time.Duration(k)*100*time.Millisecond).Truncate(time.Millisecond); !got.Equal(want) {
					t.Fatalf("gpu %d row %d at %v, want %v", gpu, k, got, want)
				}
			}
		}
		if o := r.m.reg.Load(tickOverruns); o != 0 {
			t.Errorf("overruns %d", o)
		}
	})
}

func TestSlowTickSkipsMissedTicksWithoutBurst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 1, nil)
		start := time.Now()
		var once sync.Once
		r.m.loop.tickHook = func(now time.Time) {
			if now.Sub(start) >= 500*time.Millisecond {
				once.Do(func() { time.Sleep(350 * time.Millisecond) }) // the loop itself is starved
			}
		}
		r.run(2*time.Second+50*time.Millisecond, nil)
		if o := r.m.reg.Load(tickOverruns); o != 3 {
			t.Errorf("overruns = %d, want 3 (ticks at 0.6, 0.7, 0.8 s missed)", o)
		}
		rows := r.rows(0)
		for i := 1; i < len(rows); i++ {
			prev, cur := rowTime(t, rows[i-1]), rowTime(t, rows[i])
			if cur.Sub(prev) < 100*time.Millisecond {
				t.Errorf("rows %d and %d only %v apart: missed ticks were run in a burst", i-1, i, cur.Sub(prev))
			}
			if off := cur.Sub(start) % (100 * time.Millisecond); off != 0 {
				t.Errorf("row %d off the grid by %v: the slow tick shifted later ones", i, off)
			}
		}
	})
}

func TestHungGPUDoesNotDelayOthers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 2, nil)
		start := time.Now()
		release := r.devs[1].Block("GetTemperature", nil)
		r.run(5*time.Second+50*time.Millisecond, func() {
			go func() {
				time.Sleep(3 * time.Second)
				release()
			}()
		})
		// GPU 0 keeps its cadence: 51 rows in 5.05 s.
		if n := len(r.rows(0)); n != 51 {
			t.Errorf("healthy GPU wrote %d rows, want 51", n)
		}
		rows1 := r.rows(1)
		hung := 0
		for _, row := range rows1 {
			if strings.Contains(row, "NVML_HUNG(nvmlDeviceGetTemperature,") {
				hung++
			}
		}
		// Stuck from 0 to 3 s: one row for every tick of the stall, the
		// ones before the 1 s deadline backfilled when it passed.
		if hung < 29 || hung > 30 {
			t.Errorf("%d NVML_HUNG rows, want 29-30 (one per tick from 0.1 s to 3 s)", hung)
		}
		// The timeline never goes back, and the stall shows no gap.
		for i := 1; i < len(rows1); i++ {
			d := rowTime(t, rows1[i]).Sub(rowTime(t, rows1[i-1]))
			if d < 0 || d > 150*time.Millisecond {
				t.Errorf("rows %d and %d of the hung GPU are %v apart", i-1, i, d)
			}
		}
		if !strings.Contains(r.logs.String(), "stall=3s") {
			t.Errorf("stall length not logged as 3s:\n%s", r.logs.String())
		}
		last := rows1[len(rows1)-1]
		if strings.Contains(last, "NVML_HUNG") || rowTime(t, last).Sub(start) < 4900*time.Millisecond {
			t.Errorf("GPU 1 did not recover: last row %q", last)
		}
		crashes, _ := filepath.Glob(filepath.Join(r.dir, "crashes", "crash-*-gpu1.log"))
		if len(crashes) != 1 {
			t.Errorf("crash snapshots for the hung GPU: %v, want 1", crashes)
		}
		logs := r.logs.String()
		if !strings.Contains(logs, "NVML call stuck") || !strings.Contains(logs, "NVML answered again after a hang") {
			t.Errorf("hang and recovery not logged:\n%s", logs)
		}
		ev, _ := os.ReadFile(filepath.Join(r.dir, "events.log"))
		if !bytes.Contains(ev, []byte("type=NVML_HUNG function=nvmlDeviceGetTemperature")) || !bytes.Contains(ev, []byte("type=NVML_RECOVERED")) {
			t.Errorf("events.log:\n%s", ev)
		}
	})
}

func TestLostGPUBacksOffAndOthersContinue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 2, nil)
		r.run(10*time.Second+50*time.Millisecond, func() {
			go func() {
				time.Sleep(2 * time.Second)
				loseGPU(r.devs[1])
			}()
		})
		if n := len(r.rows(0)); n != 101 {
			t.Errorf("healthy GPU wrote %d rows, want 101", n)
		}
		lost := 0
		for _, row := range r.rows(1) {
			if strings.HasSuffix(row, ",GPU_LOST") {
				lost++
			}
		}
		// Lost at 2 s, re-probed after 1, 2 and 4 s: rows at 2, 3, 5, 9 s.
		if lost != 4 {
			t.Errorf("%d GPU_LOST rows, want 4 (back-off 1 s, 2 s, 4 s)", lost)
		}
		// The snapshot is taken once the sample that raised it is a row.
		if _, last := oneSnapshot(t, r.dir, "crashes/crash-*-gpu1.log"); !strings.HasSuffix(last, ",GPU_LOST") {
			t.Errorf("crash snapshot's last row %q is not the GPU_LOST one", last)
		}
	})
}

func TestXidFloodOneSnapshotAndDedupe(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 2, nil)
		r.run(3*time.Second, func() {
			time.Sleep(500 * time.Millisecond)
			now := time.Now()
			for i := range 50 {
				r.m.onEvent(reading.Event{Time: now.Add(time.Duration(i) * 10 * time.Millisecond), GPU: 0,
					Kind: reading.EventXid, Source: reading.SourceNVML, Data: 119})
			}
			// The kernel log reports the same Xid: a duplicate, not an incident.
			r.m.onEvent(kernelXid(t, r.m, kmsg.Record{Message: "NVRM: Xid (PCI:0000:01:00): 119, Timeout after 45s"}, now.Add(600*time.Millisecond)))
		})
		crashes, _ := filepath.Glob(filepath.Join(r.dir, "crashes", "crash-*.log"))
		if len(crashes) != 1 {
			t.Errorf("crash snapshots: %v, want 1", crashes)
		}
		if n := r.counted("crash_snapshots_suppressed"); n != 49 {
			t.Errorf("suppressed %d, want 49", n)
		}
		if r.counted("duplicate_xids") != 1 {
			t.Errorf("duplicates %d, want 1", r.counted("duplicate_xids"))
		}
		ev, _ := os.ReadFile(filepath.Join(r.dir, "events.log"))
		if n := bytes.Count(ev, []byte("xid=119")); n != 51 {
			t.Errorf("events.log has %d Xid 119 lines, want 51", n)
		}
		if !bytes.Contains(ev, []byte("duplicate_of=nvml")) {
			t.Errorf("kernel-log duplicate not marked")
		}
		flagged := 0
		for _, row := range r.rows(0) {
			if strings.Contains(row, "XID(119)") {
				flagged++
			}
		}
		if flagged == 0 {
			t.Errorf("no row carries XID(119)")
		}
	})
}

func TestSignalsAndShutdownOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 1, nil)
		r.run(time.Second, func() {
			time.Sleep(500 * time.Millisecond)
			r.sigs <- syscall.SIGUSR1
			time.Sleep(100 * time.Millisecond)
			p := r.csvPath(0)
			os.Rename(p, p+".moved")
			r.sigs <- syscall.SIGHUP
		})
		logs := r.logs.String()
		if strings.Count(logs, "msg=status") != 1 || strings.Count(logs, `msg="final status"`) != 1 {
			t.Errorf("status lines:\n%s", logs)
		}
		b, err := os.ReadFile(r.csvPath(0))
		if err != nil || !bytes.HasPrefix(b, []byte("# gpu=0 uuid=")) || !bytes.Contains(b, []byte("\ntimestamp,")) {
			t.Errorf("after SIGHUP the CSV was not reopened with its board line and header: %v", err)
		}
		want := []string{"stop-sampling", "listeners-stopped", "workers-stopped", "snapshots-closed", "summary-written", "files-closed", "nvml-closed"}
		if strings.Join(r.steps, ",") != strings.Join(want, ",") {
			t.Errorf("shutdown steps %v, want %v", r.steps, want)
		}
		// Effects, not just order: NVML was shut down once, nothing called
		// the device after Run returned, and the files take no more rows.
		if r.lib.Shut != 1 {
			t.Errorf("nvmlShutdown called %d times, want 1", r.lib.Shut)
		}
		calls, rows := r.devs[0].Total(), len(r.rows(0))
		time.Sleep(time.Second)
		if r.devs[0].Total() != calls || len(r.rows(0)) != rows {
			t.Errorf("device calls or rows after shutdown: %d -> %d calls, %d -> %d rows", calls, r.devs[0].Total(), rows, len(r.rows(0)))
		}
	})
}

func TestShutdownWithStuckCallIsBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 1, nil)
		release := r.devs[0].Block("GetTemperature", nil)
		defer release()
		if d := r.run(2*time.Second, nil); d > 8*time.Second {
			t.Errorf("shutdown took %v with a stuck call", d)
		}
		if !strings.Contains(r.logs.String(), "skipping nvmlShutdown") {
			t.Errorf("nvmlShutdown attempted while a call was stuck")
		}
		// Released after Run returned, the call's goroutine still logs
		// NVML_RECOVERED to events.log: let it finish before the temp dir is
		// removed (cleanup runs before the bubble's goroutines are waited for).
		release()
		synctest.Wait()
	})
}

// A sample stuck in the driver across shutdown comes back while Run waits
// for the workers, after the poll loop stopped: its late row is written,
// not left in a queue nobody reads.
func TestLateRowDuringShutdownIsWritten(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var release func()
		r := newRig(t, 1, func(c *Config) {
			trace := c.trace
			c.trace = func(s string) {
				trace(s)
				if s == "listeners-stopped" {
					// The sample comes back once Run is blocked past this
					// point, waiting for the worker: were the side goroutine
					// stopped before the workers are waited for, it would
					// be stopped by then, whatever the scheduling.
					go func() {
						synctest.Wait()
						release() // the worker queues its late row
					}()
				}
			}
		})
		release = r.devs[0].Block("GetTemperature", nil)
		r.run(2*time.Second+50*time.Millisecond, nil)
		// NVML_HUNG rows for the ticks 0.1-2.0 s, then the late row.
		r.requireInOrder(0, 20+1)
		if n := r.m.reg.Load(sideDrops); n != 0 {
			t.Errorf("side_drops %d, want 0", n)
		}
	})
}

// A sample stuck in the driver past shutdown comes back after Run
// returned: its late row can no longer be written, and is counted in
// side_drops and logged with what was lost, never dropped silently.
func TestLateRowAfterShutdownIsCounted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 1, nil)
		release := r.devs[0].Block("GetTemperature", nil)
		defer release()
		r.run(2*time.Second+50*time.Millisecond, nil)
		rows := len(r.rows(0))
		release()
		synctest.Wait() // the worker handles the sample that came back
		if n := r.m.reg.Load(sideDrops); n != 1 {
			t.Errorf("side_drops %d after a late row came back past shutdown, want 1", n)
		}
		if logs := r.logs.String(); !strings.Contains(logs, "counter=side_drops") || !strings.Contains(logs, "late row") {
			t.Errorf("the lost late row is not logged:\n%s", logs)
		}
		if n := r.m.gpus[0].sideRows.Load(); n != 0 {
			t.Errorf("gpu 0 still counts %d queued rows", n)
		}
		if got := len(r.rows(0)); got != rows {
			t.Errorf("%d rows after shutdown, %d before", got, rows)
		}
	})
}

// The side goroutine blocked at shutdown (a disk that does not answer)
// while a GPU is hung: the work still queued when Run stops waiting for it
// (NVML_HUNG rows, the hang's events.log line and crash snapshot request)
// is lost. Each job must be counted in side_drops before the final status
// line, and the first logged with what it was, never dropped silently; the
// blocked job itself is left to the side goroutine.
func TestSideWorkQueuedPastShutdownIsCounted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var r *rig
		var queued int
		r = newRig(t, 1, func(c *Config) {
			trace := c.trace
			c.trace = func(s string) {
				trace(s)
				if s == "workers-stopped" {
					queued = len(r.m.side.jobs) // the side goroutine runs none of them
				}
			}
		})
		unholdSide := r.holdSide()
		release := r.devs[0].Block("GetTemperature", nil)
		r.run(2*time.Second+50*time.Millisecond, nil)
		if queued == 0 {
			t.Fatal("no work queued behind the blocked side job at shutdown: the loss was not driven")
		}
		logs := r.logs.String()
		before, final, _ := strings.Cut(logs, `msg="final status"`)
		final, _, _ = strings.Cut(final, "\n")
		if want := " side_drops=" + strconv.Itoa(queued) + " "; !strings.Contains(final, want) {
			t.Errorf("%d jobs left queued at shutdown, the final status wants %q:\n%s", queued, want, final)
		}
		if !strings.Contains(before, "counter=side_drops") || !strings.Contains(before, "NVML_HUNG rows") {
			t.Errorf("the lost side work is not logged with what it was before the final status:\n%s", logs)
		}
		// summary.log's final line, written after the drops, counts them.
		lines := r.summaryLines()
		testutil.Contains(t, "the final summary.log line", lines[len(lines)-1], " final | ", " side_drops="+strconv.Itoa(queued)+" ")
		if n := r.m.gpus[0].sideRows.Load(); n != 0 {
			t.Errorf("gpu 0 still counts %d queued rows", n)
		}
		unholdSide()
		release()
		synctest.Wait() // the side goroutine and the worker finish before the temp dir goes
	})
}

// Samples stuck in the driver when shutdown begins, before the poll loop
// reports them hung, come back lost after the snapshot manager closed: their
// rows are counted in rows_dropped, and the crash snapshots they ask for must
// be counted, and the first logged (GPU and reason), not refused silently.
func TestSnapshotRefusedAfterShutdownIsCounted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 2, nil)
		blocked := make(chan []func(), 1)
		r.run(time.Second+50*time.Millisecond, func() {
			go func() {
				time.Sleep(time.Second - 50*time.Millisecond)
				var releases []func()
				for _, d := range r.devs {
					// Not GetFieldValues: a sample waiting for the
					// process-wide field lock is not durably blocked.
					d.Set("GetFieldValues", nvml.ERROR_UNKNOWN)
					d.Set("GetTemperature", nvml.ERROR_GPU_IS_LOST)
					releases = append(releases, d.Block("GetTemperature", nil))
				}
				blocked <- releases
			}()
		})
		releases := <-blocked
		for i, release := range releases {
			defer release()
			if _, busy := r.m.gpus[i].w.Busy(); !busy {
				t.Fatalf("no sample of gpu %d stuck in the driver at shutdown", i)
			}
		}
		for _, release := range releases { // one at a time: gpu 0's is the first refused
			release()
			synctest.Wait() // the worker handles the lost sample that came back
		}
		counts := map[string]uint64{}
		for _, c := range r.m.counters() {
			if c.Loss {
				counts[c.Name] = c.Value
			}
		}
		if counts["rows_dropped"] != 2 {
			t.Errorf("rows_dropped = %d, want 2: the late samples did not come back after the files closed", counts["rows_dropped"])
		}
		if n, ok := counts["snapshots_refused_at_shutdown"]; n != 2 {
			t.Errorf("snapshots_refused_at_shutdown = %d (a loss counter: %v), want 2", n, ok)
		}
		logs := r.logs.String()
		var lines []string
		for _, l := range strings.Split(logs, "\n") {
			if strings.Contains(l, "counter=snapshots_refused_at_shutdown") {
				lines = append(lines, l)
			}
		}
		if len(lines) != 1 {
			t.Fatalf("the refused snapshots are logged %d times, want once (the first):\n%s", len(lines), logs)
		}
		testutil.Contains(t, "the refused snapshot's log line", lines[0], "gpu=0", `reason="GPU lost`, "a crash snapshot")
		if crashes, _ := filepath.Glob(filepath.Join(r.dir, "crashes", "*")); len(crashes) != 0 {
			t.Errorf("crash snapshots written after shutdown: %v", crashes)
		}
	})
}

// An Xid reported just before shutdown, after the GPU's last row: its
// flag waits for a row that never comes. The Xid is in events.log; the lost
// flag is counted in xid_flags_dropped and logged, never dropped silently.
func TestXidFlagPendingAtShutdownIsCounted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 1, nil)
		r.run(0, func() {
			time.Sleep(time.Second + 50*time.Millisecond) // between two ticks
			r.m.onEvent(reading.Event{Time: time.Now(), GPU: 0, Kind: reading.EventXid, Source: reading.SourceNVML, Data: 79})
		})
		for _, row := range r.rows(0) {
			if strings.Contains(row, "XID(79)") {
				t.Fatalf("a row after the Xid was written: %q", row)
			}
		}
		if n := r.m.reg.Load(xidFlagsDropped); n != 1 {
			t.Errorf("xid_flags_dropped %d with an Xid flag still waiting at shutdown, want 1", n)
		}
		logs := r.logs.String()
		if !strings.Contains(logs, "counter=xid_flags_dropped") || !strings.Contains(logs, "xid=79") {
			t.Errorf("the lost Xid flag is not logged:\n%s", logs)
		}
		if !strings.Contains(logs, "xid_flags_dropped=1") {
			t.Errorf("the final status does not count the lost Xid flag:\n%s", logs)
		}
		// summary.log too: its final line is written after the Xid flags
		// are given up (no summary window ended before the stop).
		lines := r.summaryLines()
		if len(lines) != 1 {
			t.Fatalf("summary.log has %d lines, want the final one:\n%s", len(lines), strings.Join(lines, "\n"))
		}
		testutil.Contains(t, "the final summary.log line", lines[0], " final | ", " xid_flags_dropped=1 ")
	})
}

// summaryLines returns summary.log's lines.
func (r *rig) summaryLines() []string {
	r.t.Helper()
	b, err := os.ReadFile(filepath.Join(r.dir, "summary.log"))
	if err != nil {
		r.t.Fatal(err)
	}
	return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
}

// counted returns the counter name's value in the daemon's registry.
func (r *rig) counted(name string) uint64 {
	r.t.Helper()
	for _, v := range r.m.reg.Read() {
		if v.Name == name {
			return v.Value
		}
	}
	r.t.Fatalf("no counter %s", name)
	return 0
}

// lossyCloseLog is a line log that loses lost lines at Close, as a
// sink.LineLog does with lines still waiting for a full disk, counted in
// the registry it was given.
type lossyCloseLog struct {
	plainLog
	lost   uint64
	counts *counters.Registry
}

func (l *lossyCloseLog) Close(last ...string) error {
	l.counts.Add(counters.Lookup("log_lines_lost_at_exit"), l.lost)
	return l.plainLog.Close(last...)
}

// The final summary.log line is written once events.log is closed: the
// events.log lines its close gives up on are in the line's totals.
func TestFinalSummaryLineCountsEventsLostAtClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 1, func(c *Config) {
			open := c.openLog
			c.openLog = func(dir, name string, mb int, reg *counters.Registry) lineLog {
				if name == "events.log" {
					return &lossyCloseLog{plainLog: plainLog{path: filepath.Join(dir, name)}, lost: 3, counts: reg}
				}
				return open(dir, name, mb, reg)
			}
		})
		r.run(time.Second, nil)
		lines := r.summaryLines()
		testutil.Contains(t, "the final summary.log line", lines[len(lines)-1], " final | ", " log_lines_lost_at_exit=3 ")
	})
}

// A clean stop in the middle of a summary window writes a last summary.log
// line, marked final, over the part of the window that elapsed: every
// sample is in exactly one window, so the windows' counts add up to the
// total, which is the rows written.
func TestFinalSummaryLineAtStop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 1, func(c *Config) { c.SummaryEvery = 2 * time.Second })
		r.run(4*time.Second+550*time.Millisecond, nil)
		lines := r.summaryLines()
		if len(lines) != 3 {
			t.Fatalf("summary.log has %d lines, want 2 whole windows and the final one:\n%s", len(lines), strings.Join(lines, "\n"))
		}
		rows := len(r.rows(0))
		var inWindows int
		for i, l := range lines {
			final := strings.Contains(l, " final | ")
			if final != (i == len(lines)-1) {
				t.Errorf("line %d marked final: %v:\n%s", i, final, l)
			}
			var total, window int
			if _, err := fmt.Sscanf(l[strings.Index(l, " samples="):], " samples=%d (+%d)", &total, &window); err != nil {
				t.Fatalf("line %d: %v: %s", i, err, l)
			}
			inWindows += window
			if i == len(lines)-1 && total != rows {
				t.Errorf("the final line counts %d samples, %d rows were written:\n%s", total, rows, l)
			}
		}
		if inWindows != rows {
			t.Errorf("the windows count %d samples, %d rows were written:\n%s", inWindows, rows, strings.Join(lines, "\n"))
		}
		// The final window is the 0.55 s since the last whole one (rates
		// take at least 1 s), not a whole window: its rates are over what
		// elapsed.
		testutil.Contains(t, "a whole window's line", lines[1], " window=2s | ")
		testutil.Contains(t, "the final line", lines[2], " window=1s final | ")
	})
}

func TestStatusAndSummaryGolden(t *testing.T) {
	// Every counter the monitor registers, in the registry's order, with
	// made-up values: a part whose counters are not registered, or one out
	// of place, changes the golden.
	cs := newRig(t, 1, nil).m.counters()
	for i := range cs {
		cs[i].Value = uint64(i * 3)
	}
	start := time.Date(2026, 11, 29, 13, 30, 0, 0, time.UTC)
	st := Status{
		Host: live.Host{Start: start, Now: start.Add(2*time.Hour + 5*time.Minute), Counters: cs,
			Pacer: live.Pacer{Level: 2, TickNVML: reading.Some(61_240 * time.Microsecond), LastLate: reading.Some(54_100 * time.Microsecond)}},
		Incidents: 50,
		Total: anomaly.Counters{
			Total:     counts(map[string]uint64{"samples": 149998, "spikes": 1, "pwr_breaches": 74692, "fan_inversions": 900, "spurious_throttles": 20, "tdp_changes": 2}),
			PeakTempC: reading.Some[uint32](92), PeakPowerMW: reading.Some[uint32](612_400),
			Window: counts(map[string]uint64{"samples": 6000, "pwr_breaches": 4440, "fan_inversions": 100}),
		},
		Window: 300 * time.Second,
		GPUs: []GPUStatus{
			{GPU: live.GPU{Info: reading.GPU{Index: 0}, Samples: 75000, Failures: 3, HungRows: 20, Incidents: 50}, PeakTempC: reading.Some[uint32](92), PeakPower: reading.Some[uint32](612_400), Busy: true},
			{GPU: live.GPU{Info: reading.GPU{Index: 1}, Samples: 74998}},
		},
	}
	b := bytes.NewBufferString(statusLine(st))
	now := time.Date(2026, 11, 29, 15, 35, 0, 0, time.FixedZone("CET", 3600))
	b.WriteString(SummaryLine(now, st, st.Total.Window, 300*time.Second, false) + "\n")
	b.WriteString(SummaryLine(now.Add(42*time.Second), st, counts(map[string]uint64{"samples": 840, "pwr_breaches": 21}), 42*time.Second, true) + "\n")
	testutil.Golden(t, "status-and-summary.golden", b.Bytes())
}

// counts returns the detectors' counts by counter name.
func counts(byName map[string]uint64) anomaly.Counts {
	var c anomaly.Counts
	for name, n := range byName {
		c[anomaly.CounterNamed(name)] = n
	}
	return c
}

func TestFailuresBackOffAndRecover(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 2, nil)
		fns := []string{"GetFieldValues", "GetTemperature", "GetPowerManagementLimit", "GetPerformanceState", "GetClockInfo",
			"GetUtilizationRates", "GetMemoryInfo_v2", "GetCurrentClocksEventReasons", "GetFanSpeed_v2", "GetTargetFanSpeed",
			"GetEncoderUtilization", "GetDecoderUtilization", "GetCurrPcieLinkGeneration", "GetCurrPcieLinkWidth",
			"GetThermalSettings", "GetPowerUsage", "GetEnforcedPowerLimit", "GetTotalEnergyConsumption", "GetPcieReplayCounter"}
		r.run(8*time.Second+50*time.Millisecond, func() {
			go func() {
				time.Sleep(time.Second - 50*time.Millisecond)
				for _, fn := range fns {
					r.devs[1].Set(fn, nvml.ERROR_UNKNOWN)
				}
				time.Sleep(3 * time.Second)
				for _, fn := range fns {
					r.devs[1].Set(fn, nvml.SUCCESS)
				}
			}()
		})
		failed := 0
		var after []string
		for _, row := range r.rows(1) {
			if strings.Contains(row, "NVML_FAILED:") {
				failed++
			} else if failed > 0 {
				after = append(after, row)
			}
		}
		// Five failures at 10 Hz, then the 5 s back-off: the next try (at
		// about 6.4 s) finds the GPU answering again.
		if failed != 5 {
			t.Errorf("%d NVML_FAILED rows, want 5 before the back-off", failed)
		}
		if len(after) == 0 || rowTime(t, after[0]).Sub(rowTime(t, r.rows(1)[0])) < 6*time.Second {
			t.Errorf("back-off not honoured: first row after the failures %v", after)
		}
		logs := r.logs.String()
		if !strings.Contains(logs, "GPU answers again") || !strings.Contains(logs, "after_failures=5") {
			t.Errorf("recovery not logged with the failure count:\n%s", logs)
		}
		if n := len(r.rows(0)); n != 81 {
			t.Errorf("healthy GPU wrote %d rows, want 81", n)
		}
		// One, taken once the failed sample is a row and counted: its rows
		// end with it and its header counts it.
		text, last := oneSnapshot(t, r.dir, "crashes/crash-*-gpu1.log")
		if !strings.Contains(last, "NVML_FAILED:") || !strings.Contains(text, " nvml_failures=1 ") {
			t.Errorf("crash snapshot of the first failure: last row %q, header:\n%s", last, text)
		}
	})
}

func TestLateTickPolicy(t *testing.T) {
	iv := 100 * time.Millisecond
	cases := []struct {
		late time.Duration
		skip bool
	}{{0, false}, {time.Millisecond, false}, {25 * time.Millisecond, false}, {26 * time.Millisecond, true}, {90 * time.Millisecond, true}}
	for _, c := range cases {
		if got := lateTick(c.late, iv); got != c.skip {
			t.Errorf("lateTick(%v) = %v, want %v", c.late, got, c.skip)
		}
	}
}

// Both tickers, after the loop was stalled 350 ms at 100 ms: the ticks at
// 0.6, 0.7 and 0.8 s are missed and the next one runs on the grid at 0.9 s.
func TestTickersSkipLateTicksTheSameWay(t *testing.T) {
	t.Run("go timers, fake time", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			start := time.Now()
			tk := newGoTicker(100 * time.Millisecond)
			for range 5 {
				tk.Next()
			}
			time.Sleep(350 * time.Millisecond)
			missed, ok := tk.Next()
			if !ok || missed != 3 || time.Since(start) != 900*time.Millisecond {
				t.Errorf("after the stall: missed %d at %v, want 3 at 900ms", missed, time.Since(start))
			}
		})
	})
	t.Run("timerfd, real time", func(t *testing.T) {
		iv := 40 * time.Millisecond
		tk := newTimerfdTicker(iv).(*timerfdTicker)
		defer tk.Stop()
		for range 2 {
			if _, ok := tk.Next(); !ok {
				t.Fatal("stopped")
			}
		}
		time.Sleep(3*iv + iv/2) // ticks 3, 4 and 5 pass; 5 is noticed half an interval late
		missed, ok := tk.Next()
		// A loaded machine only adds to the count; fewer than 3 would mean
		// the late tick was run instead of skipped.
		if !ok || missed < 3 {
			t.Errorf("after the stall: missed %d, want at least 3 (the late one included)", missed)
		}
	})
}

func TestTimerfdTicker(t *testing.T) {
	tk := newTimerfdTicker(5 * time.Millisecond)
	for i := range 5 {
		if _, ok := tk.Next(); !ok {
			t.Fatalf("tick %d: ticker stopped", i)
		}
	}
	// A stall longer than two intervals reports the missed ticks.
	time.Sleep(30 * time.Millisecond)
	if missed, ok := tk.Next(); !ok || missed < 2 {
		t.Errorf("after a 30 ms stall at 5 ms: missed %d, ok %v", missed, ok)
	}
	done := make(chan bool)
	go func() {
		_, ok := tk.Next()
		done <- ok
	}()
	time.Sleep(2 * time.Millisecond)
	tk.Stop()
	tk.Stop()
	select {
	case <-done: // a tick may have fired just before Stop: either result is fine
	case <-time.After(5 * time.Second):
		t.Fatal("Stop did not unblock Next")
	}
	if _, ok := tk.Next(); ok {
		t.Errorf("Next after Stop returned a tick")
	}
}

// The poll loop's wait for a tick allocates nothing (it ran twice a tick,
// about 1 % of the logger's CPU in perf, before the callback was bound once).
func TestTimerfdTickerDoesNotAllocate(t *testing.T) {
	tk := newTimerfdTicker(time.Millisecond)
	defer tk.Stop()
	tk.Next()
	if n := testing.AllocsPerRun(20, func() { tk.Next() }); n != 0 {
		t.Errorf("Next allocates %.1f times per tick", n)
	}
}

// failingLog refuses every line.
type failingLog struct{}

func (failingLog) Line(string) error     { return syscall.ENOSPC }
func (failingLog) Reopen() error         { return nil }
func (failingLog) Close(...string) error { return nil }

func (failingLog) Waiting() int { return 0 }

// TestLostWorkIsCountedShownAndLogged provokes each kind of work the monitor
// can lose and requires its counter in the SIGUSR1 status line and in the
// summary.log line, and the first occurrence logged once with what was lost.
func TestLostWorkIsCountedShownAndLogged(t *testing.T) {
	tests := []struct {
		counter string
		lost    string // part of what the first log record says was lost
		provoke func(m *Monitor)
		times   int
	}{
		{counter: "side_drops", lost: "late row", times: 2, provoke: func(m *Monitor) {
			for len(m.side.jobs) < cap(m.side.jobs) {
				m.side.jobs <- sideJob{gpu: -1, f: func() {}}
			}
			m.side.queue("the late row of a sample that was stuck in the driver", 0, func() {})
		}},
		{counter: "xid_flags_dropped", lost: "XID flag", times: 1, provoke: func(m *Monitor) {
			for range 9 {
				m.gpus[0].addXid(79)
			}
		}},
		{counter: "flags_dropped", lost: "flags beyond", times: 1, provoke: func(m *Monitor) {
			s := reading.Sample{GPU: 0, Time: time.Now()}
			for range reading.MaxFlags + 1 {
				s.Flags.Add(reading.Flag{Kind: reading.FlagXid, A: 13})
			}
			m.gpus[0].record(&s, &anomaly.Result{}, false, sampleIncident{})
		}},
		{counter: "log_lines_failed", lost: "events.log line", times: 3, provoke: func(m *Monitor) {
			m.events = failingLog{}
			m.eventLine(sink.EventLine{Time: time.Now(), Type: "Test"})
		}},
		{counter: "kmsg_malformed", lost: "could not be parsed", times: 1, provoke: func(m *Monitor) {
			m.reg.Add(counters.Lookup("kmsg_malformed"), 4)
		}},
		{counter: "kmsg_overruns", lost: "overwrote", times: 1, provoke: func(m *Monitor) {
			m.reg.Add(counters.Lookup("kmsg_overruns"), 2)
		}},
		{counter: "rows_dropped", lost: "CSV rows not written", times: 2, provoke: func(m *Monitor) {
			m.csv.Close()
			s := reading.Sample{GPU: 0, Time: time.Now()}
			m.csv.Write(&s)
		}},
	}
	for _, tc := range tests {
		t.Run(tc.counter, func(t *testing.T) {
			r := newRig(t, 1, nil)
			m := r.m
			for range tc.times {
				tc.provoke(m)
			}
			m.checkLosses(map[string]bool{})
			st := m.collect()
			summary := SummaryLine(time.Now(), st, anomaly.Counts{}, time.Minute, false)
			for name, out := range map[string]string{"status line": statusLine(st), "summary.log": summary} {
				if !strings.Contains(out, " "+tc.counter+"=") || strings.Contains(out, " "+tc.counter+"=0 ") || strings.HasSuffix(out, " "+tc.counter+"=0") {
					t.Errorf("%s does not show a non-zero %s: %s", name, tc.counter, out)
				}
			}
			logs := r.logs.String()
			if n := strings.Count(logs, "counter="+tc.counter+" "); n != 1 {
				t.Errorf("first occurrence of %s logged %d times, want 1:\n%s", tc.counter, n, logs)
			}
			if !strings.Contains(logs, tc.lost) {
				t.Errorf("log does not say what was lost (%q):\n%s", tc.lost, logs)
			}
		})
	}
}

// TestEveryLossCounterReachesEveryOutput walks the registry: each loss
// counter is in the status line and the summary line.
func TestEveryLossCounterReachesEveryOutput(t *testing.T) {
	r := newRig(t, 1, nil)
	st := r.m.collect()
	status, summary := statusLine(st), SummaryLine(time.Now(), st, anomaly.Counts{}, time.Minute, false)
	for _, d := range r.m.reg.Read() {
		if d.Help == "" {
			t.Errorf("counter %s has no help text", d.Name)
		}
		for name, out := range map[string]string{"status line": status, "summary.log": summary} {
			if !strings.Contains(out, " "+d.Name+"=") {
				t.Errorf("%s lacks %s", name, d.Name)
			}
		}
	}
}

// TestViewCountersAreInTheTable: every counter the views and the monitor
// read by name is registered; a renamed counter would otherwise show n/a in
// status and top forever (and rows_dropped_10m would never warn).
func TestViewCountersAreInTheTable(t *testing.T) {
	names := map[string]bool{}
	for _, c := range newRig(t, 1, nil).m.counters() {
		names[c.Name] = true
	}
	for _, n := range live.ViewCounters {
		if !names[n] {
			t.Errorf("counter %q, read by name, is not registered", n)
		}
	}
}

// TestPublishedView follows a hang through the published view: the poll
// loop publishes the stuck GPU as hung within one deadline while its worker
// is inside the driver, the other GPU keeps publishing fresh samples, and the
// hung GPU is ok again once the call returns, with its incident and crash
// snapshot path.
func TestPublishedView(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 2, nil)
		release := r.devs[1].Block("GetTemperature", nil)
		views := make(chan live.View, 2)
		r.run(5*time.Second+50*time.Millisecond, func() {
			go func() {
				time.Sleep(2500 * time.Millisecond) // blocked since about 0 s; deadline 1 s
				views <- r.m.Board().View()
				release()
				time.Sleep(2 * time.Second)
				views <- r.m.Board().View()
			}()
		})
		during, after := <-views, <-views
		g0, g1 := during.GPUs[0], during.GPUs[1]
		if g0.State.Kind != live.StateAnswering || during.Host.Now.Sub(g0.Sample.Time) > 150*time.Millisecond {
			t.Errorf("healthy GPU during the hang: state %v, sample at %v (now %v)", g0.State.Kind, g0.Sample.Time, during.Host.Now)
		}
		if g1.State.Kind != live.StateHung || g1.State.Function != "nvmlDeviceGetTemperature" {
			t.Errorf("stuck GPU published as %+v, want hung in nvmlDeviceGetTemperature", g1.State)
		}
		if d := during.Host.Now.Sub(g1.State.Since); d < 2*time.Second || d > 2600*time.Millisecond {
			t.Errorf("hung for %v, want about 2.5 s", d)
		}
		if g1.Incidents != 1 || g1.LastIncident.IsZero() {
			t.Errorf("incident not published: %d at %v", g1.Incidents, g1.LastIncident)
		}
		a1 := after.GPUs[1]
		if a1.State.Kind != live.StateAnswering || a1.HungRows < 20 {
			t.Errorf("after the hang: state %v, hung rows %d", a1.State.Kind, a1.HungRows)
		}
		if !strings.Contains(a1.NewestSnapshot, filepath.Join(r.dir, "crashes", "crash-")) {
			t.Errorf("newest snapshot path %q", a1.NewestSnapshot)
		}
		h := after.Host
		ticks, _ := h.Counter(live.CounterTicks)
		skips, _ := h.Counter(live.CounterBusySkips)
		if ticks < 40 || h.Cadence.Mean < 99*time.Millisecond || h.Cadence.Mean > 101*time.Millisecond || h.Cadence.P99 > 101*time.Millisecond {
			t.Errorf("ticks %d, cadence %+v", ticks, h.Cadence)
		}
		if h.LastIncident.GPU != 1 || !strings.Contains(h.LastIncident.Reason, "NVML_HUNG") {
			t.Errorf("last incident %+v", h.LastIncident)
		}
		if h.Version != "test" || h.Interval != 100*time.Millisecond || len(h.Counters) != len(r.m.reg.Read()) {
			t.Errorf("host view %+v", h)
		}
		// The stuck GPU's ticks were skipped: the busy_skips counter says so.
		if skips == 0 {
			t.Errorf("busy skips not counted")
		}
	})
}

// statsLog is a line log with fixed counts: lines waiting, and delayed and
// lost at exit counted in its registry when it is opened (newStatsLog).
type statsLog struct {
	plainLog
	waiting int
}

func newStatsLog(path string, reg *counters.Registry, waiting int, delayed, lost uint64) *statsLog {
	reg.Add(counters.Lookup("log_lines_delayed"), delayed)
	reg.Add(counters.Lookup("log_lines_lost_at_exit"), lost)
	return &statsLog{plainLog: plainLog{path: path}, waiting: waiting}
}

func (l *statsLog) Waiting() int { return l.waiting }

// TestHostViewLogLines: what the line logs hold back now reaches the host
// view (status, metrics), summed over events.log and summary.log; what they
// delayed and lost is in the counter table only.
func TestHostViewLogLines(t *testing.T) {
	r := newRig(t, 1, func(c *Config) {
		c.openLog = func(dir, name string, _ int, reg *counters.Registry) lineLog {
			return newStatsLog(filepath.Join(dir, name), reg, 1, 4, 1)
		}
	})
	h := r.m.Board().View().Host
	if want := (live.LogLines{Waiting: 2}); h.LogLines != want {
		t.Errorf("log lines %+v, want %+v", h.LogLines, want)
	}
	want := map[string]uint64{"log_lines_delayed": 8, "log_lines_lost_at_exit": 2}
	for _, c := range h.Counters {
		if w, ok := want[c.Name]; ok {
			if c.Value != w {
				t.Errorf("%s = %d, want %d", c.Name, c.Value, w)
			}
			delete(want, c.Name)
		}
	}
	for name := range want {
		t.Errorf("%s is not in the host view's counters", name)
	}
}

// TestHostViewReadsNeverCallBack: a reader of the Board (the control
// socket, a scrape) gets the host view the monitor published; it never
// calls back into the monitor, so a monitor busy under its own locks
// cannot hold up an answer.
func TestHostViewReadsNeverCallBack(t *testing.T) {
	r := newRig(t, 1, nil)
	r.m.states.mu.Lock() // what assembling the host view takes
	defer r.m.states.mu.Unlock()
	got := make(chan live.View, 1)
	go func() { got <- r.m.Board().View() }()
	select {
	case v := <-got:
		if v.Host.Version != "test" || len(v.Host.Counters) != len(r.m.reg.Read()) {
			t.Errorf("host view %+v, want the one New published", v.Host)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("reading the Board waits on the monitor")
	}
}

// stuckReopenLog is a line log whose Reopen blocks until released, as a
// reopen does on a disk that stopped answering.
type stuckReopenLog struct {
	plainLog
	entered chan struct{}
	release chan struct{}
}

func (l *stuckReopenLog) Reopen() error {
	close(l.entered)
	<-l.release
	return nil
}

// TestStuckSignalHandlerDoesNotHoldShutdown: the poll loop does not wait
// for its signals' goroutine, so a SIGHUP handler stuck in a reopen (a log
// file's close on a stalled disk) does not keep SIGTERM's shutdown from
// running (systemd would kill the daemon at TimeoutStopSec, without its
// final summary line). The stub stands in for any stuck reopen (a real
// line log's Reopen and Close do not wait on a write stuck on its file).
func TestStuckSignalHandlerDoesNotHoldShutdown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		stuck := &stuckReopenLog{entered: make(chan struct{}), release: make(chan struct{})}
		r := newRig(t, 1, func(c *Config) {
			c.openLog = func(dir, name string, _ int, _ *counters.Registry) lineLog {
				if name == EventsLog {
					stuck.path = filepath.Join(dir, name)
					return stuck
				}
				return &plainLog{path: filepath.Join(dir, name)}
			}
		})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error)
		go func() { done <- r.m.Run(ctx, r.sigs) }()
		time.Sleep(300 * time.Millisecond)
		r.sigs <- syscall.SIGHUP
		<-stuck.entered
		cancel()
		select {
		case <-done:
		case <-time.After(time.Minute): // the bubble's clock: no real wait
			t.Error("shutdown waited for the signal handler stuck in a reopen")
			close(stuck.release)
			<-done
			return
		}
		if !strings.Contains(strings.Join(r.steps, ","), "files-closed") {
			t.Errorf("shutdown steps %v: the files were not closed", r.steps)
		}
		close(stuck.release) // the handler returns; nothing waits for it
	})
}

// TestSamplerAndMonitorShareOneRegistry: a monitor given another registry
// than the sampler's is refused, since the sampler's counters would reach
// no output.
func TestSamplerAndMonitorShareOneRegistry(t *testing.T) {
	host, err := sampler.Open(fakeLib(1), sampler.OpenOptions{Config: sampler.DefaultConfig(100 * time.Millisecond), Counters: counters.New()})
	if err != nil {
		t.Fatal(err)
	}
	_, err = New(Config{LogDir: t.TempDir(), Interval: 100 * time.Millisecond, Anomaly: anomaly.DefaultConfig(), Counters: counters.New(),
		CSV:    sink.CSVConfig{RetentionDays: 14, FsyncEvery: time.Second},
		Logger: slog.New(slog.DiscardHandler)}, host)
	if err == nil || !strings.Contains(err.Error(), "not the registry the sampler was opened with") {
		t.Fatalf("New with another registry than the sampler's: %v", err)
	}
}

// TestNewRefusesNoInterval: a Config without an interval is an error from
// New, not a division by zero when the GPUs' states are made (the CLI
// validates its flags; New is the last guard for any other caller).
func TestNewRefusesNoInterval(t *testing.T) {
	reg := counters.New()
	host, err := sampler.Open(fakeLib(1), sampler.OpenOptions{Config: sampler.DefaultConfig(100 * time.Millisecond), Counters: reg})
	if err != nil {
		t.Fatal(err)
	}
	_, err = New(Config{LogDir: t.TempDir(), Anomaly: anomaly.DefaultConfig(), Counters: reg,
		CSV:    sink.CSVConfig{RetentionDays: 14, FsyncEvery: time.Second},
		Logger: slog.New(slog.DiscardHandler)}, host)
	if err == nil || !strings.Contains(err.Error(), "Interval") {
		t.Fatalf("New without an interval: %v", err)
	}
}
