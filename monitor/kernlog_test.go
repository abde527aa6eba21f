package monitor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/internal/counters"
	"github.com/gpu-telemetry/gpu-telemetry/internal/events"
	"github.com/gpu-telemetry/gpu-telemetry/internal/kclock"
	"github.com/gpu-telemetry/gpu-telemetry/internal/testutil"
	"github.com/gpu-telemetry/gpu-telemetry/kmsg"
	"github.com/gpu-telemetry/gpu-telemetry/live"
	"github.com/gpu-telemetry/gpu-telemetry/reading"
	"github.com/gpu-telemetry/gpu-telemetry/runstate"
)

// kmsgRestart prepares a restart in this boot on the real /dev/kmsg: a
// writer of it (testutil.HostKmsg, which skips the test where it is not
// writable and refuses the driver's lines: the tests write stand-ins,
// writeStandInXid), a host root whose boot id is this boot's, and the
// sequence number of a tagged record that stands for the previous run's
// last one.
func kmsgRestart(t *testing.T, tag string) (w io.Writer, hostRoot string, boot string, lastSeq uint64) {
	t.Helper()
	w = testutil.HostKmsg(t)
	boot = runstate.ReadBootID(runstate.DefaultBootIDPath)
	if boot == "" {
		t.Skip("no boot id")
	}
	hostRoot = t.TempDir()
	idDir := filepath.Join(hostRoot, filepath.Dir(runstate.DefaultBootIDPath))
	if err := os.MkdirAll(idDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(hostRoot, runstate.DefaultBootIDPath), []byte(boot+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := kmsg.Open("/dev/kmsg", slog.New(slog.DiscardHandler), counters.New())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	seqs := make(chan uint64, 1)
	go r.Run(ctx, func(rec kmsg.Record) {
		if strings.Contains(rec.Message, tag) {
			select {
			case seqs <- rec.Seq:
			default:
			}
		}
	})
	fmt.Fprintf(w, "<6>%s: the previous run's last record\n", tag)
	select {
	case lastSeq = <-seqs:
	case <-time.After(10 * time.Second):
		t.Fatal("the tagged record did not come back from /dev/kmsg")
	}
	return w, hostRoot, boot, lastSeq
}

// writeStandInXid writes into the host's /dev/kmsg the harmless line that
// stands for the driver's Xid code on GPU 0 (PCI 0000:01:00), its process
// named name (the test's tag, and a suffix); the rig turns it into that
// Xid line before the monitor parses it (xidStandIn). The host's kernel
// log never holds an Xid of ours: one would page its operators.
func writeStandInXid(t *testing.T, w io.Writer, name string, code int) {
	t.Helper()
	if _, err := fmt.Fprintf(w, "<4>%s stands in for driver code %d\n", name, code); err != nil {
		t.Errorf("write /dev/kmsg: %v", err)
	}
}

// xidStandIn turns the records of tag's stand-ins (writeStandInXid) into
// the driver's Xid lines they stand for; other records pass unchanged.
func xidStandIn(tag string) func(kmsg.Record) kmsg.Record {
	re := regexp.MustCompile(`^(` + regexp.QuoteMeta(tag) + `\S*) stands in for driver code (\d+)$`)
	return func(rec kmsg.Record) kmsg.Record {
		if m := re.FindStringSubmatch(rec.Message); m != nil {
			// The host's kernel log marks the tag's line as written from
			// user space (facility 1); the driver's line is the kernel's.
			rec.Message = fmt.Sprintf("NVRM: Xid (PCI:0000:01:00): %s, pid=1, name=%s, a test's stand-in", m[2], m[1])
			rec.Facility = 0
		}
		return rec
	}
}

// waitFor polls path (real time, at most 10 s) until it holds want.
func waitFor(t *testing.T, path, want string) string {
	t.Helper()
	var b []byte
	if !testutil.PollUntil(10*time.Second, 20*time.Millisecond, func() bool {
		b, _ = os.ReadFile(path)
		return strings.Contains(string(b), want)
	}) {
		t.Fatalf("%s never held %q:\n%s", path, want, b)
	}
	return string(b)
}

// TestKmsgXidWhileStoppedIsReplayed: an Xid 79 the kernel logged while the
// logger was stopped (systemctl restart, a crash and RestartSec; on the
// host's /dev/kmsg, its stand-in, writeStandInXid) is read at
// the next start in the same boot, from the position the previous run saved
// in run-state: written to events.log as backlog with its own kernel time,
// counted, and taken as a critical event (a crash snapshot: the GPU may
// still be off the bus). The position reached is saved again at stop.
func TestKmsgXidWhileStoppedIsReplayed(t *testing.T) {
	tag := fmt.Sprintf("gpu-telemetry-replay-%d-%d", os.Getpid(), time.Now().UnixNano())
	r, _, boot, last := replayRig(t, tag, nil)
	dir := r.dir
	var ev string
	r.run(0, func() { ev = waitFor(t, filepath.Join(dir, "events.log"), tag) })
	var line string
	for _, l := range strings.Split(ev, "\n") {
		if strings.Contains(l, tag) {
			line = l
		}
	}
	for _, want := range []string{"gpu=0 ", "source=kmsg type=Xid xid=79", "ktime=", "backlog=true"} {
		if !strings.Contains(line, want) {
			t.Errorf("the replayed Xid's line lacks %q:\n%s", want, line)
		}
	}
	if n := r.counted("kmsg_backlog_xids"); n < 1 {
		t.Errorf("kmsg_backlog_xids = %d, want the replayed Xid counted", n)
	}
	crashes, _ := filepath.Glob(filepath.Join(dir, "crashes", "crash-*-gpu0.log"))
	if len(crashes) == 0 {
		t.Error("no crash snapshot for the replayed Xid 79")
	} else if b, _ := os.ReadFile(crashes[0]); !strings.Contains(string(b), "kmsg backlog, logged at ktime=") {
		t.Errorf("the snapshot's reason does not say the Xid was read after the fact:\n%.600s", b)
	}
	st, _, err := runstate.Read(dir)
	if seq, ok := st.KmsgSeq.Get(); err != nil || !ok || seq <= last || st.BootID != boot {
		t.Errorf("run-state after stop: %+v, %v; want this boot and a kmsg_seq past %d", st, err, last)
	}
}

// TestKmsgOtherBootIsNotReplayed: a position saved in another boot is
// meaningless for this one's ring: the start reads from the end of the
// log, as a first start in a boot does, and the boot's older records (here
// an Xid logged before the start) are not replayed as new; an Xid logged
// once the log is followed is read.
func TestKmsgOtherBootIsNotReplayed(t *testing.T) {
	tag := fmt.Sprintf("gpu-telemetry-otherboot-%d-%d", os.Getpid(), time.Now().UnixNano())
	w, hostRoot, _, last := kmsgRestart(t, tag)
	dir := t.TempDir()
	writePreviousRun(t, dir, "another-boot", last)
	writeStandInXid(t, w, tag+"-before", 13)
	r := kmsgRig(t, dir, hostRoot, tag)
	var ev string
	r.run(0, func() {
		testutil.PollUntil(10*time.Second, 10*time.Millisecond, func() bool {
			r.m.states.mu.Lock()
			defer r.m.states.mu.Unlock()
			return r.m.states.kmsg == "following"
		})
		writeStandInXid(t, w, tag+"-after", 31)
		ev = waitFor(t, filepath.Join(dir, "events.log"), tag+"-after")
	})
	if strings.Contains(ev, tag+"-before") {
		t.Errorf("an Xid from before the start was replayed with another boot's position:\n%s", ev)
	}
	if m := regexp.MustCompile(`.*` + tag + `-after.*`).FindString(ev); strings.Contains(m, "backlog=true") {
		// Logged after the reader was following: fresh, unless it reached
		// the ring before the reader had read the ring's records (then it
		// is backlog, and still read).
		t.Logf("the Xid logged after the start was read as backlog: %s", m)
	}
}

// kernelXid is the Xid event the kernel log reader hands on for the record
// rec read at read, as it makes it (kmsg.XidReport.Events: the detail parsed
// once; on the GPU its bus id names, as runKmsg attributes it).
func kernelXid(t testing.TB, m *Monitor, rec kmsg.Record, read time.Time) reading.Event {
	t.Helper()
	x, err := kmsg.ParseDriverXid(rec.Message)
	if err != nil {
		t.Fatalf("not an Xid line of the driver: %q: %v", rec.Message, err)
	}
	return m.kernelXidEvents(x, rec, read)[0]
}

// replayedXid is a kernel-log Xid on GPU 0 read after the fact
// (kmsg.Record.Backlog) at read, that the kernel logged at logged: its
// KernelTime is logged on the monitor's kernel log clock.
func replayedXid(t testing.TB, m *Monitor, code int, read, logged time.Time) reading.Event {
	msg := fmt.Sprintf("NVRM: Xid (PCI:0000:01:00): %d, pid=1, name=x, replayed", code)
	return kernelXid(t, m, kmsg.Record{Time: m.kclock.clock.At(logged), Message: msg, Backlog: true}, read)
}

// rowsWith is GPU gpu's CSV rows that hold s (a flag).
func (r *rig) rowsWith(gpu int, s string) []string {
	var out []string
	for _, row := range r.rows(gpu) {
		if strings.Contains(row, s) {
			out = append(out, row)
		}
	}
	return out
}

// replayUptime is how long the boot has run when a replay test's logger
// starts: its kernel log clock is the test's own (kclock.Anchored),
// so an Xid of an hour ago lies in this boot whatever the host's uptime.
const replayUptime = 24 * time.Hour

// runReplay runs a one-GPU rig (inside a synctest bubble) on a kernel log
// clock that reads replayUptime at its start, calls feed half a second in
// with the time then, and returns the rig and the status document of a
// second after feed returned.
func runReplay(t *testing.T, feed func(r *rig, now time.Time)) (*rig, live.Doc) {
	r := newRigClock(t, fakeLib(1), kclock.Anchored(time.Now(), replayUptime), nil)
	var doc live.Doc
	r.run(0, func() {
		time.Sleep(500 * time.Millisecond)
		feed(r, time.Now())
		time.Sleep(time.Second)
		doc = live.NewDoc(r.m.Board().View())
	})
	return r, doc
}

// TestReplayedXidIsNotFresh: an Xid the kernel logged an hour before the
// logger read it (a restart's replay) is written to events.log as backlog,
// counted and takes its crash snapshot, but does not flag the GPU's current
// row (the row of its time was written long ago, or never) and is not a
// fresh Xid in the live view: its age is the hour, so the status check does
// not go critical for it.
func TestReplayedXidIsNotFresh(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, doc := runReplay(t, func(r *rig, now time.Time) {
			r.m.onEvent(replayedXid(t, r.m, 79, now, now.Add(-time.Hour)))
		})
		ev, _ := os.ReadFile(filepath.Join(r.dir, "events.log"))
		// Logged an hour before the start, on the test's clock.
		ktime := events.KernelTimeField(replayUptime - time.Hour + 500*time.Millisecond)
		testutil.Contains(t, "events.log", string(ev), "source=kmsg type=Xid xid=79", ktime.Key+"="+ktime.Value, "backlog=true")
		if rows := r.rowsWith(0, "XID(79)"); len(rows) != 0 {
			t.Errorf("rows carry the flag of an Xid logged an hour before them: %q", rows)
		}
		if crashes, _ := filepath.Glob(filepath.Join(r.dir, "crashes", "crash-*-gpu0.log")); len(crashes) != 1 {
			t.Errorf("crash snapshots %v, want the replayed Xid's one", crashes)
		}
		g := doc.GPUs[0]
		if g.Xids["79"] != 1 {
			t.Errorf("xids %v, want the replayed Xid 79 counted", g.Xids)
		}
		if g.LastXid == nil || g.LastXid.AgeS == nil || *g.LastXid.AgeS < (59*time.Minute).Seconds() || *g.LastXid.AgeS > (61*time.Minute).Seconds() {
			t.Errorf("last_xid %+v, want Xid 79 about an hour old", g.LastXid)
		} else if age := doc.Time.Sub(g.LastXid.Time); age < 59*time.Minute || age > 61*time.Minute {
			t.Errorf("last_xid time %v is %v before the document's, want about an hour", g.LastXid.Time, age)
		}
		if code, reasons := live.Check(doc); code == live.CheckCritical {
			t.Errorf("status check critical for an Xid of an hour ago: %v", reasons)
		}
	})
}

