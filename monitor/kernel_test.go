package monitor

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpu-telemetry/gpu-telemetry/action"
	"github.com/gpu-telemetry/gpu-telemetry/anomaly"
	"github.com/gpu-telemetry/gpu-telemetry/internal/testutil"
	"github.com/gpu-telemetry/gpu-telemetry/kmsg"
	"github.com/gpu-telemetry/gpu-telemetry/live"
	"github.com/gpu-telemetry/gpu-telemetry/reading"
	"github.com/gpu-telemetry/gpu-telemetry/sampler/fakenvml"
	"github.com/gpu-telemetry/gpu-telemetry/sink"
)

// fakePCITree gives the rig's GPUs (01:00.0 and 02:00.0) a sysfs path: GPU 0
// below root port 00:01.0, GPU 1 below root port 00:03.1.
func fakePCITree(t *testing.T, root string) {
	t.Helper()
	list := filepath.Join(root, "sys/bus/pci/devices")
	if err := os.MkdirAll(list, 0o755); err != nil {
		t.Fatal(err)
	}
	for addr, p := range map[string]string{
		"0000:01:00.0": "sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0",
		"0000:02:00.0": "sys/devices/pci0000:00/0000:00:03.1/0000:02:00.0",
	} {
		if err := os.MkdirAll(filepath.Join(root, p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(filepath.Join("../../..", strings.TrimPrefix(p, "sys/")), filepath.Join(list, addr)); err != nil {
			t.Fatal(err)
		}
	}
}

func TestKernelLinesReachEventsLogForTheRightGPU(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		hostRoot := t.TempDir()
		fakePCITree(t, hostRoot)
		r := newRig(t, 2, func(c *Config) { c.HostRoot = hostRoot })
		rec := func(usec int64, msg string) kmsg.Record {
			return kmsg.Record{Time: time.Duration(usec) * time.Microsecond, Message: msg}
		}
		r.run(3*time.Second, func() {
			time.Sleep(500 * time.Millisecond)
			now := time.Now()
			// Uncorrectable AER reported by GPU 0's root port: critical.
			r.m.onKernelLine(rec(3201123119, "pcieport 0000:00:01.0: AER: Uncorrected (Fatal) error received: 0000:01:00.0"), now)
			// A corrected error flood on GPU 1's root port: 10 written, 5 counted.
			for i := range 15 {
				r.m.onKernelLine(rec(3201200000+int64(i), "pcieport 0000:00:03.1: PCIe Bus Error: severity=Corrected, type=Physical Layer, (Receiver ID)"), now)
			}
			// Someone else's AER line and look-alike numbers: nothing.
			r.m.onKernelLine(rec(3201300119, "nvme 0000:03:00.0: AER: PCIe Bus Error: severity=Uncorrected (Fatal), type=Transaction Layer, (Requester ID)"), now)
			r.m.onKernelLine(rec(3201300120, "mlx5_core 0000:3b:00.0: XID 79 port down"), now)
			// An old driver's fallen-off-the-bus line without an Xid, on GPU 1.
			r.m.onKernelLine(rec(3201400000, "NVRM: GPU 0000:02:00.0: GPU has fallen off the bus."), now)
			// A GSP timeout names the driver's GPU number; an Xid 119 tied it to GPU 0.
			x, _ := kmsg.ParseXid("NVRM: Xid (PCI:0000:01:00): 119, pid=77, name=python3, Timeout after 6s of waiting for RPC response from GPU4 GSP! Expected function 76 (GSP_RM_CONTROL) (0x20800a4c 0x4).")
			r.m.kern.nums.Learn(x)
			r.m.onKernelLine(rec(3201500000, "NVRM: GPU4 _kgspLogRpcTimeout: ********************************* GSP Timeout **********************************"), now)
		})
		ev, _ := os.ReadFile(filepath.Join(r.dir, "events.log"))
		lines := strings.Split(strings.TrimSpace(string(ev)), "\n")
		count := func(sub ...string) (n int) {
			for _, l := range lines {
				all := true
				for _, s := range sub {
					all = all && strings.Contains(l, s)
				}
				if all {
					n++
				}
			}
			return n
		}
		if n := count("gpu=0 ", "type=AER", "severity=uncorrectable-fatal", "reporter=0000:01:00.0", "ktime=3201.123119"); n != 1 {
			t.Errorf("%d fatal AER lines for GPU 0, want 1:\n%s", n, ev)
		}
		if n := count("gpu=1 ", "type=AER", "severity=corrected", "device=0000:00:03.1"); n != 10 {
			t.Errorf("%d corrected AER lines for GPU 1, want 10 (burst limit)", n)
		}
		if got := r.counted("kernel_lines_suppressed"); got != 5 {
			t.Errorf("kernel_lines_suppressed = %d, want 5", got)
		}
		if n := count("nvme") + count("mlx5"); n != 0 {
			t.Errorf("other devices' lines in events.log: %d", n)
		}
		if n := count("gpu=1 ", "type=FALLEN_OFF_BUS"); n != 1 {
			t.Errorf("%d fallen-off-the-bus lines for GPU 1, want 1", n)
		}
		if n := count("gpu=0 ", "type=GSP_TIMEOUT", "driver_gpu=4"); n != 1 {
			t.Errorf("%d GSP timeout lines for GPU 0, want 1:\n%s", n, ev)
		}
		for _, g := range []string{"gpu0", "gpu1"} {
			m, _ := filepath.Glob(filepath.Join(r.dir, "crashes", "crash-*-"+g+".log"))
			if len(m) != 1 {
				t.Errorf("%s crash snapshots: %v, want 1", g, m)
				continue
			}
			b, _ := os.ReadFile(m[0])
			want := map[string]string{"gpu0": "PCIe AER uncorrectable-fatal error on the GPU's path", "gpu1": "GPU has fallen off the bus (kmsg, no Xid)"}[g]
			if !bytes.Contains(b, []byte(want)) {
				t.Errorf("%s snapshot reason is not %q", g, want)
			}
		}
	})
}

