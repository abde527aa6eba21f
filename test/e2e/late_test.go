package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestGPULateAtStartIsMonitoredOnceItAnswers: the only GPU does not answer
// for the first 5 s (the service restarted in the middle of a GSP fault), so
// start-up goes on without its static facts. Once it answers, it is
// monitored in full: a kernel-log Xid 79 and an AER line naming its bus reach
// it (events.log, its rows' flags, a crash snapshot with its bus id), and
// system-info.txt is rewritten with its facts, though the kernel log clock
// gives no reason to rewrite it.
func TestGPULateAtStartIsMonitoredOnceItAnswers(t *testing.T) {
	t.Parallel()
	p := start(t, opts{scenario: "gpus 1\nat 0 gpu 0 hang 5s\n", kmsg: true,
		args: []string{"--start-timeout", "1s", "--crash-cooldown", "100ms"}})
	// Another device's AER line while the GPU is still stuck (for 4 s more):
	// the AER path table is built then, without the GPU's bus id.
	p.waitFor("the kernel log reader", 15*time.Second, func() bool {
		return strings.Contains(p.stderr.String(), "following the kernel log")
	})
	p.writeKmsg("4,4999,1000000,-;pcieport 0000:80:01.0: AER: Corrected error received: 0000:81:00.0")
	p.waitFor("the GPU to answer", 30*time.Second, func() bool {
		return strings.Contains(p.stderr.String(), "NVML answered again after a hang")
	})
	p.waitForRows(0, rowCount(p.csvFile(0))+2, 15*time.Second)
	p.writeKmsg(
		"4,5000,9000000,-;NVRM: Xid (PCI:0000:01:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.",
		"4,5001,9000100,-;nvidia 0000:01:00.0: AER: PCIe Bus Error: severity=Corrected, type=Physical Layer, (Receiver ID)",
	)
	p.waitForEvent("the kernel lines on the late GPU", 15*time.Second,
		"gpu=0 bus=00000000:01:00.0 source=kmsg type=Xid xid=79",
		"gpu=0 bus=00000000:01:00.0 source=kmsg type=AER severity=corrected device=0000:01:00.0")
	var snap string
	p.waitFor("the Xid's crash snapshot", 15*time.Second, func() bool {
		for _, f := range snapshots(p.dir, "crash-*-gpu0.log") {
			if b := readFile(t, f); strings.Contains(b, "Xid 79") {
				snap = b
				return true
			}
		}
		return false
	})
	// A row begun after the Xid carries its flag: wait for the second row
	// written once the snapshot is there (the first may have been in flight).
	p.waitForRows(0, rowCount(p.csvFile(0))+2, 15*time.Second)
	p.stop()
	if !strings.Contains(snap, "(00000000:01:00.0)") {
		t.Errorf("the Xid's crash snapshot lacks the GPU's bus id:\n%s", snap[:min(len(snap), 800)])
	}
	if !strings.Contains(readFile(t, p.csvFile(0)), "XID(79)") {
		t.Errorf("GPU 0's rows do not carry XID(79)")
	}
	if errs := p.stderr.String(); strings.Contains(errs, "not monitored") {
		t.Errorf("a kernel line for the late GPU was taken as one for a GPU not monitored")
	}
	si := readFile(t, filepath.Join(p.dir, "system-info.txt"))
	if strings.Contains(si, "static facts not read") || !strings.Contains(si, "00000000:01:00.0") {
		t.Errorf("system-info.txt not rewritten with the late GPU's facts:\n%s", si)
	}
}

// TestGPULateAtStartInSystemInfo: without --kmsg (no kernel log clock to
// rewrite system-info.txt for), system-info.txt still gets the facts of a
// GPU that answered after start-up gave up on it.
func TestGPULateAtStartInSystemInfo(t *testing.T) {
	t.Parallel()
	p := start(t, opts{scenario: "gpus 2\nat 0 gpu 1 hang 3s\n", args: []string{"--start-timeout", "1s"}})
	path := filepath.Join(p.dir, "system-info.txt")
	p.waitFor("system-info.txt with the late GPU's facts", 30*time.Second, func() bool {
		b, _ := os.ReadFile(path) // not there before the first write
		si := string(b)
		return strings.Contains(si, "00000000:21:00.0") && !strings.Contains(si, "static facts not read")
	})
	p.stop()
}

// TestGPUSelectorOfAGPUStuckAtStart: --gpu names by bus id the GPU that is
// stuck at start. The logger does not exit (systemd would restart it in a
// loop, recording nothing of the fault): it monitors the stuck GPU in the
// selector's place, says so, and once the GPU answers says it is the one
// named. The GPU that answered and is not named gets no file.
func TestGPUSelectorOfAGPUStuckAtStart(t *testing.T) {
	t.Parallel()
	p := start(t, opts{scenario: "gpus 2\nat 0 gpu 1 hang 4s\n",
		args: []string{"--gpu", "00000000:21:00.0", "--start-timeout", "1s"}})
	p.waitFor("the late GPU named by --gpu", 30*time.Second, func() bool {
		return strings.Contains(p.stderr.String(), "the GPU that answered late is the one --gpu names")
	})
	p.waitForRows(1, rowCount(p.csvFile(1))+2, 15*time.Second)
	p.stop()
	errs := p.stderr.String()
	if !strings.Contains(errs, `pending=00000000:21:00.0 gpus=1`) {
		t.Errorf("the pending selector and the GPU monitored in its place not logged")
	}
	if p.csvFile(0) != "" {
		t.Errorf("GPU 0, not selected, has a CSV: %s", p.csvFile(0))
	}
	// The hang's rows are in the day's first part (its next part, with the
	// fan columns, begins once the GPU answered).
	parts, _ := filepath.Glob(filepath.Join(p.dir, "gpu1-*deep-*.csv"))
	var all strings.Builder
	for _, f := range parts {
		all.WriteString(readFile(t, f))
	}
	if !strings.Contains(all.String(), "NVML_HUNG") {
		t.Errorf("GPU 1's CSV parts %v lack the hang at start", parts)
	}
}
