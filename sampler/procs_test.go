package sampler

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpu-telemetry/gpu-telemetry/reading"
	"github.com/gpu-telemetry/gpu-telemetry/sampler/fakenvml"
)

// fakeProc builds a /proc tree: self/ns/pid and one directory per process.
func fakeProc(t *testing.T, ns string, procs map[int][2]string) string {
	t.Helper()
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "self", "ns"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(ns, filepath.Join(root, "self", "ns", "pid")); err != nil {
		t.Fatal(err)
	}
	for pid, p := range procs {
		dir := filepath.Join(root, strconv.Itoa(pid))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(dir, "comm"), []byte(p[0]+"\n"), 0o644)
		os.WriteFile(filepath.Join(dir, "cmdline"), []byte(p[1]), 0o644)
	}
	return root
}

// readOnce kicks one read and waits for it to be published.
func readOnce(t *testing.T, p *ProcReader) *reading.Procs {
	t.Helper()
	return readAt(t, p, time.Now())
}

// testBase is the base of the monotonic readings readAt ticks at.
var testBase = time.Now()

// readAt is readOnce on a tick at the wall time now (and the monotonic clock
// as it is).
func readAt(t *testing.T, p *ProcReader, now time.Time) *reading.Procs {
	t.Helper()
	before := p.Latest()
	p.Tick(now, time.Since(testBase), true)
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
	p := NewProcReader(h.GPUs[0], ProcConfig{Deadline: time.Hour, Reprobe: time.Hour, ProcRoot: root}, nil)
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
	root := fakeProc(t, initPIDNamespace, map[int][2]string{
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
	root := fakeProc(t, "pid:[4026532000]", map[int][2]string{100: {"bash", "bash"}})
	got := readOnce(t, newProcTest(t, d, root))
	if pr := got.List[0]; pr.Origin != reading.ProcOtherNS || pr.Name != "" {
		t.Errorf("container namespace: %+v", pr)
	}
}

func TestProcReaderRefusedAndFailed(t *testing.T) {
	root := fakeProc(t, initPIDNamespace, nil)
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
	root := fakeProc(t, initPIDNamespace, nil)
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

func TestCmdline(t *testing.T) {
	cases := []struct {
		name, in, want string
		cut            bool
	}{
		{"args", "a\x00b c\x00", "a b c", false},
		{"empty (kernel thread)", "", "", false},
		{"control chars", "x\ny\tz\x00", "x y z", false},
		{"long", strings.Repeat("é", 200), strings.Repeat("é", 128), true},
	}
	for _, tc := range cases {
		got, cut := cmdline([]byte(tc.in))
		if got != tc.want || cut != tc.cut {
			t.Errorf("%s: %q %v, want %q %v", tc.name, got, cut, tc.want, tc.cut)
		}
	}
}

// TestProcReaderHeldBack: while the GPU backs off, ticks start no read.
func TestProcReaderHeldBack(t *testing.T) {
	d := fakenvml.NewDev()
	p := newProcTest(t, d, fakeProc(t, initPIDNamespace, nil))
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

// TestProcReaderDescribesOncePerListing: a process's name is read from /proc
// when it appears in the list, kept from memory while it stays listed (not
// reopened every second), read again once it is a minute old, and read
// afresh when its PID leaves the list and comes back (a reused PID).
func TestProcReaderDescribesOncePerListing(t *testing.T) {
	d := fakenvml.NewDev()
	d.Procs = []nvml.ProcessInfo{{Pid: 100, UsedGpuMemory: 1 << 30}}
	root := fakeProc(t, initPIDNamespace, map[int][2]string{100: {"first", "first\x00"}})
	rename := func(name string) {
		if err := os.WriteFile(filepath.Join(root, "100", "comm"), []byte(name+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	listed := func(procs []nvml.ProcessInfo) { d.Update(func(d *fakenvml.Dev) { d.Procs = procs }) }
	name := func(r *reading.Procs) string {
		if len(r.List) != 1 {
			return "(not listed)"
		}
		return r.List[0].Name
	}
	p := newProcTest(t, d, root)
	if got := name(readOnce(t, p)); got != "first" {
		t.Fatalf("first read: %q", got)
	}
	rename("second")
	if got := name(readOnce(t, p)); got != "first" {
		t.Errorf("still listed: %q, want the name kept from the first read", got)
	}
	listed(nil)
	if got := readOnce(t, p); len(got.List) != 0 {
		t.Fatalf("emptied list: %+v", got.List)
	}
	listed([]nvml.ProcessInfo{{Pid: 100, UsedGpuMemory: 1 << 30}})
	if got := name(readOnce(t, p)); got != "second" {
		t.Errorf("PID listed again: %q, want it read afresh", got)
	}
	rename("third")
	// Age the kept name past describeRefresh (the reader is idle between reads).
	e := p.descs[100]
	e.at -= int64(describeRefresh)
	p.descs[100] = e
	if got := name(readOnce(t, p)); got != "third" {
		t.Errorf("a minute later: %q, want it read again", got)
	}
}

// become makes PID 100 of the fake /proc at root the process name, started
// at start (clock ticks after boot).
func become(t *testing.T, root, name string, start int) {
	t.Helper()
	dir := filepath.Join(root, "100")
	// comm with a space and a parenthesis, as the kernel writes it
	stat := "100 (" + name + " (x)) S 1 100 100 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 1 0 " + strconv.Itoa(start) + " 1000 100 18446744073709551615\n"
	for file, s := range map[string]string{"comm": name + "\n", "cmdline": name + "\x00", "stat": stat} {
		if err := os.WriteFile(filepath.Join(dir, file), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// trainRead starts a process reader on a GPU running PID 100 ("train",
// started at 5000), reads once at tick, then renames the process in /proc
// (comm "renamed"): a later read that shows "renamed" read /proc again.
func trainRead(t *testing.T) (d *fakenvml.Dev, root string, p *ProcReader, tick time.Time) {
	t.Helper()
	d = fakenvml.NewDev()
	d.Procs = []nvml.ProcessInfo{{Pid: 100, UsedGpuMemory: 1 << 30}}
	root = fakeProc(t, initPIDNamespace, map[int][2]string{100: {"train", "python3\x00train.py\x00"}})
	become(t, root, "train", 5000)
	p = newProcTest(t, d, root)
	tick = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	if got := readAt(t, p, tick).List[0]; got.Name != "train" {
		t.Fatalf("first read: %q", got.Name)
	}
	if err := os.WriteFile(filepath.Join(root, "100", "comm"), []byte("renamed\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return d, root, p, tick
}

// TestProcReaderReusedPID: a PID that exited and was reused between two
// reads reuseGap or more apart (reads can be a minute apart while the pacer
// stretches them) is described afresh, told apart by its start time in
// /proc/<pid>/stat; the same process (same start time) keeps its kept name.
func TestProcReaderReusedPID(t *testing.T) {
	_, root, p, tick := trainRead(t)
	tick = tick.Add(reuseGap)
	if got := readAt(t, p, tick).List[0]; got.Name != "train" {
		t.Errorf("same process (start time unchanged): %q, want the name kept", got.Name)
	}
	become(t, root, "intruder", 7000) // exited and PID 100 reused before the next read
	tick = tick.Add(reuseGap)
	if got := readAt(t, p, tick).List[0]; got.Name != "intruder" || got.Cmdline != "intruder" {
		t.Errorf("reused PID: %q %q, want the new process", got.Name, got.Cmdline)
	}
}

// TestProcReaderConsecutiveReadsSkipStat: a PID listed by two reads less
// than reuseGap apart keeps its description without /proc/<pid>/stat being
// read again (one open per listed process per second). The fake stat is
// removed after the first read: reading it again would find no start time,
// take the PID for another process and describe it afresh ("renamed").
// A PID that leaves the list for one read is looked up afresh when it
// returns.
func TestProcReaderConsecutiveReadsSkipStat(t *testing.T) {
	d, root, p, tick := trainRead(t)
	if err := os.Remove(filepath.Join(root, "100", "stat")); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		tick = tick.Add(time.Second)
		if got := readAt(t, p, tick).List[0]; got.Name != "train" {
			t.Fatalf("read %d, 1 s after the last: %q: /proc/100/stat was read again", i+2, got.Name)
		}
	}
	become(t, root, "intruder", 7000)
	d.Procs = nil
	tick = tick.Add(time.Second)
	if got := readAt(t, p, tick); len(got.List) != 0 {
		t.Fatalf("%d processes listed, want none", len(got.List))
	}
	d.Procs = []nvml.ProcessInfo{{Pid: 100, UsedGpuMemory: 1 << 30}}
	tick = tick.Add(time.Second)
	if got := readAt(t, p, tick).List[0]; got.Name != "intruder" {
		t.Errorf("PID 100 back after a read without it: %q, want it described afresh", got.Name)
	}
}

// TestOriginOf: a process that is gone (its /proc entry missing, or ESRCH
// while it was read) is told from one that could not be read.
func TestOriginOf(t *testing.T) {
	for _, c := range []struct {
		err  error
		want reading.ProcOrigin
	}{
		{&fs.PathError{Op: "read", Path: "/proc/7/cmdline", Err: syscall.ESRCH}, reading.ProcGone},
		{&fs.PathError{Op: "open", Path: "/proc/7/cmdline", Err: fs.ErrNotExist}, reading.ProcGone},
		{&fs.PathError{Op: "open", Path: "/proc/7/cmdline", Err: syscall.EACCES}, reading.ProcUnreadable},
	} {
		if got := originOf(c.err); got != c.want {
			t.Errorf("originOf(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}
