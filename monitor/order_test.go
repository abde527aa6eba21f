package monitor

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpu-telemetry/gpu-telemetry/reading"
	"github.com/gpu-telemetry/gpu-telemetry/sampler/fakenvml"
)

// requireInOrder fails unless gpu's CSV rows are want rows whose times
// strictly increase.
func (r *rig) requireInOrder(gpu, want int) {
	r.t.Helper()
	rows := r.rows(gpu)
	if len(rows) != want {
		r.t.Errorf("gpu %d: %d rows, want %d", gpu, len(rows), want)
	}
	for i := 1; i < len(rows); i++ {
		if prev, cur := rowTime(r.t, rows[i-1]), rowTime(r.t, rows[i]); !cur.After(prev) {
			r.t.Errorf("gpu %d: row %d at %v after row %d at %v:\n%s\n%s", gpu, i, cur.Format(time.TimeOnly+".000"),
				i-1, prev.Format(time.TimeOnly+".000"), rows[i-1], rows[i])
		}
	}
}

// holdSide makes the side goroutine's first job a disk that does not
// answer: every job queued after it waits until unhold is called.
func (r *rig) holdSide() (unhold func()) {
	hold := make(chan struct{})
	r.m.side.jobs <- sideJob{gpu: -1, f: func() { <-hold }}
	return func() { close(hold) }
}

// A hang's rows are written by the side goroutine; while it lags (a slow
// disk, a snapshot being taken, a starved CPU) the rows the GPU's worker
// produces after the hang must still land after them: the file is in time
// order whatever the side goroutine's lag, and no row is lost.
func TestRowsStayInOrderWhileSideWorkLags(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 2, nil)
		unholdSide := r.holdSide()
		release := r.devs[1].Block("GetTemperature", nil)
		r.run(5*time.Second+50*time.Millisecond, func() {
			go func() {
				time.Sleep(2950 * time.Millisecond) // between two ticks: the late row has a time of its own
				release()
				time.Sleep(time.Second) // the recovered GPU writes ten rows while the side work still waits
				unholdSide()
			}()
		})
		r.requireInOrder(0, 51)
		// GPU 1: NVML_HUNG rows for the ticks 0.1-2.9 s, the late row of the
		// stuck sample at 2.95 s, then the ticks 3.0-5.0 s.
		r.requireInOrder(1, 29+1+21)
		if n := r.m.reg.Load(sideDrops); n != 0 {
			t.Errorf("side_drops %d", n)
		}
		if n := r.m.gpus[1].sideRows.Load(); n != 0 {
			t.Errorf("gpu 1 still counts %d queued rows after shutdown", n)
		}
	})
}

// The poll loop sees a sample stuck past its deadline, and the sample
// comes back before the loop reports it (hung). The report must not turn
// into a new hang: no NVML_HUNG row after the late row, no second
// NVML_HUNG event (nor crash snapshot request), and no NVML_RECOVERED for
// the next, healthy, sample.
func TestHangReportRacingTheSampleItReports(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 1, nil)
		gs := r.m.gpus[0]
		release := r.devs[0].Block("GetTemperature", nil)
		start := time.Now()
		var raced bool
		r.m.loop.tickHook = func(now time.Time) {
			if raced || now.Sub(start) < 1500*time.Millisecond {
				return
			}
			raced = true
			time.Sleep(10 * time.Millisecond) // between two ticks
			// The poll loop's two steps (tick), with the sample's return
			// in between.
			fn, since, stuck := gs.w.Stuck(r.m.cfg.mono(), r.m.cfg.Deadline)
			if !stuck {
				t.Errorf("sample not stuck at %v", time.Since(start))
				return
			}
			release()
			for _, busy := gs.w.Busy(); busy; _, busy = gs.w.Busy() {
				runtime.Gosched()
			}
			gs.hung(instant{Wall: time.Now(), Mono: r.m.cfg.mono()}, since, fn)
		}
		r.run(3*time.Second+50*time.Millisecond, nil)
		if !raced {
			t.Fatal("the race was not driven")
		}
		// NVML_HUNG rows for the ticks 0.1-1.5 s, the late row at 1.51 s,
		// the ticks 1.6-3.0 s.
		r.requireInOrder(0, 15+1+15)
		ev, err := os.ReadFile(filepath.Join(r.dir, "events.log"))
		if err != nil {
			t.Fatal(err)
		}
		for _, typ := range []string{"type=NVML_HUNG", "type=NVML_RECOVERED"} {
			if n := strings.Count(string(ev), typ+" "); n != 1 {
				t.Errorf("%d %s lines, want 1:\n%s", n, typ, ev)
			}
		}
		if hung := gs.slot.Get().HungRows; hung != 15 {
			t.Errorf("hung_rows %d, want 15", hung)
		}
	})
}