// TestXidLinesGolden pins the events.log lines and the crash snapshot's
// Reason and Kernel log clock lines for a sample of old and new Xids, from
// NVML and from the kernel log. The timestamp at the start of each
// events.log line is cut (it is local time).
func TestXidLinesGolden(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 2, nil)
		// A kernel log Xid event as the reader makes it of the line
		// (kmsg.XidReport.Events: the detail parsed once), on GPU 1,
		// without its bus id: no line of the golden carries one.
		kmsgEvent := func(kind reading.EventKind, code, text string) reading.Event {
			msg := "NVRM: Xid (PCI:0000:02:00): " + code + ", " + text
			x, ok := kmsg.ParseXid(msg)
			if !ok {
				t.Fatalf("not an Xid line: %q", msg)
			}
			for _, e := range x.Events(kmsg.Record{Message: msg}, time.Time{}) {
				if e.Kind == kind {
					e.GPU, e.BusID = 1, ""
					return e
				}
			}
			t.Fatalf("no event of kind %d from %q", kind, msg)
			return reading.Event{}
		}
		events := []reading.Event{
			{GPU: 0, Kind: reading.EventXid, Source: reading.SourceNVML, Data: 13},
			{GPU: 0, Kind: reading.EventXid, Source: reading.SourceNVML, Data: 48},
			kmsgEvent(reading.EventXid, "46", "pid='<unknown>', name=<unknown>, GPU stopped processing"),
			kmsgEvent(reading.EventXid, "149", "NETIR_LINK_EVT  Fatal   XC0 i0 Link 01 (0x021425c6 0x00000000 0x00000000 0x00000000 0x00000000 0x00000000)"),
			kmsgEvent(reading.EventXid, "154", "GPU recovery action changed from 0x0 (None) to 0x3 (Drain P2P)"),
			kmsgEvent(reading.EventRecovery, "154", "GPU recovery action changed from 0x0 (None) to 0x3 (Drain P2P)"),
			{GPU: 0, Kind: reading.EventRecovery, Source: reading.SourceNVML, Data: 6},
			kmsgEvent(reading.EventXid, "171", "pid='<unknown>', name=<unknown>, DRAM"),
			{GPU: 0, Kind: reading.EventXid, Source: reading.SourceNVML, Data: 999},
		}
		r.run(2*time.Second, func() {
			time.Sleep(500 * time.Millisecond)
			for i, e := range events {
				e.Time = time.Now().Add(time.Duration(i) * time.Millisecond)
				if e.Source == reading.SourceKmsg {
					e.KernelTime = 3201*time.Second + time.Duration(i)*time.Millisecond // the record's printk time
				}
				r.m.onEvent(e)
			}
		})
		ev, err := os.ReadFile(filepath.Join(r.dir, "events.log"))
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		for _, l := range strings.Split(strings.TrimSuffix(string(ev), "\n"), "\n") {
			// Without the time; the snapshot's directory is the test's.
			if _, rest, ok := strings.Cut(l, " "); ok && (strings.Contains(rest, "type=Xid") || strings.Contains(rest, "type=GpuRecoveryAction")) {
				b.WriteString(strings.ReplaceAll(rest, r.dir, "LOGDIR") + "\n")
			}
		}
		// The first snapshot of each GPU: the later ones within the
		// cooldown are its escalations (GPU 0's Xid 48 asks for a reset;
		// GPU 1's link-fatal Xid 149 for a drain and reset, more than Xid
		// 46's reset), written in the same millisecond (-2). Recovery
		// action 6 (bus reset) asks a reset, no more than Xid 48 did.
		crashes, _ := filepath.Glob(filepath.Join(r.dir, "crashes", "crash-*-gpu[0-9].log"))
		if len(crashes) != 2 {
			t.Fatalf("crash snapshots %v, want one per GPU", crashes)
		}
		header := regexp.MustCompile(`(?m)^(Reason|Kernel log clock): .*$`)
		for _, c := range crashes {
			data, err := os.ReadFile(c)
			if err != nil {
				t.Fatal(err)
			}
			for _, l := range header.FindAllString(string(data), -1) {
				b.WriteString(l + "\n")
			}
		}
		testutil.Golden(t, "xid-lines.golden", b.Bytes())
	})
}

