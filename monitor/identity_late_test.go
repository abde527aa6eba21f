package monitor

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpu-telemetry/gpu-telemetry/kmsg"
	"github.com/gpu-telemetry/gpu-telemetry/runstate"
	"github.com/gpu-telemetry/gpu-telemetry/sampler"
	"github.com/gpu-telemetry/gpu-telemetry/sink"
)

// A GPU whose UUID and bus id could not be read at start (its handle was
// had: it is sampled all along) gives them later, when the sampler reads
// them again. From then on what is keyed by them is its: a kernel Xid line
// naming its bus id (lower case, as the kernel prints it) is its own, its
// rows go to a CSV named by its board (the file opened under no UUID keeps
// the rows before, and no row of the board), run-state has its board, one
// INVENTORY line says which board it is (the previous run's board held
// back at start is not raised missing), and the fans the previous run held
// of it are handed back, once.
func TestIdentityReadLateReachesEveryOutput(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lib := fakeLib(2)
		d := lib.Devs[1]
		d.Set("GetUUID", nvml.ERROR_UNKNOWN)
		d.Set("GetPciInfo", nvml.ERROR_UNKNOWN)
		r := newRigOn(t, lib, withFanGuard)
		if in := r.m.gpus[1].g.Info(); in.UUID != "" || in.BusID != "" || !r.m.gpus[1].g.FactsKnown() {
			t.Fatalf("GPU 1 at start: uuid %q bus %q facts known %v", in.UUID, in.BusID, r.m.gpus[1].g.FactsKnown())
		}
		prev := []sink.Board{{Index: 0, UUID: "GPU-a", Bus: "00000000:01:00.0"}, {Index: 1, UUID: "GPU-b", Bus: "00000000:02:00.0"}}
		if err := runstate.Write(r.dir, runstate.State{BootID: "b", Started: time.Now().Add(-time.Hour), PID: 1, GPUs: prev,
			FanGuard: []runstate.FanHold{{UUID: "GPU-b", Fans: []int{1}}}}); err != nil {
			t.Fatal(err)
		}
		var before map[string]int
		r.run(3*time.Second, func() {
			time.Sleep(3 * time.Second)
			before = d.Calls()
			d.Set("GetUUID", nvml.SUCCESS)
			d.Set("GetPciInfo", nvml.SUCCESS)
			time.Sleep(12 * time.Second) // the sampler asks again every 10 s
			r.m.onKernelRecord(kmsg.Record{Time: 3202 * time.Second, Message: "NVRM: Xid (PCI:0000:02:00): 31, pid=7, name=late-id, MMU Fault"}, time.Now())
		})
		if n := strings.Count(r.logs.String(), "is known now; what is keyed by it is brought up to date"); n != 1 {
			t.Errorf("%d lines say GPU 1's identity arrived, want 1:\n%s", n, r.logs)
		}
		ev := r.eventsLog()
		if !slices.ContainsFunc(strings.Split(ev, "\n"), func(l string) bool {
			return strings.Contains(l, " gpu=1 ") && strings.Contains(l, "xid=31") && strings.Contains(l, "name=late-id")
		}) {
			t.Errorf("the Xid line naming GPU 1's bus id is not GPU 1's:\n%s", ev)
		}
		if n := strings.Count(ev, "change=identified"); n != 1 || !regexp.MustCompile(`uuid=GPU-b .*gpu=1 bus=00000000:02:00.0 .*type=INVENTORY change=identified`).MatchString(ev) {
			t.Errorf("%d INVENTORY identified lines, want 1 for GPU-b:\n%s", n, ev)
		}
		if strings.Contains(ev, "type=GPU_MISSING") || r.m.hostView().GPUsMissing != 0 {
			t.Errorf("GPU-b raised missing:\n%s", ev)
		}
		// The CSV: rows before under no UUID, then the board's file.
		named, err := os.ReadFile(r.csvPath(1))
		if err != nil {
			t.Errorf("no CSV named by GPU 1's board: %v", err)
		} else if first, _, _ := strings.Cut(string(named), "\n"); !strings.Contains(first, "uuid=GPU-b") || strings.Count(string(named), "\n") < 10 {
			t.Errorf("GPU 1's board file begins %q, %d lines", first, strings.Count(string(named), "\n"))
		}
		// No row of the board's, stamped once it was identified, is in a
		// file opened under no UUID: each such file's rows end before the
		// board's file's begin (timestamps sort as text).
		firstRow := func(csv string) string {
			for _, l := range strings.Split(csv, "\n") {
				if l != "" && l[0] >= '0' && l[0] <= '9' {
					ts, _, _ := strings.Cut(l, ",")
					return ts
				}
			}
			return ""
		}
		boardStart := firstRow(string(named))
		unknown, _ := filepath.Glob(filepath.Join(r.dir, "gpu1-"+sink.UnknownBoard+"-deep-*.csv"))
		if len(unknown) == 0 || boardStart == "" {
			t.Errorf("files under no UUID %v, the board's first row %q", unknown, boardStart)
		}
		for _, p := range unknown {
			b, _ := os.ReadFile(p)
			for _, l := range strings.Split(string(b), "\n") {
				if ts, _, _ := strings.Cut(l, ","); l != "" && l[0] >= '0' && l[0] <= '9' && ts >= boardStart {
					t.Errorf("%s, opened under no UUID, has a row of %s, when the board's file had begun (%s)", p, ts, boardStart)
					break
				}
			}
		}
		st, _, err := runstate.Read(r.dir)
		if err != nil {
			t.Fatal(err)
		}
		if len(st.GPUs) != 2 || st.GPUs[1].UUID != "GPU-b" || st.GPUs[1].Bus != "00000000:02:00.0" {
			t.Errorf("run-state's boards %+v", st.GPUs)
		}
		if len(st.FanGuard) != 0 {
			t.Errorf("run-state still holds %+v", st.FanGuard)
		}
		if before["SetDefaultFanSpeed_v2"] != 0 {
			t.Errorf("SetDefaultFanSpeed_v2 called %d times before GPU 1's UUID was known", before["SetDefaultFanSpeed_v2"])
		}
		if n := d.Count("SetDefaultFanSpeed_v2"); n != 1 || !strings.Contains(r.logs.String(), "previous run held these fans") {
			t.Errorf("SetDefaultFanSpeed_v2 called %d times, want 1: the previous run's fan 1 of GPU-b handed back:\n%s", n, r.logs)
		}
	})
}

