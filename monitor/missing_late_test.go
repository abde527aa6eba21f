package monitor

import (
	"context"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpu-telemetry/gpu-telemetry/action"
	"github.com/gpu-telemetry/gpu-telemetry/action/board"
	"github.com/gpu-telemetry/gpu-telemetry/runstate"
	"github.com/gpu-telemetry/gpu-telemetry/sampler"
	"github.com/gpu-telemetry/gpu-telemetry/sampler/fakenvml"
	"github.com/gpu-telemetry/gpu-telemetry/sink"
)

// A board an earlier run already missed (its state file; a restart in the
// same boot), still gone, with another GPU stuck at this start: the boards
// not seen cannot be told from missing ones until that GPU answers, and
// then it is raised, once (one GPU_MISSING line, gpus_missing 1, its
// action in the host view), however often the check runs after.
func TestEarlierMissingBoardRaisedOnceEveryGPUAnswered(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lib := fakeLib(2)
		answer := lib.Devs[1].Block("GetName", nil)
		t.Cleanup(answer)
		r := newRigOn(t, lib, nil)
		const gone = "GPU-dead0002-0000-0000-0000-000000000000"
		h := action.History{UUID: gone}
		h.Boot("an-earlier-boot")
		if err := board.Write(r.dir, h); err != nil {
			t.Fatal(err)
		}
		var atStart int
		r.run(5*time.Second, func() {
			time.Sleep(3 * time.Second)
			atStart = r.m.hostView().GPUsMissing
			answer()
		})
		if !strings.Contains(r.logs.String(), "its static facts are known now") {
			t.Fatalf("GPU 1 did not answer within the run:\n%s", r.logs)
		}
		if atStart != 0 {
			t.Errorf("gpus_missing %d while GPU 1 was stuck, want 0 (it may be the board)", atStart)
		}
		lines := func() int { return strings.Count(r.eventsLog(), "uuid="+gone+" ") }
		if n := lines(); n != 2 { // its ACTION line and its GPU_MISSING line
			t.Errorf("%d lines of the missing board, want 2:\n%s", n, r.eventsLog())
		}
		hv := r.m.hostView()
		if hv.GPUsMissing != 1 || len(hv.Missing) != 1 || hv.Missing[0].UUID != gone || !hv.Missing[0].Action.Action.Drains() {
			t.Errorf("host view: gpus_missing %d, missing %+v", hv.GPUsMissing, hv.Missing)
		}
		r.m.missingFromState() // again: nothing
		if n, hv := lines(), r.m.hostView(); n != 2 || hv.GPUsMissing != 1 || len(hv.Missing) != 1 {
			t.Errorf("the check run again: %d lines of the missing board, gpus_missing %d, %d missing boards; want 2, 1, 1", n, hv.GPUsMissing, len(hv.Missing))
		}
	})
}