// TestReplayedKernelLinesAreIncidentsAtTheirKernelTime: an AER or NVRM
// failure line read after the fact (a restart's replay) is an incident of
// when the kernel logged it, on the kernel log clock, not of when it was
// read: the live view's last incident and the crash snapshot's Time say
// an hour ago.
func TestReplayedKernelLinesAreIncidentsAtTheirKernelTime(t *testing.T) {
	for _, msg := range []string{
		"NVRM: GPU 0000:01:00.0: GPU has fallen off the bus.",
		"pcieport 0000:01:00.0: AER: Uncorrected (Fatal) error received: 0000:01:00.0",
	} {
		t.Run(strings.Fields(msg)[0], func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var read time.Time
				r, doc := runReplay(t, func(r *rig, now time.Time) {
					read = now
					r.m.onKernelLine(kmsg.Record{Time: r.m.kclock.clock.At(now.Add(-time.Hour)), Message: msg, Backlog: true}, now)
				})
				g := doc.GPUs[0]
				if g.LastIncident == nil {
					t.Fatal("no incident")
				}
				if age := read.Sub(g.LastIncident.Time); age < 59*time.Minute || age > 61*time.Minute {
					t.Errorf("last incident at %v, %v before it was read; want about an hour (its kernel time)", g.LastIncident.Time, age)
				}
				if in := doc.Host.LastIncident; in == nil || !in.Time.Equal(g.LastIncident.Time) {
					t.Errorf("host's last incident %+v, want the GPU's", in)
				}
				crashes, _ := filepath.Glob(filepath.Join(r.dir, "crashes", "crash-*-gpu0.log"))
				if len(crashes) != 1 {
					t.Fatalf("crash snapshots %v, want 1", crashes)
				}
				b, _ := os.ReadFile(crashes[0])
				want := "Time: " + g.LastIncident.Time.Format(sink.TimestampLayout)
				if !bytes.Contains(b, []byte(want)) {
					t.Errorf("crash snapshot lacks %q:\n%.400s", want, b)
				}
			})
		})
	}
}

