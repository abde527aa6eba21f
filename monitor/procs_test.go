package monitor

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpu-telemetry/gpu-telemetry/internal/counters"
	"github.com/gpu-telemetry/gpu-telemetry/live"
	"github.com/gpu-telemetry/gpu-telemetry/reading"
	"github.com/gpu-telemetry/gpu-telemetry/sampler/fakenvml"
)

// TestProcessesPublishedAndInCrashSnapshot: the slow tier's process list
// (this test's own PID on GPU 1) reaches the published view once a second,
// and the crash snapshot of GPU 1's hang names the process, read while the
// GPU's sample is stuck.
func TestProcessesPublishedAndInCrashSnapshot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 2, nil)
		pid := uint32(os.Getpid())
		r.devs[1].Update(func(d *fakenvml.Dev) { d.Procs = []nvml.ProcessInfo{{Pid: pid, UsedGpuMemory: 3 << 30}} })
		views := make(chan live.View, 1)
		released := make(chan func(), 1)
		r.run(4*time.Second, func() {
			go func() {
				time.Sleep(1500 * time.Millisecond)
				views <- r.m.Board().View()
				released <- r.devs[1].Block("GetTemperature", nil)
			}()
		})
		// Run has returned with GPU 1's call still stuck. Released now, the
		// call's goroutine logs NVML_RECOVERED to events.log; let it finish
		// before the test's temp dir is removed (cleanup runs before the
		// bubble's goroutines are waited for).
		(<-released)()
		synctest.Wait()
		v := <-views
		p := v.GPUs[1].Processes
		if p == nil || p.Status != reading.ProcOK || len(p.List) != 1 || p.List[0].PID != pid {
			t.Fatalf("published processes of GPU 1: %+v", p)
		}
		if p0 := v.GPUs[0].Processes; p0 == nil || p0.Status != reading.ProcOK || len(p0.List) != 0 {
			t.Errorf("GPU 0 (idle): %+v", p0)
		}
		m, _ := filepath.Glob(filepath.Join(r.dir, "crashes", "crash-*-gpu1.log"))
		if len(m) == 0 {
			t.Fatalf("no crash snapshot for the hang:\n%s", r.logs)
		}
		b, _ := os.ReadFile(m[0])
		snap := string(b)
		i := strings.Index(snap, "=== Processes on this GPU ===")
		if i < 0 {
			t.Fatalf("no processes section:\n%s", snap)
		}
		sec := snap[i:]
		exe, _ := os.ReadFile("/proc/self/comm")
		for _, w := range []string{strconv.Itoa(int(pid)), "3072 MiB", strings.TrimSpace(string(exe)) + ":"} {
			if !strings.Contains(sec, w) {
				t.Errorf("processes section lacks %q:\n%s", w, sec)
			}
		}
	})
}

// TestProcessReadsStretchWithTheSlowTier: the process reads are part of the
// slow tier. At the normal rate each GPU's list is read about once a second;
// when NVML time per tick nears the interval (every call takes 5 ms here, a
// sample about 70 ms of the 100 ms), the pacer stretches the slow tier and the
// process reads with it, and every read held back is counted. One GPU: the
// process-wide field lock (batch.c) is waited for in C, outside the
// test's bubble, and a second GPU waiting on it would stop fake time.
func TestProcessReadsStretchWithTheSlowTier(t *testing.T) {
	reads := func(latency time.Duration) (perGPU []int, held uint64, status string) {
		synctest.Test(t, func(t *testing.T) {
			r := newRig(t, 1, nil)
			r.devs[0].Update(func(d *fakenvml.Dev) { d.Latency = latency })
			r.run(20*time.Second, nil)
			for _, d := range r.devs {
				perGPU = append(perGPU, d.Count("GetComputeRunningProcesses"))
			}
			held = r.m.reg.Load(procsStretched)
			status = r.logs.String()
		})
		return perGPU, held, status
	}
	normal, held, _ := reads(0)
	for i, n := range normal {
		if n < 18 || n > 22 {
			t.Errorf("normal rate: GPU %d's processes read %d times in 20 s, want about once a second", i, n)
		}
	}
	if held != 0 {
		t.Errorf("normal rate: %d reads counted as held back", held)
	}
	slow, held, status := reads(5 * time.Millisecond)
	for i, n := range slow {
		if n > 8 {
			t.Errorf("NVML near the interval: GPU %d's processes read %d times in 20 s, want the slow tier's stretch (at most 8)", i, n)
		}
	}
	if want := uint64(20 - 8); held < want {
		t.Errorf("NVML near the interval: %d reads counted as held back, want at least %d", held, want)
	}
	if !strings.Contains(status, "process_reads_stretched=") || strings.Contains(status, "process_reads_stretched=0 ") {
		t.Errorf("the final status line does not count the held-back reads:\n%s", status)
	}
}

