package atop

import (
	"strings"
	"testing"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/internal/counters"
	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

func twoGPUs() []reading.GPU {
	return []reading.GPU{
		{Index: 0, BusID: "00000000:01:00.0", Name: "NVIDIA RTX PRO 6000 Blackwell"},
		{Index: 1, BusID: "00000000:21:00.0", Name: "NVIDIA B200"},
	}
}

func row(gpu int, util, memUtil uint32, usedMiB uint64) *reading.Sample {
	return &reading.Sample{GPU: gpu, Status: reading.StatusAnswered, Values: reading.Values{reading.GPUUtil: reading.Some(uint64(util)),
		reading.MemUtil: reading.Some(uint64(memUtil)), reading.VRAMUsedBytes: reading.Some(usedMiB << 20), reading.VRAMTotalBytes: reading.Some(uint64(97887) << 20)}}
}

func proc(pid uint32, sm uint32, memMiB uint64) reading.Process {
	return reading.Process{PID: pid, Kind: reading.ProcCompute, MemBytes: reading.Some(memMiB << 20),
		SMUtil: reading.Some(sm), MemUtil: reading.Some(sm / 2), UtilSupported: true}
}

func procs(gpu int, list ...reading.Process) *reading.Procs {
	return &reading.Procs{GPU: gpu, Status: reading.ProcOK, List: list}
}

// TestSecondAverages: the 100 ms rows of a second are averaged into the
// "now" figures and summed into the cumulative ones, as atopgpud's
// once-a-second reads would be.
func TestSecondAverages(t *testing.T) {
	a := NewAccumulator(twoGPUs(), nil, counters.New())
	for i := range 10 {
		a.Sample(row(0, uint32(40+2*i), 10, 1000)) // 40..58: mean 49
	}
	a.Second()
	for range 10 {
		a.Sample(row(0, 80, 30, 3000))
	}
	a.Sample(&reading.Sample{GPU: 0, Status: reading.StatusHung}) // not a reading
	a.Procs(procs(0))
	a.Second()
	g := &a.gpus[0]
	checks := []struct {
		name      string
		got, want int64
	}{
		{"busy now", g.busy.now, 80},
		{"mem busy now", g.memBusy.now, 30},
		{"mem used now (KiB)", g.memUsed.now, 3000 * 1024},
		{"mem total (KiB)", g.memTotal, 97887 * 1024},
		{"samples", g.samples, 2},
		{"busy cum", g.busy.cum, 49 + 80},
		{"mem busy cum", g.memBusy.cum, 40},
		{"mem used cum", g.memUsed.cum, 4000 * 1024},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %d, want %d", c.name, c.got, c.want)
		}
	}
	// GPU 1 had no rows and no process read: everything -1, no samples.
	g1 := &a.gpus[1]
	if g1.busy.now != -1 || g1.busy.cum != -1 || g1.memTotal != -1 || g1.memUsed.cum != -1 || g1.samples != 0 {
		t.Errorf("GPU without readings: %+v", *g1)
	}
}

// TestUtilAbsent: a GPU whose utilization is never read reports -1 for the
// busy figures while memory is still accumulated.
func TestUtilAbsent(t *testing.T) {
	a := NewAccumulator(twoGPUs()[:1], nil, counters.New())
	s := row(0, 0, 0, 512)
	s.Values[reading.GPUUtil], s.Values[reading.MemUtil] = reading.Opt[uint64]{}, reading.Opt[uint64]{}
	a.Sample(s)
	a.Second()
	g := &a.gpus[0]
	if g.busy.now != -1 || g.busy.cum != -1 || g.memBusy.cum != -1 || g.memUsed.cum != 512*1024 || g.samples != 1 {
		t.Errorf("%+v", *g)
	}
}