// fakeNvidiaDriver lists the rig's GPUs (01:00.0 and 02:00.0) under the
// nvidia driver in a sysfs below root, as 3D controllers.
func fakeNvidiaDriver(t *testing.T, root string) {
	t.Helper()
	for _, addr := range []string{"0000:01:00.0", "0000:02:00.0"} {
		dir := filepath.Join(root, kmsg.DefaultNvidiaDriver, addr)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "class"), []byte("0x030200\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestKernelLinesOfAGPUStuckAtStart: GPU 1 does not answer NVML at start
// (its bus id unknown to NVML), but sysfs lists it under the nvidia driver:
// its kernel lines are its own from the first one, an AER line naming it
// included, with its bus id.
func TestKernelLinesOfAGPUStuckAtStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		hostRoot := t.TempDir()
		fakeNvidiaDriver(t, hostRoot)
		lib := fakeLibStuck(t)
		r := newRigOn(t, lib, func(c *Config) { c.HostRoot = hostRoot })
		if r.m.gpus[1].g.FactsKnown() {
			t.Fatal("GPU 1 answered at start")
		}
		r.run(2*time.Second, func() {
			time.Sleep(500 * time.Millisecond)
			now := time.Now()
			r.m.onKernelLine(kmsg.Record{Time: 3201 * time.Second, Message: "nvidia 0000:02:00.0: AER: PCIe Bus Error: severity=Uncorrected (Fatal), type=Transaction Layer, (Requester ID)"}, now)
			r.m.onKernelLine(kmsg.Record{Time: 3202 * time.Second, Message: "NVRM: GPU 0000:02:00.0: GPU has fallen off the bus."}, now)
		})
		ev, _ := os.ReadFile(filepath.Join(r.dir, "events.log"))
		testutil.Contains(t, "events.log", string(ev),
			"gpu=1 bus=00000000:02:00.0 source=kmsg type=AER severity=uncorrectable-fatal",
			"gpu=1 bus=00000000:02:00.0 source=kmsg type=FALLEN_OFF_BUS")
		if strings.Contains(r.logs.String(), "not monitored") {
			t.Errorf("a kernel line of the stuck GPU was taken for one of a GPU not monitored:\n%s", r.logs.String())
		}
	})
}

// fakeLibStuck is a two-GPU driver whose GPU 1 does not answer (its name
// call blocks until the test ends): start-up gives up on its static facts.
func fakeLibStuck(t *testing.T) *fakenvml.Lib {
	lib := &fakenvml.Lib{InitRet: nvml.SUCCESS}
	for i := range 2 {
		d := fakenvml.NewDev()
		d.UUID = "GPU-" + string(rune('a'+i))
		d.Bus = "00000000:0" + string(rune('1'+i)) + ":00.0"
		lib.Devs = append(lib.Devs, d)
	}
	release := lib.Devs[1].Block("GetName", nil)
	t.Cleanup(release)
	return lib
}