// With --gpu selecting GPU 0, GPU 1 (not selected) could not be identified
// at start (its UUID read failed, or it was stuck in the driver): a board
// of the previous run that no GPU known is may be it, and is not said
// missing then. Its UUID is read again aside from the poll loop (every
// --inventory-interval) until it is known; then the previous run's board
// it is not is raised missing, once (its GPU_MISSING line, gpus_missing 1,
// host.missing_boards), and the board it is, is not.
func TestMissingBoardOnceAnUnselectedGPUIsIdentified(t *testing.T) {
	const gone = "GPU-dead0001-0000-0000-0000-000000000000"
	for _, tc := range []struct {
		name    string
		prev1   string // the previous run's board at index 1
		unknown func(d *fakenvml.Dev) (answer func())
		missing bool
	}{
		{"uuid read failed, the board gone", gone, failUUID, true},
		{"stuck at start, the board gone", gone, stuckAtStart, true},
		{"uuid read failed, the same board", "GPU-b", failUUID, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r, answer := rigUnselectedUnknown(t, tc.unknown, tc.prev1)
				var atStart int
				r.run(5*time.Second, func() {
					time.Sleep(3 * time.Second)
					atStart = r.m.hostView().GPUsMissing
					answer()
					time.Sleep(2*inventoryEvery + 5*time.Second) // asked again every --inventory-interval
				})
				if u := r.m.host.EnumeratedUUIDs(); u[1] != "GPU-b" {
					t.Fatalf("GPU 1's UUID %q, want GPU-b read again", u[1])
				}
				if atStart != 0 {
					t.Errorf("gpus_missing %d while GPU 1 was not identified, want 0 (it may be the board)", atStart)
				}
				ev, hv := r.eventsLog(), r.m.hostView()
				lines := strings.Count(ev, "uuid="+tc.prev1+" level=critical gpu=? source=start type=GPU_MISSING")
				inventory := strings.Count(ev, "type=INVENTORY change=missing")
				switch {
				case tc.missing && (lines != 1 || inventory != 1 || hv.GPUsMissing != 1 || len(hv.Missing) != 1 || hv.Missing[0].UUID != gone):
					t.Errorf("the board gone: %d GPU_MISSING lines, %d INVENTORY missing lines, gpus_missing %d, missing boards %+v; want 1, 1, 1, %s:\n%s",
						lines, inventory, hv.GPUsMissing, hv.Missing, gone, ev)
				case !tc.missing && (strings.Contains(ev, "type=GPU_MISSING") || inventory != 0 || hv.GPUsMissing != 0 || len(hv.Missing) != 0):
					t.Errorf("GPU 1's own board raised missing: gpus_missing %d, missing boards %+v:\n%s", hv.GPUsMissing, hv.Missing, ev)
				}
			})
		})
	}
}

// rigUnselectedUnknown is a rig monitoring GPU 0 alone (--gpu 0), GPU 1's
// UUID unknown at start (unknown, until answer), over a previous run whose
// boards were GPU-a at index 0 and prev1 at index 1.
func rigUnselectedUnknown(t *testing.T, unknown func(d *fakenvml.Dev) (answer func()), prev1 string) (*rig, func()) {
	t.Helper()
	lib := fakeLib(2)
	answer := unknown(lib.Devs[1])
	t.Cleanup(answer)
	r := newRigOpen(t, lib, sampler.OpenOptions{Select: []string{"0"}}, nil)
	if len(r.m.gpus) != 1 || r.m.host.EnumeratedUUIDs()[1] != "" {
		t.Fatalf("%d GPUs monitored, enumerated %q: want GPU 0 alone, GPU 1's UUID unknown", len(r.m.gpus), r.m.host.EnumeratedUUIDs())
	}
	prev := []sink.Board{{Index: 0, UUID: "GPU-a", Bus: "00000000:01:00.0"}, {Index: 1, UUID: prev1, Bus: "00000000:02:00.0"}}
	if err := runstate.Write(r.dir, runstate.State{BootID: "b", Started: time.Now().Add(-time.Hour), PID: 1, GPUs: prev}); err != nil {
		t.Fatal(err)
	}
	return r, answer
}

// failUUID makes d's UUID read fail until answer.
func failUUID(d *fakenvml.Dev) (answer func()) {
	d.Set("GetUUID", nvml.ERROR_UNKNOWN)
	return func() { d.Set("GetUUID", nvml.SUCCESS) }
}

// stuckAtStart makes d's start-up read wait in the driver until answer.
func stuckAtStart(d *fakenvml.Dev) (answer func()) { return d.Block("GetName", nil) }

