package sampler

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpu-telemetry/gpu-telemetry/internal/testutil"
	"github.com/gpu-telemetry/gpu-telemetry/reading"
	"github.com/gpu-telemetry/gpu-telemetry/sampler/fakenvml"
)

// testBase is the base of the monotonic readings the tests tick at.
var testBase = time.Now()

// readOnce kicks one read, on a tick at the wall and monotonic clocks as
// they are, and waits for it to be published.
func readOnce(t *testing.T, p *ProcReader) *reading.Procs {
	t.Helper()
	before := p.Latest()
	p.Tick(time.Now(), time.Since(testBase), true)
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if l := p.Latest(); l != before && l.Status != reading.ProcHung {
			return l
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatal("no read published")
	return nil
}

func newProcTest(t *testing.T, d *fakenvml.Dev, root string) *ProcReader {
	t.Helper()
	h := openFake(t, &fakenvml.Lib{Devs: []*fakenvml.Dev{d}})
	p := NewProcReader(h.GPUs[0], ProcConfig{Deadline: time.Hour, ProcRoot: root}, nil)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go p.Run(ctx)
	return p
}

func TestProcReaderListsProcesses(t *testing.T) {
	d := fakenvml.NewDev()
	d.Procs = []nvml.ProcessInfo{{Pid: 300, UsedGpuMemory: 2 << 30}, {Pid: 100, UsedGpuMemory: 1 << 30}}
	d.GProcs = []nvml.ProcessInfo{{Pid: 100, UsedGpuMemory: 1 << 20}, {Pid: 200, UsedGpuMemory: ^uint64(0)}}
	d.ProcUtil = []nvml.ProcessUtilizationSample{
		{Pid: 100, TimeStamp: 10, SmUtil: 40, MemUtil: 10},
		{Pid: 100, TimeStamp: 20, SmUtil: 60, MemUtil: 20},
		{Pid: 999, TimeStamp: 30, SmUtil: 7, MemUtil: 7}, // not listed: ignored
	}
	long := strings.Repeat("x", 300)
	root := testutil.FakeProc(t, true, map[int][2]string{
		100: {"python3", "python3\x00train.py\x00--lr\x000.1\x00"},
		300: {"long", long},
	})
	p := newProcTest(t, d, root)
	if s := p.Latest().Status; s != reading.ProcNotRead {
		t.Fatalf("before any read: %v", s)
	}
	got := readOnce(t, p)
	if got.Status != reading.ProcOK || len(got.List) != 3 {
		t.Fatalf("read: %+v", got)
	}
	a, b, c := got.List[0], got.List[1], got.List[2]
	if a.PID != 100 || a.Kind != reading.ProcCompute|reading.ProcGraphics || a.MemBytes.V != 1<<30+1<<20 {
		t.Errorf("pid 100: %+v", a)
	}
	if a.SMUtil != reading.Some(uint32(50)) || a.MemUtil != reading.Some(uint32(15)) {
		t.Errorf("pid 100 util: sm %v mem %v, want averages 50/15", a.SMUtil, a.MemUtil)
	}
	if a.Origin != reading.ProcHere || a.Name != "python3" || a.Cmdline != "python3 train.py --lr 0.1" {
		t.Errorf("pid 100 proc: %v %q %q", a.Origin, a.Name, a.Cmdline)
	}
	if b.PID != 200 || b.Kind != reading.ProcGraphics || b.MemBytes.OK || b.Origin != reading.ProcGone {
		t.Errorf("pid 200 (memory not available, gone): %+v", b)
	}
	if b.SMUtil != reading.Some(uint32(0)) {
		t.Errorf("pid 200 without a sample after the call answered: %v, want a real 0", b.SMUtil)
	}
	if c.PID != 300 || len(c.Cmdline) != reading.MaxCmdline || !c.CmdlineTrunc {
		t.Errorf("pid 300 cmdline: %d bytes, cut %v", len(c.Cmdline), c.CmdlineTrunc)
	}

	// The next read passes the newest timestamp: no new samples (NOT_FOUND)
	// means every listed process was idle.
	got = readOnce(t, p)
	if got.List[0].SMUtil != reading.Some(uint32(0)) || !got.List[0].UtilSupported {
		t.Errorf("second read util: %+v", got.List[0])
	}
	if n := d.Count("GetMemoryInfo_v2"); n != 0 {
		t.Errorf("the process reader called GetMemoryInfo_v2 %d times: the memory size is the sample's (VRAMTotalBytes)", n)
	}
}

func TestProcReaderOtherNamespaceNeverNames(t *testing.T) {
	d := fakenvml.NewDev()
	d.Procs = []nvml.ProcessInfo{{Pid: 100, UsedGpuMemory: 1}}
	root := testutil.FakeProc(t, false, map[int][2]string{100: {"bash", "bash"}})
	got := readOnce(t, newProcTest(t, d, root))
	if pr := got.List[0]; pr.Origin != reading.ProcOtherNS || pr.Name != "" {
		t.Errorf("container namespace: %+v", pr)
	}
}

func TestProcReaderRefusedAndFailed(t *testing.T) {
	root := testutil.FakeProc(t, true, nil)
	cases := []struct {
		name     string
		compute  nvml.Return
		graphics nvml.Return
		util     nvml.Return
		want     reading.ProcStatus
		utilOK   bool
	}{
		{"both refused", nvml.ERROR_NOT_SUPPORTED, nvml.ERROR_NO_PERMISSION, nvml.SUCCESS, reading.ProcUnsupported, false},
		{"graphics refused", nvml.SUCCESS, nvml.ERROR_NOT_SUPPORTED, nvml.SUCCESS, reading.ProcOK, true},
		{"util refused", nvml.SUCCESS, nvml.SUCCESS, nvml.ERROR_NOT_SUPPORTED, reading.ProcOK, false},
		{"compute fails", nvml.ERROR_UNKNOWN, nvml.SUCCESS, nvml.SUCCESS, reading.ProcFailed, false},
		{"lost", nvml.ERROR_GPU_IS_LOST, nvml.SUCCESS, nvml.SUCCESS, reading.ProcFailed, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := fakenvml.NewDev()
			d.Procs = []nvml.ProcessInfo{{Pid: 7, UsedGpuMemory: 1}}
			d.ProcUtil = []nvml.ProcessUtilizationSample{{Pid: 7, TimeStamp: 1, SmUtil: 3}}
			d.Set("GetComputeRunningProcesses", tc.compute)
			d.Set("GetGraphicsRunningProcesses", tc.graphics)
			d.Set("GetProcessUtilization", tc.util)
			p := newProcTest(t, d, root)
			got := readOnce(t, p)
			if got.Status != tc.want {
				t.Fatalf("status %v (%s), want %v", got.Status, got.Err, tc.want)
			}
			if got.Status != reading.ProcOK {
				if len(got.List) != 0 {
					t.Errorf("no process data must mean an empty list: %+v", got.List)
				}
				return
			}
			if got.List[0].SMUtil.OK != tc.utilOK {
				t.Errorf("SM util present %v, want %v", got.List[0].SMUtil.OK, tc.utilOK)
			}
			// A refused call is not repeated on the next read.
			before := d.Count("GetGraphicsRunningProcesses") + d.Count("GetProcessUtilization")
			readOnce(t, p)
			after := d.Count("GetGraphicsRunningProcesses") + d.Count("GetProcessUtilization")
			if tc.name != "graphics refused" && tc.name != "util refused" {
				return
			}
			if after-before != 1 {
				t.Errorf("refused call repeated: %d calls of the two in the second read, want 1", after-before)
			}
		})
	}
}