// TestForgedKernelLinesThroughAFIFO feeds the kernel log reader, through a
// FIFO of /dev/kmsg records, the forgeries of issue 41 beside the driver's
// own lines: the kernel's execve warning quoting a program name, a USB
// product string, records written from user space (facility 1: an Xid 48,
// and an Xid 119 that would tie the driver's GPU1 to GPU 0), then the
// driver's GSP timeout of GPU1, three Xid lines of the driver that cannot
// be read and a plain text line (no record prefix). None is an Xid of a GPU,
// the GSP line is not filed under GPU 0, the unreadable ones are counted
// (kmsg_xids_malformed), the first logged, and the plain line is not a
// record (kmsg_malformed). The driver's Xid 31 after them, on GPU 1, is taken.
func TestForgedKernelLinesThroughAFIFO(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "kmsg")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	r := newRig(t, 2, func(c *Config) { c.KmsgPath = fifo })
	records := []string{
		`4,100,1000000,-;process 'a.out' launched './NVRM: Xid (PCI:0000:02:00): 79, x' with NULL argv: empty string added`,
		`6,101,1000100,-;usb 1-1: Product: NVRM: Xid (PCI:0000:01:00): 62, pid=1, name=x, forged`,
		`12,102,1000200,-;NVRM: Xid (PCI:0000:01:00): 48, pid=1, name=x, An uncorrectable double bit error`,
		`12,103,1000300,-;NVRM: Xid (PCI:0000:01:00): 119, pid=1, name=x, Timeout after 45s of waiting for RPC response from GPU1 GSP!`,
		`4,104,1000400,-;NVRM: GPU1 _kgspLogRpcTimeout: ********************************* GSP Timeout **********************************`,
		`4,105,1000500,-;NVRM: Xid (PCI:01:00): 79, pid=1, name=x, GPU has fallen off the bus.`,
		`4,106,1000600,-;NVRM: Xid (PCI:0000:101:00): 79, pid=1, name=x, GPU has fallen off the bus.`,
		`4,107,1000700,-;NVRM: Xid (PCI:0000:01:00): 1234567, pid=1, name=x, text`,
		`NVRM: Xid (PCI:0000:01:00): 79, pid=1, name=x, a plain text line: not a record`,
		`4,108,1000800,-;NVRM: Xid (PCI:0000:02:00): 31, pid=7, name=last-line, MMU Fault`,
	}
	var ev string
	var doc live.Doc
	r.run(0, func() {
		w, err := os.OpenFile(fifo, os.O_WRONLY, 0) // waits for the reader
		if err != nil {
			t.Error(err)
			return
		}
		defer w.Close()
		if _, err := w.Write([]byte(strings.Join(records, "\n") + "\n")); err != nil {
			t.Error(err)
			return
		}
		ev = waitFor(t, filepath.Join(r.dir, "events.log"), "name=last-line")
		doc = live.NewDoc(r.m.Board().View())
	})
	for _, l := range strings.Split(ev, "\n") {
		for _, bad := range []string{"xid=79", "xid=62", "xid=48", "xid=119", "xid=1234567", "gpu=0 "} {
			if strings.Contains(l, bad) {
				t.Errorf("events.log line with %q: %s", bad, l)
			}
		}
	}
	if !strings.Contains(ev, "type=GSP_TIMEOUT") || !regexp.MustCompile(`(?m)^.*gpu=1 .*xid=31 .*$`).MatchString(ev) {
		t.Errorf("events.log lacks the driver's GSP line or its Xid 31 on GPU 1:\n%s", ev)
	}
	// Every Xid takes a crash snapshot: GPU 1's is the Xid 31's.
	if m, _ := filepath.Glob(filepath.Join(r.dir, "crashes", "crash-*-gpu0.log")); len(m) != 0 {
		t.Errorf("GPU 0 crash snapshots of forged lines: %v", m)
	}
	if m, _ := filepath.Glob(filepath.Join(r.dir, "crashes", "crash-*-gpu1.log")); len(m) != 1 {
		t.Errorf("GPU 1 crash snapshots %v, want the Xid 31's", m)
	} else if b, _ := os.ReadFile(m[0]); !bytes.Contains(b, []byte("Reason: Xid 31")) {
		t.Errorf("GPU 1 crash snapshot is not the Xid 31's:\n%.600s", b)
	}
	for _, g := range doc.GPUs {
		if g.LastXid != nil && g.LastXid.Code != 31 || len(g.Xids) > 1 || len(g.Xids) == 1 && g.Xids["31"] == 0 {
			t.Errorf("GPU %d last_xid %+v, xids %v; want none but the Xid 31", g.Index, g.LastXid, g.Xids)
		}
	}
	if got := r.m.reg.Load(badXids); got != 3 {
		t.Errorf("kmsg_xids_malformed = %d, want 3", got)
	}
	if i := slices.IndexFunc(r.m.counters(), func(c live.Counter) bool { return c.Name == "kmsg_malformed" }); i < 0 || r.m.counters()[i].Value != 1 {
		t.Errorf("kmsg_malformed (at %d) is not 1 (the plain text line): %+v", i, r.m.counters())
	}
	if logs := r.logs.String(); !strings.Contains(logs, "counter=kmsg_xids_malformed") || !strings.Contains(logs, "PCI:01:00") {
		t.Errorf("the first unreadable Xid line is not logged with its line:\n%s", logs)
	}
}

