package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestKmsgXidDuringStartupWait: the kernel log is opened before NVML's
// start-up wait, so an Xid the kernel logs while the logger waits on a
// GPU stuck at start (GPU 1, for up to --start-timeout) reaches events.log,
// read once sampling begins and marked backlog=true, with its crash
// snapshot. The real /dev/kmsg: root only (CI runs as root).
func TestKmsgXidDuringStartupWait(t *testing.T) {
	t.Parallel()
	w, err := os.OpenFile("/dev/kmsg", os.O_WRONLY, 0)
	if err != nil {
		t.Skipf("/dev/kmsg is not writable here (%v): this test needs root (CI runs as root)", err)
	}
	defer w.Close()
	tag := fmt.Sprintf("gpu-telemetry-e2e-startwait-%d-%d", os.Getpid(), time.Now().UnixNano())
	p := start(t, opts{scenario: "gpus 2\nat 0 gpu 1 hang 30s\n",
		args: []string{"--kmsg", "/dev/kmsg", "--no-kmsg-markers", "--start-timeout", "4s"}})
	// The lock holds the logger's PID once it is taken; the kernel log is
	// opened right after it, and then the start-up waits on GPU 1.
	lock := filepath.Join(filepath.Dir(p.calls), "lock")
	p.waitFor("the lock", 15*time.Second, func() bool {
		b, _ := os.ReadFile(lock)
		return strings.TrimSpace(string(b)) == fmt.Sprint(p.cmd.Process.Pid)
	})
	time.Sleep(500 * time.Millisecond)
	if s := p.stderr.String(); strings.Contains(s, "following the kernel log") {
		t.Fatalf("the start-up did not wait on the stuck GPU: the kernel log is already followed\n%s", s)
	}
	fmt.Fprintf(w, "<4>NVRM: Xid (PCI:0000:01:00): 79, pid=1, name=%s, GPU has fallen off the bus.\n", tag)
	if s := p.stderr.String(); strings.Contains(s, "following the kernel log") {
		t.Skip("the start-up wait ended before the Xid was written (a slow machine): nothing to check")
	}
	p.waitForEvent("the Xid logged during the start-up wait", 30*time.Second, tag)
	var line string
	for _, l := range strings.Split(events(p.dir), "\n") {
		if strings.Contains(l, tag) {
			line = l
		}
	}
	for _, want := range []string{"gpu=0 bus=00000000:01:00.0 source=kmsg type=Xid xid=79", "ktime=", "backlog=true"} {
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