// A read of a GPU --gpu did not select still inside the driver at exit
// (Reidentify's, or its start-up read) keeps nvmlShutdown from being
// called, as a stuck sample does: it could block as long as the fault
// lasts, or pull the library from under the read. The stop names it.
func TestShutdownSkippedWithAnUnselectedGPUsReadStuck(t *testing.T) {
	for _, tc := range []struct {
		name  string
		stuck func(d *fakenvml.Dev) (entered <-chan string, release func())
		run   time.Duration
	}{
		{"read again (Reidentify)", func(d *fakenvml.Dev) (<-chan string, func()) {
			entered := make(chan string, 1)
			release := d.Block("GetUUID", entered)
			d.Set("GetUUID", nvml.SUCCESS)
			return entered, release
		}, inventoryEvery + 5*time.Second},
		{"start-up read", nil, 5 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				lib := fakeLib(2)
				var release func()
				if tc.stuck == nil {
					release = stuckAtStart(lib.Devs[1])
				} else {
					failUUID(lib.Devs[1])
				}
				r := newRigOpen(t, lib, sampler.OpenOptions{Select: []string{"0"}}, nil)
				var entered <-chan string
				if tc.stuck != nil {
					entered, release = tc.stuck(lib.Devs[1])
				}
				r.run(tc.run, nil)
				if entered != nil {
					select {
					case <-entered:
					default:
						t.Fatal("GPU 1's UUID was not read again")
					}
				}
				if r.lib.Shut != 0 {
					t.Errorf("nvmlShutdown called with GPU 1's read inside the driver")
				}
				if logs := r.logs.String(); !strings.Contains(logs, "skipping nvmlShutdown") || !strings.Contains(logs, "unselected_gpu 1") {
					t.Errorf("the stop did not say it skips nvmlShutdown for GPU 1's read:\n%s", logs)
				}
				release()
				synctest.Wait()
			})
		})
	}
}

// stickSideQueue sticks the side goroutine in a job that waits until hold
// is closed, and fills the side queue but for free slots.
func (r *rig) stickSideQueue(free int) (hold chan struct{}) {
	hold = make(chan struct{})
	r.m.side.jobs <- sideJob{gpu: -1, f: func() { <-hold }}
	time.Sleep(time.Millisecond) // the side goroutine is in it
	for len(r.m.side.jobs) < cap(r.m.side.jobs)-free {
		r.m.side.jobs <- sideJob{gpu: -1, f: func() {}}
	}
	return hold
}

// The judgement of the previous run's boards once every GPU --gpu did not
// select has its UUID (missingUnselected) is side work: dropped by a full
// side queue (a stuck disk; counted in side_drops), it is queued again at
// the next inventory round, until it has run.
func TestMissingBoardJudgedAfterItsSideJobWasDropped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const gone = "GPU-dead0001-0000-0000-0000-000000000000"
		r, answer := rigUnselectedUnknown(t, failUUID, gone)
		var whileFull int
		var drops uint64
		r.run(5*time.Second, func() {
			time.Sleep(3 * time.Second)
			hold := r.stickSideQueue(0)
			answer()
			time.Sleep(2*inventoryEvery + 5*time.Second) // read again, then judged: dropped
			whileFull, drops = r.m.hostView().GPUsMissing, r.m.reg.Load(sideDrops)
			close(hold)
			time.Sleep(inventoryEvery)
		})
		if u := r.m.host.EnumeratedUUIDs(); u[1] != "GPU-b" {
			t.Fatalf("GPU 1's UUID %q, want GPU-b read again", u[1])
		}
		if whileFull != 0 || drops == 0 {
			t.Fatalf("while the side queue was full: gpus_missing %d, side_drops %d; want 0, more than 0", whileFull, drops)
		}
		ev, hv := r.eventsLog(), r.m.hostView()
		lines := strings.Count(ev, "uuid="+gone+" level=critical gpu=? source=start type=GPU_MISSING")
		if lines != 1 || strings.Count(ev, "type=INVENTORY change=missing") != 1 || hv.GPUsMissing != 1 {
			t.Errorf("the board gone: %d GPU_MISSING lines, gpus_missing %d; want 1, 1 (INVENTORY missing once):\n%s", lines, hv.GPUsMissing, ev)
		}
	})
}