// NVSwitch SXid lines are counted (sxids, sxids_fatal by the catalog's
// fatal codes), past the burst limit too, and written as the switch's.
func TestSXidLinesCounted(t *testing.T) {
	r := newRig(t, 1, nil)
	now := time.Now()
	for i, msg := range []string{
		"nvidia-nvswitch3: SXid (PCI:0000:05:00.0): 15009, Fatal, Link 12 route GLT DBE",
		"nvidia-nvswitch3: SXid (PCI:0000:05:00.0): 11012, Non-fatal, Link 12 single-bit ECC",
		"nvidia-nvswitch1: SXid (PCI:0000:06:00.0): 99999, Non-fatal, something new",
	} {
		r.m.onKernelLine(kmsg.Record{Time: time.Duration(3201+i) * time.Second, Message: msg}, now)
	}
	if n, f := r.m.reg.Load(sxidsRead), r.m.reg.Load(sxidsFatal); n != 3 || f != 1 {
		t.Errorf("sxids=%d sxids_fatal=%d, want 3 and 1", n, f)
	}
}

// A fatal SXid raises nvswitch_fatal on the GPUs that report a fabric (not
// on one whose fabric state is "not supported" or unread), named by the
// burst's first SXid; a non-fatal one raises nothing. On a host with no GPU
// on a fabric it raises nothing and is logged once as no GPU's.
func TestFatalSXidRaisesNVSwitchFatal(t *testing.T) {
	const (
		fatal    = "nvidia-nvswitch3: SXid (PCI:0000:05:00.0): 15009, Fatal, Link 12 route GLT DBE"
		fatal2   = "nvidia-nvswitch1: SXid (PCI:0000:06:00.0): 19048, Fatal, NCISOC data ECC DBE"
		nonFatal = "nvidia-nvswitch3: SXid (PCI:0000:05:00.0): 11012, Non-fatal, Link 12 single-bit ECC"
	)
	fabric := func(gs *gpuState, state uint64) {
		var v HealthView
		v.At = time.Now()
		v.Vals[reading.HFabricState] = reading.Some(state)
		gs.health.Store(&v)
		gs.fabric.Store(fabricOff)
		if onFabric(reading.Values(v.Vals)) {
			gs.fabric.Store(fabricOn)
		}
	}
	now := time.Now()
	line := func(r *rig, i int, msg string) {
		r.m.onKernelLine(kmsg.Record{Time: time.Duration(3201+i) * time.Second, Message: msg}, now)
	}

	t.Run("fabric", func(t *testing.T) {
		r := newRig(t, 3, nil)
		fabric(r.m.gpus[0], reading.FabricCompleted)
		fabric(r.m.gpus[1], reading.FabricNotSupported) // GPU 2: no fabric reading
		line(r, 0, nonFatal)
		for _, gs := range r.m.gpus {
			if gs.tr.Raised(anomaly.ReasonNVSwitchFatal) {
				t.Fatalf("GPU %d: a non-fatal SXid raised nvswitch_fatal", gs.idx)
			}
		}
		line(r, 1, fatal)
		line(r, 2, fatal2) // the same burst: the first names it
		for i, want := range []bool{true, false, false} {
			if got := r.m.gpus[i].tr.Raised(anomaly.ReasonNVSwitchFatal); got != want {
				t.Errorf("GPU %d: nvswitch_fatal raised %v, want %v", i, got, want)
			}
		}
		d := r.m.gpus[0].reasonDetail(anomaly.ReasonNVSwitchFatal)
		if !strings.Contains(d, "SXid 15009 (route GLT DBE) on nvidia-nvswitch3 at 0000:05:00.0") {
			t.Errorf("detail %q does not name the burst's first SXid", d)
		}
		if n, f := r.m.reg.Load(sxidsRead), r.m.reg.Load(sxidsFatal); n != 3 || f != 2 {
			t.Errorf("sxids=%d sxids_fatal=%d, want 3 and 2", n, f)
		}
		if logs := r.logs.String(); strings.Contains(logs, "no GPU on an NVLink fabric") {
			t.Errorf("a host with a fabric GPU says the SXid is no GPU's:\n%s", logs)
		}
	})
	t.Run("no fabric", func(t *testing.T) {
		r := newRig(t, 2, nil)
		fabric(r.m.gpus[0], reading.FabricNotSupported)
		line(r, 0, fatal)
		if strings.Contains(r.logs.String(), "no GPU on an NVLink fabric") {
			t.Errorf("no GPU's while GPU 1 has not said whether it is on a fabric:\n%s", r.logs.String())
		}
		r.m.gpus[1].fabric.Store(fabricOff) // its first answered sample: no fabric reading
		r.m.sxidNoFabric()
		line(r, 1, fatal2)
		for _, gs := range r.m.gpus {
			if gs.tr.Raised(anomaly.ReasonNVSwitchFatal) {
				t.Errorf("GPU %d (no fabric): nvswitch_fatal raised", gs.idx)
			}
		}
		if f := r.m.reg.Load(sxidsFatal); f != 2 {
			t.Errorf("sxids_fatal=%d, want 2", f)
		}
		if n := strings.Count(r.logs.String(), "no GPU on an NVLink fabric"); n != 1 {
			t.Errorf("the unattributed fatal SXid logged %d times, want once:\n%s", n, r.logs.String())
		}
	})
}