// TestReplayedXidIsNoDuplicate: a replayed Xid 79 and, within the 10 s de-duplication window, a
// fresh NVML report of Xid 79 are two incidents, not one: the fresh one is
// not marked a duplicate of the old kernel record, and flags the row and is
// the live view's last Xid. An older replayed Xid read after it does not
// take its place there.
func TestReplayedXidIsNoDuplicate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, doc := runReplay(t, func(r *rig, now time.Time) {
			r.m.onEvent(replayedXid(t, r.m, 79, now, now.Add(-time.Hour)))
			time.Sleep(time.Second)
			r.m.onEvent(reading.Event{Time: time.Now(), GPU: 0, Kind: reading.EventXid, Source: reading.SourceNVML, Data: 79})
			r.m.onEvent(replayedXid(t, r.m, 13, time.Now(), now.Add(-30*time.Minute)))
		})
		ev, _ := os.ReadFile(filepath.Join(r.dir, "events.log"))
		if strings.Contains(string(ev), "duplicate_of=") || r.counted("duplicate_xids") != 0 {
			t.Errorf("a fresh Xid taken as a duplicate of a replayed one (duplicate_xids %d):\n%s", r.counted("duplicate_xids"), ev)
		}
		if rows := r.rowsWith(0, "XID(79)"); len(rows) != 1 {
			t.Errorf("%d rows carry XID(79), want the fresh report's one: %q", len(rows), rows)
		}
		g := doc.GPUs[0]
		if g.LastXid == nil || g.LastXid.Code != 79 || g.LastXid.AgeS == nil || *g.LastXid.AgeS > 5 {
			t.Errorf("last_xid %+v, want the fresh Xid 79 of a second ago", g.LastXid)
		}
		if g.Xids["79"] != 2 || g.Xids["13"] != 1 {
			t.Errorf("xids %v, want 79 twice and 13 once", g.Xids)
		}
		if code, _ := live.Check(doc); code != live.CheckCritical {
			t.Errorf("status check %d after a fresh Xid 79, want critical", code)
		}
	})
}