// TestReadFoldedOnce: a process read is folded into the sums once. Seconds
// with no new read (the pacer stretched the reads, or the GPU backs off and
// the monitor hands the same read again) change no sum and no count, so
// atop sees no growth instead of an old read as this second's.
func TestReadFoldedOnce(t *testing.T) {
	a := NewAccumulator(twoGPUs()[:1], nil, counters.New())
	a.Procs(procs(0, proc(100, 50, 1024)))
	for range 3 {
		a.Second()
	}
	checkFolded(t, 100, *a.gpus[0].procs[100], procStat{gpuBusy: 50, memNow: 1024 << 10,
		memCum: 1024 << 10, sample: 1, gpuBusyCum: 50, memBusyCum: 25, memCumSeen: 1024 << 10, seen: 1})

	c := a.Register()
	backOff := procs(0, proc(200, 80, 2048)) // 100 exits
	a.Procs(backOff)
	a.Second()
	for range 3 { // the GPU backs off: the monitor hands the same read again
		a.Procs(backOff)
		a.Second()
	}
	checkFolded(t, 200, *a.gpus[0].procs[200], procStat{gpuBusy: 80, memNow: 2048 << 10,
		memCum: 2048 << 10, sample: 1, gpuBusyCum: 80, memBusyCum: 40, memCumSeen: 2048 << 10, seen: 1})
	// No row came: the memory size (from the rows) is unknown.
	if body, _ := a.Stats(2, c); string(body) != "@-1 -1 -1 -1 0 -1 -1 -1#A 200 C 80 40 2097152 2097152 1#E 100 C 50 25 1048576 1048576 1" {
		t.Errorf("v2 reply: %s", body)
	}
}

func checkFolded(t *testing.T, pid uint32, got, want procStat) {
	t.Helper()
	for _, f := range []struct {
		name      string
		got, want int64
	}{
		{"busy", got.gpuBusy, want.gpuBusy}, {"mem now", got.memNow, want.memNow},
		{"mem cum (v1)", got.memCum, want.memCum}, {"sample (v1)", got.sample, want.sample},
		{"busy cum (v2)", got.gpuBusyCum, want.gpuBusyCum}, {"mem busy cum (v2)", got.memBusyCum, want.memBusyCum},
		{"mem cum (v2)", got.memCumSeen, want.memCumSeen}, {"seen (v2)", got.seen, want.seen},
	} {
		if f.got != f.want {
			t.Errorf("pid %d: %s = %d, want %d", pid, f.name, f.got, f.want)
		}
	}
}

// TestV2DivisorFitsEverySum: version 2 divides every sum by one count, so a
// read lacking a figure the process had before (the utilization call
// failed this time) is not a version-2 sample: it adds to no sum, and busy
// and memory stay the averages of the reads that had them. Version 1 keeps
// its own memory divisor and counts that read's memory. A process whose
// utilization is never reported counts every read with its memory.
func TestV2DivisorFitsEverySum(t *testing.T) {
	a := NewAccumulator(twoGPUs()[:1], nil, counters.New())
	noUtil := func(pr reading.Process) reading.Process {
		pr.SMUtil, pr.MemUtil, pr.UtilSupported = reading.Opt[uint32]{}, reading.Opt[uint32]{}, false
		return pr
	}
	for _, list := range [][]reading.Process{
		{proc(100, 60, 1000), noUtil(proc(300, 0, 100))},
		{noUtil(proc(100, 0, 4000)), noUtil(proc(300, 0, 300))}, // the utilization call failed
		{proc(100, 20, 3000), noUtil(proc(300, 0, 200))},
	} {
		a.Procs(procs(0, list...))
		a.Second()
	}
	checkFolded(t, 100, *a.gpus[0].procs[100], procStat{gpuBusy: 20, memNow: 3000 << 10,
		memCum: 8000 << 10, sample: 3, gpuBusyCum: 80, memBusyCum: 40, memCumSeen: 4000 << 10, seen: 2})
	checkFolded(t, 300, *a.gpus[0].procs[300], procStat{gpuBusy: na, memNow: 200 << 10,
		memCum: 600 << 10, sample: 3, gpuBusyCum: na, memBusyCum: na, memCumSeen: 600 << 10, seen: 3})
}