// A sample of a GPU without rows on the side goroutine (every sample but
// those of a hang and its aftermath) is written without allocating: the
// check that keeps rows in order (sideRows) costs an atomic load.
func TestHandleDoesNotAllocate(t *testing.T) {
	r := newRig(t, 1, nil)
	gs := r.m.gpus[0]
	var s reading.Sample
	gs.g.Sample(&s)
	if s.Status != reading.StatusAnswered {
		t.Fatalf("fake GPU's sample: status %v %s", s.Status, s.Err)
	}
	gs.handle(&s)
	if n := testing.AllocsPerRun(100, func() {
		s.Time = s.Time.Add(100 * time.Millisecond)
		gs.handle(&s)
	}); n != 0 {
		t.Errorf("handle: %v allocations per sample, want 0", n)
	}
}

// A snapshot a sample asks for (a fan spike's, a crash snapshot for a
// failed or lost sample) is taken once the sample is a row and published:
// its header counts that sample, and its rows end with it, whether the row
// was written at once or queued behind earlier rows of the GPU (then the
// request waits behind the row).
func TestIncidentSnapshotCountsItsSample(t *testing.T) {
	incidents := []struct {
		name    string
		provoke func(d *fakenvml.Dev)
		glob    string
		counted string // what in the header counts the sample
	}{
		{"spike", func(d *fakenvml.Dev) { d.Update(func(d *fakenvml.Dev) { d.FanSpeed[0] = 90 }) }, "spikes/spike-*-gpu0.log", ", 6 samples\n"},
		{"lost", loseGPU, "crashes/crash-*-gpu0.log", " nvml_failures=1 "},
	}
	for _, in := range incidents {
		for _, queued := range []bool{false, true} {
			name := in.name + "/written"
			if queued {
				name = in.name + "/queued"
			}
			t.Run(name, func(t *testing.T) {
				r := newRig(t, 1, nil)
				gs, s, sample := stepper(r, 5)
				in.provoke(r.devs[0])
				if queued {
					gs.sideRows.Add(1) // a row of the GPU still waits on the side goroutine
				}
				sample(5)
				if queued {
					gs.sideRows.Add(-1)
					r.runSide()
				}
				if err := r.m.snaps.Close(t.Context()); err != nil {
					t.Fatal(err)
				}
				text, last := oneSnapshot(t, r.dir, in.glob)
				if !strings.Contains(text, in.counted) {
					t.Errorf("%s snapshot's header lacks %q (its sample):\n%s", in.name, in.counted, text)
				}
				if want := s.Time.Format("15:04:05.000"); !strings.Contains(last, want) {
					t.Errorf("%s snapshot's last row %q is not its sample's (%s)", in.name, last, want)
				}
			})
		}
	}
}

// A fan spike of a GPU whose rows wait on the side goroutine (after a hang)
// queues its snapshot request there too. The side goroutine must not call
// NVML for it (reading the fans' policies): that call would race the GPU's
// worker and, stuck in the driver, hold up every GPU's file work. Here the
// policy read would be stuck while the side goroutine is free: no policy
// call is made for the snapshot (they come from memory), and the side
// goroutine goes on running its queue.
func TestSpikeQueuedBehindRowsDoesNotCallNVMLOnTheSideGoroutine(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 1, nil)
		unholdSide := r.holdSide()
		releaseTemp := r.devs[0].Block("GetTemperature", nil)
		entered := make(chan string, 64)
		var sideRan bool
		r.run(time.Second, func() {
			time.Sleep(2950 * time.Millisecond) // past the deadline: NVML_HUNG rows queue behind the held side goroutine
			releaseTemp()
			time.Sleep(time.Second) // rows of the recovered GPU queue behind the hang's
			releasePolicy := r.devs[0].Block("GetFanControlPolicy_v2", entered)
			defer releasePolicy()
			r.devs[0].Update(func(d *fakenvml.Dev) { d.FanSpeed[0] = 90 }) // a spike on the next sample
			time.Sleep(150 * time.Millisecond)
			unholdSide()
			// The policy read would be stuck in the driver: the side
			// goroutine still runs what is queued after the snapshot.
			ran := make(chan struct{})
			r.m.side.jobs <- sideJob{gpu: -1, f: func() { close(ran) }}
			select {
			case <-ran:
				sideRan = true
			case <-time.After(time.Second):
			}
		})
		if n := len(entered); n != 0 {
			t.Errorf("%d calls of the fans' policies for the queued spike snapshot, want none", n)
		}
		if !sideRan {
			t.Error("the side goroutine is stuck in NVML (the fans' policies of a queued spike snapshot)")
		}
		if text, _ := oneSnapshot(t, r.dir, "spikes/spike-*-gpu0.log"); !strings.Contains(text, "auto (temperature-controlled)") {
			t.Errorf("spike snapshot without the fans' policies:\n%s", text)
		}
	})
}