// writePreviousRun writes into dir the run-state of a previous run in boot
// that had read the kernel log up to sequence number seq.
func writePreviousRun(t *testing.T, dir, boot string, seq uint64) {
	t.Helper()
	state := fmt.Sprintf("boot_id=%s\nstarted=2026-12-01T06:00:00Z\npid=77\nkmsg_seq=%d\n", boot, seq)
	if err := os.WriteFile(filepath.Join(dir, runstate.File), []byte(state), 0o644); err != nil {
		t.Fatal(err)
	}
}

// kmsgRig is a one-GPU rig writing into dir that reads the real /dev/kmsg,
// with hostRoot as the host's root, taking tag's stand-ins for the Xids
// they stand for (xidStandIn).
func kmsgRig(t *testing.T, dir, hostRoot, tag string) *rig {
	r := newRig(t, 1, func(c *Config) { c.LogDir, c.HostRoot, c.KmsgPath = dir, hostRoot, "/dev/kmsg" })
	r.dir = dir
	r.m.klog.standIn = xidStandIn(tag)
	return r
}

// replayRig starts a one-GPU rig on the real /dev/kmsg after a previous
// run in this boot (boot) that stopped cleanly, its last record (lastSeq)
// tagged tag, with an Xid 79 (named tag; its stand-in, writeStandInXid)
// logged while no logger ran; tweak may change the monitor before it runs.
func replayRig(t *testing.T, tag string, tweak func(m *Monitor)) (r *rig, w io.Writer, boot string, lastSeq uint64) {
	w, hostRoot, boot, lastSeq := kmsgRestart(t, tag)
	dir := t.TempDir()
	writePreviousRun(t, dir, boot, lastSeq)
	if err := runstate.MarkCleanStop(dir, time.Now()); err != nil {
		t.Fatal(err)
	}
	// Logged while no logger runs.
	writeStandInXid(t, w, tag, 79)
	r = kmsgRig(t, dir, hostRoot, tag)
	if tweak != nil {
		tweak(r.m)
	}
	return r, w, boot, lastSeq
}