func TestProcReaderHungKeepsLastGood(t *testing.T) {
	d := fakenvml.NewDev()
	d.Procs = []nvml.ProcessInfo{{Pid: 42, UsedGpuMemory: 1 << 20}}
	root := testutil.FakeProc(t, true, nil)
	h := openFake(t, &fakenvml.Lib{Devs: []*fakenvml.Dev{d}})
	p := NewProcReader(h.GPUs[0], ProcConfig{Deadline: 50 * time.Millisecond, ProcRoot: root}, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go p.Run(ctx)
	good := readOnce(t, p)

	entered := make(chan string, 1)
	release := d.Block("GetComputeRunningProcesses", entered)
	defer release()
	// Ticks at a wall time and a monotonic reading: the hang is decided on
	// the monotonic one, whatever steps the wall clock makes.
	t0, m0 := time.Now(), time.Since(testBase)
	p.Tick(t0, m0, true)
	<-entered
	calls := d.Count("GetComputeRunningProcesses")
	p.Tick(t0.Add(time.Hour), m0+10*time.Millisecond, true) // before the deadline, the wall clock an hour on: nothing
	if p.Latest() != good {
		t.Fatal("published hung before the deadline")
	}
	// A crash snapshot before the deadline still learns the read is stuck.
	if s := p.Snapshot(m0+100*time.Millisecond, 250*time.Millisecond); s != good {
		t.Errorf("snapshot 100 ms into the read: %+v, want the last read", s)
	}
	if s := p.Snapshot(m0+300*time.Millisecond, 250*time.Millisecond); s.Status != reading.ProcHung ||
		s.Good() != good || !strings.Contains(s.Err, "not returned yet") || !s.Time.Equal(t0) {
		t.Errorf("snapshot 300 ms into the read: %+v", s)
	}
	// Hang detection still runs while reads are held back, and after the
	// wall clock stepped back an hour.
	p.Tick(t0.Add(-time.Hour), m0+time.Second, false)
	h1 := p.Latest()
	if h1.Status != reading.ProcHung || !strings.Contains(h1.Err, "nvmlDeviceGetComputeRunningProcesses") || !h1.Time.Equal(t0) {
		t.Fatalf("after the deadline: %+v", h1)
	}
	if h1.Good() != good || len(h1.List) != 0 {
		t.Errorf("hung read must keep the last good list apart: %+v", h1)
	}
	if h := p.gpu.reg.Load(procReadsHung); h != 1 {
		t.Errorf("%d hung reads counted, want 1", h)
	}
	p.Tick(t0.Add(2*time.Second), m0+2*time.Second, true)
	if d.Count("GetComputeRunningProcesses") != calls {
		t.Error("a second read started while one is stuck")
	}
	release()
	deadline := time.Now().Add(5 * time.Second)
	for p.Latest().Status == reading.ProcHung && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if p.Latest().Status != reading.ProcOK {
		t.Errorf("after the call returned: %+v", p.Latest())
	}
}

// TestProcReaderHeldBack: while the GPU backs off, ticks start no read.
func TestProcReaderHeldBack(t *testing.T) {
	d := fakenvml.NewDev()
	p := newProcTest(t, d, testutil.FakeProc(t, true, nil))
	for range 3 {
		p.Tick(time.Now(), time.Since(testBase), false)
	}
	time.Sleep(50 * time.Millisecond)
	if n := d.Count("GetComputeRunningProcesses"); n != 0 || p.Latest().Status != reading.ProcNotRead {
		t.Errorf("held-back ticks made %d calls, status %v", n, p.Latest().Status)
	}
	if got := readOnce(t, p); got.Status != reading.ProcOK {
		t.Errorf("after the back-off: %v", got.Status)
	}
}