// On a driver that does not know the fabric call's newer struct (an R550:
// no v4, the versioned call refuses v3), the GPU's first sample still says
// it is on the fabric (the original call, made in the same sample), so a
// fatal SXid from the kernel log's backlog raises nvswitch_fatal on it.
// (The first sample had no fabric readings: the SXid was taken for no
// GPU's and dropped.)
func TestFatalSXidBeforeFirstSampleOnAnR550Driver(t *testing.T) {
	lib := fakeLib(1)
	lib.Missing = map[string]bool{"nvmlDeviceGetGpuFabricInfo_v4": true}
	lib.Devs[0].Fabric = &nvml.GpuFabricInfo_v4{State: reading.FabricCompleted}
	lib.Devs[0].Set("GetGpuFabricInfoV", nvml.ERROR_ARGUMENT_VERSION_MISMATCH)
	r := newRigOn(t, lib, nil)
	gs := r.m.gpus[0]
	r.m.onKernelLine(kmsg.Record{Time: 3201 * time.Second, Backlog: true,
		Message: "nvidia-nvswitch3: SXid (PCI:0000:05:00.0): 15009, Fatal, Link 12 route GLT DBE"}, time.Now())
	_, _, sample := stepper(r, 1)
	sample(2)
	if !gs.tr.Raised(anomaly.ReasonNVSwitchFatal) || gs.fabric.Load() != fabricOn {
		t.Errorf("fabric %d, nvswitch_fatal raised %v; want on, raised:\n%s", gs.fabric.Load(), gs.tr.Raised(anomaly.ReasonNVSwitchFatal), r.eventsLog())
	}
	if strings.Contains(r.logs.String(), "no GPU on an NVLink fabric") {
		t.Errorf("a host with a fabric GPU says the SXid is no GPU's:\n%s", r.logs.String())
	}
}

