package e2e

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/internal/counters"
	"github.com/gpu-telemetry/gpu-telemetry/internal/testutil"
	"github.com/gpu-telemetry/gpu-telemetry/kmsg"
	"github.com/gpu-telemetry/gpu-telemetry/runstate"
)

// startStuck starts the logger with GPU 1 stuck at start (for up to
// --start-timeout) on the kernel log at path, and returns once it waits on
// that GPU, having checked that it holds the kernel log open by then: the
// lock holds the logger's PID once it is taken, and the kernel log is
// opened right after it. The simulated driver gets no kernel log of its
// own (opts.kmsg): its file, open in the logger's process, would pass for
// the logger's.
func startStuck(t *testing.T, path string) *proc {
	t.Helper()
	p := start(t, opts{scenario: "gpus 2\nat 0 gpu 1 hang 30s\n",
		args: []string{"--kmsg", path, "--no-kmsg-markers", "--start-timeout", "4s"}})
	p.kmsg = path
	lock := filepath.Join(filepath.Dir(p.calls), "lock")
	p.waitFor("the lock", 15*time.Second, func() bool {
		b, _ := os.ReadFile(lock)
		return strings.TrimSpace(string(b)) == fmt.Sprint(p.cmd.Process.Pid)
	})
	time.Sleep(500 * time.Millisecond)
	if s := p.stderr.String(); strings.Contains(s, "following the kernel log") {
		t.Fatalf("the start-up did not wait on the stuck GPU: the kernel log is already followed\n%s", s)
	}
	if real, err := filepath.EvalSymlinks(path); err == nil {
		path = real // as /proc names it
	}
	if open := testutil.OpenFiles(p.cmd.Process.Pid); !slices.Contains(open, path) {
		t.Fatalf("the logger waits on the stuck GPU without %s open (its files: %q): what the kernel logs meanwhile would be lost", path, open)
	}
	return p
}

// skipIfWaitEnded skips the test when the start-up wait ended before what
// the test logged during it was written (a slow machine): nothing to check.
func skipIfWaitEnded(t *testing.T, p *proc) {
	t.Helper()
	if s := p.stderr.String(); strings.Contains(s, "following the kernel log") {
		t.Skip("the start-up wait ended before the kernel log line was written (a slow machine): nothing to check")
	}
}

// TestKmsgXidDuringStartupWait: the kernel log is opened before NVML's
// start-up wait, so an Xid the kernel logs while the logger waits on a
// GPU stuck at start (GPU 1, for up to --start-timeout) reaches events.log,
// read once sampling begins and marked backlog=true, with its crash
// snapshot. The kernel log is a file of records (a file's records up to its
// end are backlog, as the device's ring is); TestKmsgDeviceDuringStartupWait
// is the same start on the real /dev/kmsg.
func TestKmsgXidDuringStartupWait(t *testing.T) {
	t.Parallel()
	tag := fmt.Sprintf("gpu-telemetry-e2e-startwait-%d-%d", os.Getpid(), time.Now().UnixNano())
	kmsgFile := filepath.Join(t.TempDir(), "kmsg")
	if err := os.WriteFile(kmsgFile, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	p := startStuck(t, kmsgFile)
	p.writeKmsg(fmt.Sprintf("4,1,5000000,-;NVRM: Xid (PCI:0000:01:00): 79, pid=1, name=%s, GPU has fallen off the bus.", tag))
	skipIfWaitEnded(t, p)
	p.waitForEvent("the Xid logged during the start-up wait", 30*time.Second, tag)
	var line string
	for _, l := range strings.Split(events(p.dir), "\n") {
		if strings.Contains(l, tag) {
			line = l
		}
	}
	for _, want := range []string{"gpu=0 bus=00000000:01:00.0 source=kmsg type=Xid xid=79", "ktime=5.000000", "backlog=true"} {
		if !strings.Contains(line, want) {
			t.Errorf("the Xid's events.log line lacks %q:\n%s", want, line)
		}
	}
	p.waitFor("the Xid's crash snapshot", 15*time.Second, func() bool {
		for _, f := range snapshots(p.dir, "crash-*-gpu0.log") {
			if strings.Contains(readFile(t, f), "kmsg backlog") {
				return true
			}
		}
		return false
	})
	p.stop()
}

// TestKmsgDeviceDuringStartupWait is TestKmsgXidDuringStartupWait on the
// real /dev/kmsg (root only; CI runs as root), with a harmless line in
// the host's kernel log where that test has an Xid (one would page the
// host's operators): the logger holds the device open while it waits on
// the stuck GPU, reads the line logged meanwhile once sampling begins, and
// saves its position past it once the backlog is read.
func TestKmsgDeviceDuringStartupWait(t *testing.T) {
	t.Parallel()
	w := testutil.HostKmsg(t)
	tag := fmt.Sprintf("gpu-telemetry-e2e-devstartwait-%d-%d", os.Getpid(), time.Now().UnixNano())
	seqOf := followFor(t, tag)
	p := startStuck(t, "/dev/kmsg")
	fmt.Fprintf(w, "<6>%s logged during the start-up wait\n", tag)
	seq := seqOf()
	skipIfWaitEnded(t, p)
	saved := func() (uint64, bool) {
		st, _, err := runstate.Read(p.dir)
		v, ok := st.KmsgSeq.Get()
		return v, err == nil && ok && v >= seq
	}
	p.waitFor(fmt.Sprintf("run-state's kmsg_seq at or past the line logged during the wait (%d)", seq), 30*time.Second, func() bool {
		_, ok := saved()
		return ok
	})
	p.stop()
	if v, ok := saved(); !ok {
		t.Errorf("run-state's kmsg_seq after stop is %d, want at or past %d", v, seq)
	}
}

// followFor follows the host's /dev/kmsg from its end until the test ends,
// and returns a function that waits for the first record holding tag and
// returns its sequence number.
func followFor(t *testing.T, tag string) func() uint64 {
	t.Helper()
	r, err := kmsg.Open("/dev/kmsg", slog.New(slog.DiscardHandler), counters.New())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	seqs := make(chan uint64, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.Run(ctx, func(rec kmsg.Record) {
			if strings.Contains(rec.Message, tag) {
				select {
				case seqs <- rec.Seq:
				default:
				}
			}
		})
	}()
	t.Cleanup(func() { cancel(); <-done })
	return func() uint64 {
		t.Helper()
		select {
		case s := <-seqs:
			return s
		case <-time.After(10 * time.Second):
			t.Fatalf("the record tagged %s did not come back from /dev/kmsg", tag)
			return 0
		}
	}
}