// A fan spike's snapshot shows the fans' control policies as the worker
// last read them, as part of a sample: the handler makes no NVML call after
// classify. Were it to call the driver there and the call hang, the poll
// loop would see the worker stuck but the hang report would find the sample
// already classified: no NVML_HUNG rows, no events.log line, no crash
// snapshot, and the ticks lost uncounted. Here the policy call hangs from
// just before a spike (fan 0 to 90 %) for 3 s: the GPU keeps a row for every
// tick, and the snapshot shows the policies read before.
func TestSpikeSnapshotMakesNoNVMLCallAfterClassify(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 1, nil)
		entered := make(chan string, 64)
		r.run(600*time.Millisecond, func() {
			time.Sleep(450 * time.Millisecond) // the first samples read the policies
			release := r.devs[0].Block("GetFanControlPolicy_v2", entered)
			r.devs[0].Update(func(d *fakenvml.Dev) { d.FanSpeed[0] = 90 }) // a spike on the next sample
			time.Sleep(3 * time.Second)
			release()
		})
		if len(entered) != 0 {
			t.Errorf("%d calls of the fans' policies while the spike was handled", len(entered))
		}
		ticks, busy := r.m.reg.Load(ticksRun), r.m.reg.Load(busySkips)
		rows := r.rows(0)
		if uint64(len(rows)) != ticks || busy != 0 {
			t.Errorf("%d ticks: %d rows, %d busy skips; want a row for every tick", ticks, len(rows), busy)
		}
		if hung := r.m.gpus[0].slot.Get().HungRows; hung != 0 {
			t.Errorf("hung_rows %d, want 0", hung)
		}
		// Read by the first sample, 500 ms before the spike's.
		want := "fan[0]: policy=auto (temperature-controlled) (read 500ms before this sample)\n"
		if text, _ := oneSnapshot(t, r.dir, "spikes/spike-*-gpu0.log"); !strings.Contains(text, want) {
			t.Errorf("spike snapshot lacks %q:\n%s", want, text)
		}
	})
}

// A worker can be busy inside an NVML call with its sample already
// classified (a call in the handler). The hang report then declines (the
// sample came back) and the poll loop does not dispatch: each such tick is
// still counted in busy_skips, never lost. Driven here by marking the stuck
// sample classified, as its handler would have.
func TestTickOfAClassifiedSampleStillBusyIsCounted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 1, nil)
		gs := r.m.gpus[0]
		var marked bool
		var blocked atomic.Bool // the driver holds samples from now on
		r.m.loop.tickHook = func(time.Time) {
			// Only the sample the block holds: one that is merely still
			// running when a tick ends (the worker is a goroutine of its
			// own) comes back, and marking it would leave the stuck one
			// to be reported hung.
			if since, busy := gs.w.Busy(); busy && !marked && blocked.Load() {
				if _, _, ok := gs.g.InFlight(); ok {
					marked = true
					gs.hmu.Lock()
					gs.finished = since
					gs.hmu.Unlock()
				}
			}
		}
		r.run(600*time.Millisecond, func() {
			time.Sleep(450 * time.Millisecond)
			release := r.devs[0].Block("GetTemperature", nil)
			blocked.Store(true)
			time.Sleep(3 * time.Second) // past the deadline
			release()
		})
		if !marked {
			t.Fatal("no sample was stuck in the driver")
		}
		ticks, busy := r.m.reg.Load(ticksRun), r.m.reg.Load(busySkips)
		rows := r.rows(0)
		if uint64(len(rows))+busy != ticks {
			t.Errorf("%d ticks: %d rows + %d busy skips; every tick must be a row or counted", ticks, len(rows), busy)
		}
		if hung := gs.slot.Get().HungRows; hung != 0 {
			t.Errorf("hung_rows %d, want 0 (the hang report declines for a classified sample)", hung)
		}
	})
}

// stepper takes r's GPU 0 through samples 0 to warm-1 and returns the GPU,
// the sample its steps write, and what takes its sample n into it, stamped n
// intervals of 100 ms after the first, through the GPU's pipeline.
func stepper(r *rig, warm int) (gs *gpuState, s *reading.Sample, sample func(n int)) {
	gs, s, start := r.m.gpus[0], new(reading.Sample), time.Now()
	sample = func(n int) {
		gs.g.Sample(s)
		s.Time = start.Add(time.Duration(n) * 100 * time.Millisecond)
		gs.handle(s)
	}
	for n := range warm {
		sample(n)
	}
	return gs, s, sample
}

// runSide runs what the side goroutine would, in order, until its queue is
// empty.
func (r *rig) runSide() {
	for len(r.m.side.jobs) > 0 {
		(<-r.m.side.jobs).f()
	}
}

// loseGPU makes d answer as a GPU fallen off the bus.
func loseGPU(d *fakenvml.Dev) {
	for _, fn := range []string{"GetFieldValues", "GetTemperature"} {
		d.Set(fn, nvml.ERROR_GPU_IS_LOST)
	}
}