// Whether a process read is hung, in the published view and in a crash
// snapshot, is decided on the monotonic clock, like a sample's hang (see
// TestHangDeadlineIsOnTheMonotonicClock): the wall clock stepping an hour
// forward while a read is in the driver must not report it hung before the
// deadline (a false ProcHung, hungs counted), and stepping back must not hide
// one stuck past it. The read started at a tick (wall0, mono0) blocks in the
// driver; each later check is at the wall clock stepped by step and a
// monotonic reading after mono0.
func TestProcessHangIsOnTheMonotonicClock(t *testing.T) {
	for _, step := range []time.Duration{-time.Hour, time.Hour} {
		t.Run("wall clock steps "+step.String(), func(t *testing.T) {
			r := newClockRig(t)
			go r.gs.pr.Run(t.Context())
			entered := make(chan string, 1)
			release := r.devs[0].Block("GetComputeRunningProcesses", entered)
			defer release()
			deadline := r.m.cfg.Deadline
			wall0, mono0 := time.Now(), 100*time.Second
			r.tick(wall0, mono0)
			<-entered
			r.idle()
			r.drain()
			hung := func() bool {
				return r.gs.pr.Latest().Status == reading.ProcHung || r.m.reg.Load(counters.Lookup("process_reads_hung")) > 0
			}
			snapStuck := func(mono time.Duration) bool {
				r.mono.Store(int64(mono0 + mono))
				sec := r.gs.procSection(wall0.Add(step + mono))
				return strings.Contains(sec[0].Body, "not returned yet")
			}
			if snapStuck(procStuckAfter / 2) {
				t.Errorf("a crash snapshot %v into the read (monotonic) says it has not returned", procStuckAfter/2)
			}
			if !snapStuck(2 * procStuckAfter) {
				t.Errorf("a crash snapshot %v into the read (monotonic) does not say it has not returned", 2*procStuckAfter)
			}
			// After each tick the GPU's own sample is waited for (idle):
			// only the process read hangs. A sample still inside an NVML
			// call at the next tick, which moves the monotonic clock past
			// the deadline, would be reported hung (NVML_HUNG) and take a
			// crash snapshot, written while the test's directory is
			// removed.
			r.tick(wall0.Add(step+deadline/2), mono0+deadline/2)
			r.idle()
			r.drain()
			if hung() {
				t.Fatalf("the read is reported hung %v into it on the monotonic clock (deadline %v): %+v", deadline/2, deadline, r.gs.pr.Latest())
			}
			r.tick(wall0.Add(step+2*deadline), mono0+2*deadline)
			r.idle()
			r.drain()
			if !hung() {
				t.Fatalf("the read is not reported hung %v into it on the monotonic clock (deadline %v): %+v", 2*deadline, deadline, r.gs.pr.Latest())
			}
			if p := r.gs.slot.Get().Processes; p == nil || p.Status != reading.ProcHung || !p.Time.Equal(wall0) {
				t.Errorf("published processes %+v, want hung since the tick that started the read (%v)", p, wall0)
			}
		})
	}
}

// TestIncidentLinesNameTheJob: an Xid's events.log line names the job that
// was on the GPU (from the cgroup of its processes, as last read), and a
// routine line does not; a GPU without a known job gets no job field.
func TestIncidentLinesNameTheJob(t *testing.T) {
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "self", "ns"), 0o755)
	os.Symlink("pid:[4026531836]", filepath.Join(root, "self", "ns", "pid"))
	dir := filepath.Join(root, "100")
	os.MkdirAll(dir, 0o755)
	for name, s := range map[string]string{"comm": "python3\n", "cmdline": "python3\x00train.py", "stat": "100 (python3) S 1 100 100 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 4242 0 0",
		"cgroup": "0::/system.slice/slurmstepd.scope/job_4242/step_0/user/task_0\n"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 2, func(c *Config) { c.ProcRoot = root })
		r.devs[0].Update(func(d *fakenvml.Dev) { d.Procs = []nvml.ProcessInfo{{Pid: 100, UsedGpuMemory: 1 << 30}} })
		r.run(time.Second, func() {
			time.Sleep(1500 * time.Millisecond)
			now := time.Now()
			r.m.onEvent(reading.Event{Time: now, GPU: 0, Kind: reading.EventXid, Source: reading.SourceNVML, Data: 48})
			r.m.onEvent(reading.Event{Time: now, GPU: 1, Kind: reading.EventXid, Source: reading.SourceNVML, Data: 48})
			r.m.onEvent(reading.Event{Time: now, GPU: 0, Kind: reading.EventPState, Source: reading.SourceNVML})
		})
		ev, err := os.ReadFile(filepath.Join(r.dir, "events.log"))
		if err != nil {
			t.Fatal(err)
		}
		var xid0, xid1, other string
		for _, l := range strings.Split(string(ev), "\n") {
			switch {
			case strings.Contains(l, " gpu=0 ") && strings.Contains(l, "type=Xid"):
				xid0 = l
			case strings.Contains(l, " gpu=1 ") && strings.Contains(l, "type=Xid"):
				xid1 = l
			case strings.Contains(l, " gpu=0 ") && strings.Contains(l, "job="):
				other = l
			}
		}
		if !strings.Contains(xid0, ` job="slurm job 4242 step 0"`) {
			t.Errorf("GPU 0's Xid line does not name its job: %q\n%s", xid0, ev)
		}
		if xid1 == "" || strings.Contains(xid1, "job=") {
			t.Errorf("GPU 1 (no process) Xid line: %q", xid1)
		}
		if other != "" {
			t.Errorf("a routine line names the job: %q", other)
		}
	})
}