// TestReplayPositionSavedOnceCaughtUp: the position a replay reached is in
// run-state as soon as the ring's records are read, not only once a fresh
// record arrives or the periodic refresh runs (10 s): a crash loop faster
// than that would replay the same records again at every start.
func TestReplayPositionSavedOnceCaughtUp(t *testing.T) {
	tag := fmt.Sprintf("gpu-telemetry-replaysave-%d-%d", os.Getpid(), time.Now().UnixNano())
	r, _, _, last := replayRig(t, tag, nil)
	var seq uint64
	r.run(0, func() {
		waitFor(t, filepath.Join(r.dir, "events.log"), tag)
		testutil.PollUntil(3*time.Second, 20*time.Millisecond, func() bool {
			st, _, _ := runstate.Read(r.dir)
			if v, ok := st.KmsgSeq.Get(); ok && v > last {
				seq = v
			}
			return seq != 0
		})
	})
	if seq == 0 {
		t.Errorf("run-state's kmsg_seq stayed at %d for 3 s after the replay was read (want it saved once caught up, well before the %v refresh)", last, kmsgSeqRefresh)
	}
}

// TestEveryTicksWakesAndStops: every calls its function once a period and
// once per wake, and returns when its context is done. refreshKmsgSeq's
// periodic save and its save once a replay is read, and runKernelClock's
// checks, run on it.
func TestEveryTicksWakesAndStops(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		wake := make(chan struct{})
		done := make(chan struct{})
		var calls atomic.Int32
		go func() {
			defer close(done)
			every(ctx, 10*time.Second, wake, func() { calls.Add(1) })
		}()
		time.Sleep(35 * time.Second)
		synctest.Wait()
		if n := calls.Load(); n != 3 {
			t.Errorf("%d calls in 35 s at one every 10 s, want 3", n)
		}
		wake <- struct{}{}
		synctest.Wait()
		if n := calls.Load(); n != 4 {
			t.Errorf("%d calls after a wake, want 4", n)
		}
		cancel()
		<-done
	})
}