// TestExitedPerClient: each client sees an exit once, in its own next
// request; a client that connects later does not see older exits.
func TestExitedPerClient(t *testing.T) {
	a := NewAccumulator(twoGPUs(), nil, counters.New())
	c1 := a.Register()
	a.Procs(procs(0, proc(100, 50, 1024), proc(200, 10, 512)))
	a.Second()
	c2 := a.Register()
	a.Procs(procs(0, proc(100, 60, 1024)))
	a.Second() // 200 exited
	c3 := a.Register()

	for _, tc := range []struct {
		name string
		c    *Client
		want bool
	}{{"registered before", c1, true}, {"registered before the exit", c2, true}, {"registered after", c3, false}} {
		body, _ := a.Stats(1, tc.c)
		if got := strings.Contains(string(body), "#E 200 "); got != tc.want {
			t.Errorf("%s: exit of 200 in reply %v, want %v: %s", tc.name, got, tc.want, body)
		}
		body, _ = a.Stats(1, tc.c)
		if strings.Contains(string(body), "#E") {
			t.Errorf("%s: exit repeated in the next reply: %s", tc.name, body)
		}
	}
}

// TestExitedDroppedAreCounted: a client that never asks keeps at most
// maxExitedPerClient exits over all GPUs; every exit past that is counted,
// whether it pushes out an older one of its GPU or finds none to push out.
func TestExitedDroppedAreCounted(t *testing.T) {
	a := NewAccumulator(twoGPUs(), nil, counters.New())
	a.Register()
	exit := func(gpu, n int) {
		var list []reading.Process
		for i := range n {
			list = append(list, proc(uint32(1000*(gpu+1)+i), 1, 1))
		}
		a.Procs(procs(gpu, list...))
		a.Second()
		a.Procs(procs(gpu))
		a.Second()
	}
	exit(0, maxExitedPerClient) // full: nothing dropped yet
	if got := a.counts.Load(exitsDropped); got != 0 {
		t.Fatalf("dropped %d before the limit", got)
	}
	exit(1, 10) // GPU 0 holds the backlog: GPU 1's exits are dropped
	exit(0, 5)  // GPU 0's oldest make room
	if got := a.counts.Load(exitsDropped); got != 15 {
		t.Errorf("atop_exits_dropped = %d, want 15", got)
	}
}

// TestNoProcessData: a hung or failed process read sends no process records
// and declares nobody exited; when reads resume, so do the records.
func TestNoProcessData(t *testing.T) {
	a := NewAccumulator(twoGPUs(), nil, counters.New())
	c := a.Register()
	a.Procs(procs(0, proc(100, 50, 1024)))
	a.Second()
	a.Procs(&reading.Procs{GPU: 0, Status: reading.ProcHung, Time: time.Unix(1, 0)})
	a.Second()
	body, _ := a.Stats(1, c)
	if strings.Contains(string(body), "#") {
		t.Errorf("hung read: %s", body)
	}
	a.Procs(procs(0, proc(100, 50, 1024)))
	a.Second()
	body, _ = a.Stats(1, c)
	if !strings.Contains(string(body), "#A 100 50 25 -1 1048576 2097152 2") {
		t.Errorf("after recovery: %s", body)
	}
}

func TestField(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"NVIDIA H100 80GB HBM3", "NVIDIA_H100_80GB_HBM3"},
		{"odd@name#x\ty", "odd_name_x_y"},
		{"  ", "unknown"},
		{"é", "__"},
	} {
		if got := field(tc.in, "unknown"); got != tc.want {
			t.Errorf("field(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestInfoLearntLater(t *testing.T) {
	a := NewAccumulator([]reading.GPU{{Index: 3}}, nil, counters.New())
	if got := string(a.Types(1)); got != "1@unknown unknown 0" {
		t.Errorf("before the static facts: %q", got)
	}
	a.Info(reading.GPU{Index: 3, BusID: "00000000:C1:00.0", Name: "NVIDIA B200"})
	a.Info(reading.GPU{Index: 9, BusID: "x", Name: "y"}) // not monitored: ignored
	if got := string(a.Types(1)); got != "1@00000000:C1:00.0 NVIDIA_B200 0" {
		t.Errorf("after: %q", got)
	}
}