// A fatal SXid read before the GPU's first sample (the kernel log's backlog
// at start) is the host's, pending: the GPU's first sample that says it is
// on the fabric raises nvswitch_fatal; a failed sample before it keeps the
// SXid pending, and one after it does not forget the GPU's fabric.
func TestFatalSXidBeforeFirstSample(t *testing.T) {
	r := newRig(t, 1, nil)
	r.devs[0].Fabric = &nvml.GpuFabricInfo_v4{State: reading.FabricCompleted}
	gs := r.m.gpus[0]
	r.m.onKernelLine(kmsg.Record{Time: 3201 * time.Second, Backlog: true,
		Message: "nvidia-nvswitch3: SXid (PCI:0000:05:00.0): 15009, Fatal, Link 12 route GLT DBE"}, time.Now())
	if gs.tr.Raised(anomaly.ReasonNVSwitchFatal) {
		t.Fatal("nvswitch_fatal raised before the GPU said it is on a fabric")
	}
	var failed reading.Sample
	failed.Status, failed.Time = reading.StatusFailed, time.Now()
	gs.fabricSample(&failed)
	if gs.tr.Raised(anomaly.ReasonNVSwitchFatal) || gs.fabric.Load() != fabricUnknown {
		t.Fatal("a failed sample decided the GPU's fabric")
	}
	_, _, sample := stepper(r, 1)
	log := r.eventsLog()
	if !strings.Contains(log, "type=HEALTH_CRITICAL reason=nvswitch_fatal") || !strings.Contains(log, "SXid 15009") {
		t.Errorf("the backlog's fatal SXid began no nvswitch_fatal:\n%s", log)
	}
	// Read after the fact: its incident says so, as an Xid's does.
	if !regexp.MustCompile(`type=HEALTH_CRITICAL reason=nvswitch_fatal .*backlog=true`).MatchString(log) {
		t.Errorf("the backlog's fatal SXid's incident line is not marked backlog=true:\n%s", log)
	}
	var c sampleIncident
	c.ev.Time = time.Now()
	gs.sxidIncident(&c)
	if !strings.Contains(c.ev.Reason, "kmsg backlog, logged at ktime=3201.000000") || !c.ev.Time.Before(time.Now()) {
		t.Errorf("incident %q at %v: want the backlog's mark and the kernel record's time", c.ev.Reason, c.ev.Time)
	}
	if strings.Contains(r.logs.String(), "no GPU on an NVLink fabric") {
		t.Errorf("a host with a fabric GPU says the SXid is no GPU's:\n%s", r.logs.String())
	}
	if _, err := r.m.Ack("0", action.ResetGPU, "baseboard reset", "root"); err != nil {
		t.Fatal(err)
	}
	gs.fabricSample(&failed)
	sample(2)
	if gs.fabric.Load() != fabricOn || gs.tr.Raised(anomaly.ReasonNVSwitchFatal) {
		t.Errorf("after the ack and a failed sample: fabric %d, raised %v; want on, not raised again",
			gs.fabric.Load(), gs.tr.Raised(anomaly.ReasonNVSwitchFatal))
	}
}