// TestStalledRunStateDoesNotStallKmsg: saving the kernel log position is
// disk work; a disk that stalls it must not stall the reading of the kernel
// log: an Xid logged after the replay is read while the save still waits.
func TestStalledRunStateDoesNotStallKmsg(t *testing.T) {
	tag := fmt.Sprintf("gpu-telemetry-stallsave-%d-%d", os.Getpid(), time.Now().UnixNano())
	release := make(chan struct{})
	var once sync.Once
	unblock := func() { once.Do(func() { close(release) }) }
	defer unblock()
	r, w, _, _ := replayRig(t, tag, func(m *Monitor) {
		m.runState.Rewrite = func(dir string, s runstate.State) error {
			<-release // the disk is stuck
			return runstate.Write(dir, s)
		}
	})
	r.run(0, func() {
		defer unblock() // let the stop's own save through
		waitFor(t, filepath.Join(r.dir, "events.log"), tag)
		writeStandInXid(t, w, tag+"-fresh", 13)
		waitFor(t, filepath.Join(r.dir, "events.log"), tag+"-fresh")
	})
}

// TestKmsgPositionSaveFailuresCounted: a kernel log position that cannot be
// saved (run-state on a failing disk) is counted in
// kmsg_position_save_failures, which the status line shows, and logged the
// first time only, with why.
func TestKmsgPositionSaveFailuresCounted(t *testing.T) {
	tag := fmt.Sprintf("gpu-telemetry-failsave-%d-%d", os.Getpid(), time.Now().UnixNano())
	r, _, _, _ := replayRig(t, tag, func(m *Monitor) {
		m.runState.Rewrite = func(string, runstate.State) error { return errors.New("disk on fire") }
	})
	var status string
	r.run(0, func() {
		waitFor(t, filepath.Join(r.dir, "events.log"), tag)
		testutil.PollUntil(3*time.Second, 20*time.Millisecond, func() bool { return r.m.reg.Load(kmsgSaveFailures) > 0 })
		r.m.saveKmsgSeq() // the position has not moved: nothing to save
		status = statusLine(r.m.collect())
	})
	if n := r.m.reg.Load(kmsgSaveFailures); n == 0 {
		t.Fatal("a failed save of the kernel log position was not counted")
	}
	if strings.Contains(status, " kmsg_position_save_failures=0 ") || !strings.Contains(status, " kmsg_position_save_failures=") {
		t.Errorf("the status line does not show the failed saves: %s", status)
	}
	logs := r.logs.String()
	if n := strings.Count(logs, "cannot save the kernel log position"); n != 1 {
		t.Errorf("failed saves logged %d times, want the first only:\n%s", n, logs)
	}
	testutil.Contains(t, "the log", logs, "disk on fire")
}