// Two GPUs whose UUIDs arrive in the same tick each get their INVENTORY
// identified line: the first one's run-state save does not make the
// second look compared at start.
func TestTwoGPUsIdentifiedTogetherEachHaveTheirLine(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lib := fakeLib(3)
		for _, d := range lib.Devs[1:] {
			d.Set("GetUUID", nvml.ERROR_UNKNOWN)
		}
		r := newRigOn(t, lib, nil)
		prev := []sink.Board{{Index: 0, UUID: "GPU-a", Bus: "00000000:01:00.0"}, {Index: 1, UUID: "GPU-b", Bus: "00000000:02:00.0"},
			{Index: 2, UUID: "GPU-c", Bus: "00000000:03:00.0"}}
		if err := runstate.Write(r.dir, runstate.State{BootID: "b", Started: time.Now().Add(-time.Hour), PID: 1, GPUs: prev}); err != nil {
			t.Fatal(err)
		}
		r.run(3*time.Second, func() {
			time.Sleep(3 * time.Second)
			for _, d := range lib.Devs[1:] {
				d.Set("GetUUID", nvml.SUCCESS)
			}
			time.Sleep(12 * time.Second) // the sampler asks again every 10 s
		})
		ev := r.eventsLog()
		for _, uuid := range []string{"GPU-b", "GPU-c"} {
			if n := len(regexp.MustCompile(`uuid=`+uuid+` .*type=INVENTORY change=identified`).FindAllString(ev, -1)); n != 1 {
				t.Errorf("%d INVENTORY identified lines for %s, want 1:\n%s", n, uuid, ev)
			}
		}
	})
}

// A --gpu UUID of a GPU whose UUID did not read at start (its other facts
// did) is pending: the GPU is monitored in its place, its UUID is asked
// again as it is sampled, and once it reads the log says it is the GPU
// --gpu names.
func TestSelectorOfAGPUWhoseUUIDReadLate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lib := fakeLib(2)
		d := lib.Devs[1]
		d.UUID = "GPU-2222b"
		d.Set("GetUUID", nvml.ERROR_UNKNOWN)
		r := newRigOpen(t, lib, sampler.OpenOptions{Select: []string{"GPU-2222b"}}, nil)
		if len(r.m.gpus) != 1 || r.m.gpus[0].idx != 1 {
			t.Fatalf("%d GPUs monitored, want GPU 1 alone", len(r.m.gpus))
		}
		r.run(time.Second, func() {
			time.Sleep(3 * time.Second)
			d.Set("GetUUID", nvml.SUCCESS)
			time.Sleep(12 * time.Second) // the sampler asks again every 10 s
		})
		if got := r.m.gpus[0].g.Info().UUID; got != d.UUID {
			t.Fatalf("GPU 1's UUID %q, want %s read late", got, d.UUID)
		}
		if !strings.Contains(r.logs.String(), "is the one --gpu names") {
			t.Errorf("no line says GPU 1 is the GPU --gpu names:\n%s", r.logs)
		}
	})
}