// An unselected GPU identified after the start's checks found it without a
// UUID, but before the inventory goroutine first looks: the judgement the
// checks owe is still made (at the next round), not taken as done.
func TestMissingBoardJudgedWhenTheGPUIsIdentifiedBeforeTheFirstRound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const gone = "GPU-dead0001-0000-0000-0000-000000000000"
		r, answer := rigUnselectedUnknown(t, failUUID, gone)
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		r.m.startBootCheck(ctx, &wg) // GPU 1 has no UUID: the board gone is not judged
		answer()
		r.m.host.Reidentify()
		synctest.Wait()
		if u := r.m.host.EnumeratedUUIDs(); u[1] != "GPU-b" {
			t.Fatalf("GPU 1's UUID %q, want GPU-b read again", u[1])
		}
		wg.Go(func() { r.m.runInventory(ctx) })
		wg.Go(func() { r.m.side.serve(ctx.Done(), func(j sideJob) { j.f() }) })
		time.Sleep(inventoryEvery + 5*time.Second)
		cancel()
		wg.Wait()
		ev, hv := r.eventsLog(), r.m.hostView()
		lines := strings.Count(ev, "uuid="+gone+" level=critical gpu=? source=start type=GPU_MISSING")
		if lines != 1 || hv.GPUsMissing != 1 {
			t.Errorf("the board gone: %d GPU_MISSING lines, gpus_missing %d; want 1, 1:\n%s", lines, hv.GPUsMissing, ev)
		}
	})
}

// While the judgement of the previous run's boards (missingUnselected) waits
// on the side queue behind a stuck job, later inventory rounds do not queue
// it again: one copy waits, no slot meant for row work is taken by copies,
// and none is dropped and counted in side_drops as lost work while the first
// is still queued. Once the side goroutine moves, it is judged once.
func TestMissingBoardJudgementQueuedOnceWhileItWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const gone = "GPU-dead0001-0000-0000-0000-000000000000"
		r, answer := rigUnselectedUnknown(t, failUUID, gone)
		var copies, queued int
		var drops uint64
		r.run(5*time.Second, func() {
			time.Sleep(3 * time.Second)
			hold := r.stickSideQueue(2) // the queue full but for two slots
			answer()
			time.Sleep(5*inventoryEvery + 5*time.Second) // read again, judgement queued, then three rounds more
			drops = r.m.reg.Load(sideDrops)
			var jobs []sideJob
			r.m.side.drain(func(j sideJob) { jobs = append(jobs, j) })
			for _, j := range jobs {
				if strings.HasPrefix(j.what, "missing boards") {
					copies++
				}
				r.m.side.jobs <- j
			}
			queued = len(jobs)
			close(hold)
			time.Sleep(inventoryEvery)
		})
		if u := r.m.host.EnumeratedUUIDs(); u[1] != "GPU-b" {
			t.Fatalf("GPU 1's UUID %q, want GPU-b read again", u[1])
		}
		if copies != 1 || drops != 0 {
			t.Errorf("while the side goroutine was stuck: %d copies of the judgement queued (of %d jobs), side_drops %d; want 1, 0", copies, queued, drops)
		}
		if n := r.m.reg.Load(sideDrops); n != 0 {
			t.Errorf("side_drops %d at exit, want 0", n)
		}
		ev, hv := r.eventsLog(), r.m.hostView()
		lines := strings.Count(ev, "uuid="+gone+" level=critical gpu=? source=start type=GPU_MISSING")
		if lines != 1 || strings.Count(ev, "type=INVENTORY change=missing") != 1 || hv.GPUsMissing != 1 {
			t.Errorf("the board gone: %d GPU_MISSING lines, gpus_missing %d; want 1, 1 (INVENTORY missing once):\n%s", lines, hv.GPUsMissing, ev)
		}
	})
}