// TestReplayedXidKeepsItsKernelTime: a kernel log record read after the
// fact keeps the kernel's own timestamp in events.log and in its crash
// snapshot's reason, whatever it is: one stamped 0.000000 (logged before the
// kernel's clock ran, or by a --kmsg file that says so) is not taken for "no
// time", and one logged long before the logger's clock was anchored is
// placed in the live view by it. The log is a --kmsg file: all of it is
// backlog.
func TestReplayedXidKeepsItsKernelTime(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kmsg")
	recs := "4,7,0,-;NVRM: Xid (PCI:0000:01:00): 79, pid=1, name=at-zero, GPU has fallen off the bus.\n" +
		"4,8,60000000,-;NVRM: Xid (PCI:0000:01:00): 13, pid=1, name=at-one-minute, Graphics Exception\n"
	if err := os.WriteFile(path, []byte(recs), 0o644); err != nil {
		t.Fatal(err)
	}
	// CLOCK_MONOTONIC reads two hours at the start: the records were logged
	// about two hours before it.
	kc := kclock.Anchored(time.Now(), 2*time.Hour)
	r := newRigClock(t, fakeLib(1), kc, func(c *Config) { c.KmsgPath = path })
	var ev string
	var doc live.Doc
	r.run(0, func() {
		ev = waitFor(t, filepath.Join(r.dir, "events.log"), "at-one-minute")
		doc = live.NewDoc(r.m.Board().View())
	})
	for name, want := range map[string]string{"at-zero": "ktime=0.000000", "at-one-minute": "ktime=60.000000"} {
		line := regexp.MustCompile(`.*name=` + name + `.*`).FindString(ev)
		if !strings.Contains(line, want) || !strings.Contains(line, "backlog=true") {
			t.Errorf("the replayed Xid %s lacks %q or backlog=true:\n%s", name, want, line)
		}
	}
	crashes, _ := filepath.Glob(filepath.Join(r.dir, "crashes", "crash-*-gpu0.log"))
	var reasons string
	for _, c := range crashes {
		b, _ := os.ReadFile(c)
		reasons += string(b)
	}
	if !strings.Contains(reasons, "kmsg backlog, logged at ktime=0.000000") {
		t.Errorf("no crash snapshot says the Xid 79 was logged at ktime=0.000000 (%d snapshots)", len(crashes))
	}
	g := doc.GPUs[0]
	if g.LastXid == nil || g.LastXid.AgeS == nil {
		t.Fatalf("last_xid %+v, want the replayed Xid 13", g.LastXid)
	}
	// Logged at 60 s of a boot two hours old at the start: 1 h 59 min ago.
	if age := time.Duration(*g.LastXid.AgeS * float64(time.Second)); age < 2*time.Hour-time.Minute-10*time.Second || age > 2*time.Hour-time.Minute+10*time.Second {
		t.Errorf("last_xid %+v is %v old, want 1h59m (its kernel time on the logger's clock)", g.LastXid, age)
	}
}
