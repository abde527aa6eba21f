package kmsg

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/internal/counters"
	"github.com/gpu-telemetry/gpu-telemetry/internal/testutil"
	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

// openKmsgWriter opens the host's /dev/kmsg for writing
// (testutil.HostKmsg: it skips the test where that is not allowed, and
// refuses a line GPU alerting takes for a failure), with a tag for the
// test's records unique to this run of test name.
func openKmsgWriter(t *testing.T, name string) (w io.Writer, tag string) {
	t.Helper()
	return testutil.HostKmsg(t), fmt.Sprintf("gpu-telemetry-kmsg-%s-%d-%d", name, os.Getpid(), time.Now().UnixNano())
}

// openDevKmsg opens a Reader of the real /dev/kmsg (at its end).
func openDevKmsg(t *testing.T) *Reader {
	t.Helper()
	r, err := Open("/dev/kmsg", discard, counters.New())
	if err != nil {
		t.Fatalf("Open(/dev/kmsg) as a writer of it: %v", err)
	}
	return r
}

// writeRecords writes each message as one kernel log record at level
// "<lvl>". One open file may write 10 records per 5 s before the kernel's
// printk_devkmsg rate limit drops them, so tests stay below that. The log
// is the host's: a message that any of this package's parsers takes for a
// GPU's failure fails the test unwritten.
func writeRecords(t *testing.T, w io.Writer, lvl int, msgs ...string) {
	t.Helper()
	for _, m := range msgs {
		_, xid := ParseXid(m)
		_, nvrm := ParseNVRM(m)
		_, aer := ParseAER(m)
		if xid || nvrm || aer {
			t.Fatalf("%q reads as a GPU failure (Xid %v, NVRM %v, AER %v): not for the host's kernel log", m, xid, nvrm, aer)
		}
		if _, err := fmt.Fprintf(w, "<%d>%s\n", lvl, m); err != nil {
			t.Fatalf("write /dev/kmsg: %v", err)
		}
	}
}

// readTagged returns the messages of the records carrying tag, in order,
// until want of them have arrived; it fails on a record from before the
// reader was opened.
func readTagged(t *testing.T, recs <-chan Record, tag string, want int) []Record {
	t.Helper()
	var got []Record
	for len(got) < want {
		rec := within(t, recs, fmt.Sprintf("tagged record %d of %d", len(got)+1, want))
		if rec.Seq == 0 {
			t.Fatalf("got the boot's first record (%q): Open did not start at the end", rec.Message)
		}
		if strings.Contains(rec.Message, tag) {
			got = append(got, rec)
		}
	}
	return got
}

// TestDevKmsgRoundTrip writes uniquely tagged records to the real
// /dev/kmsg and reads them back through the Reader: text (one shaped like
// the driver's lines, its PCI address, colons and commas, but no NVRM or
// Xid: ParseXid is tested on the driver's text in xid_test.go), level,
// facility and order intact, nothing from before Open replayed; a second
// Reader (a restarted daemon) starts at the end again and sees only newer
// records.
func TestDevKmsgRoundTrip(t *testing.T) {
	w, tag := openKmsgWriter(t, "test")
	r := openDevKmsg(t)
	ctx, cancel := context.WithCancel(context.Background())
	recs, done := run(t, ctx, r)
	first := []string{tag + " one", tag + " two: TEST (PCI:0000:4b:00): 79, pid=1, name=x, test", tag + " three"}
	writeRecords(t, w, 4, first...)
	got := readTagged(t, recs, tag, len(first))
	for i, rec := range got {
		if rec.Message != first[i] {
			t.Errorf("record %d = %q, want %q", i, rec.Message, first[i])
		}
		if rec.Level != 4 || rec.Facility != 1 {
			t.Errorf("record %d level %d facility %d, want 4 and 1 (user)", i, rec.Level, rec.Facility)
		}
		if i > 0 && rec.Seq <= got[i-1].Seq {
			t.Errorf("sequence numbers not increasing: %d after %d", rec.Seq, got[i-1].Seq)
		}
		if rec.Time <= 0 {
			t.Errorf("record %d has no timestamp: %+v", i, rec)
		}
	}
	cancel()
	if err := within(t, done, "Run on /dev/kmsg to return"); err != nil {
		t.Errorf("Run after cancel = %v, want nil", err)
	}
	if r.counts.Load(ringOverruns) != 0 || r.counts.Load(malformedRecords) != 0 {
		t.Errorf("overruns %d, malformed %d; want 0 and 0", r.counts.Load(ringOverruns), r.counts.Load(malformedRecords))
	}

	// A restart: the first records are not replayed as new.
	r2 := openDevKmsg(t)
	ctx2, cancel2 := context.WithCancel(context.Background())
	defer cancel2()
	recs2, done2 := run(t, ctx2, r2)
	writeRecords(t, w, 6, tag+" after restart")
	again := readTagged(t, recs2, tag, 1)
	if again[0].Message != tag+" after restart" || again[0].Seq <= got[len(got)-1].Seq {
		t.Errorf("after a restart the first tagged record is %q (seq %d); want only the new one", again[0].Message, again[0].Seq)
	}
	cancel2()
	if err := within(t, done2, "the second Run to return"); err != nil {
		t.Errorf("Run after cancel = %v", err)
	}
}

// eagain is a non-blocking read of /dev/kmsg with the ring read to its end.
var eagain = &os.PathError{Op: "read", Path: "/dev/kmsg", Err: syscall.EAGAIN}

// scriptedDevice stands in for /dev/kmsg's read(2): each call returns the
// next record or error of the script; then reads block on a pipe until the
// Reader is cancelled (as the real device blocks until a record arrives).
type scriptedDevice struct {
	script []any // string record or error
	idle   *os.File
}

func (d *scriptedDevice) read(b []byte) (int, error) {
	if len(d.script) == 0 {
		return d.idle.Read(b)
	}
	step := d.script[0]
	d.script = d.script[1:]
	if err, ok := step.(error); ok {
		return 0, err
	}
	return copy(b, step.(string)), nil
}

// TestDeviceOverrunIsCountedAndSkipped: when the kernel overwrote records
// before they were read, read(2) fails with EPIPE; the Reader counts each
// overrun and goes on with the oldest record still there, losing none of
// the records that survived.
func TestDeviceOverrunIsCountedAndSkipped(t *testing.T) {
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pw.Close()
	epipe := &os.PathError{Op: "read", Path: "/dev/kmsg", Err: syscall.EPIPE}
	dev := &scriptedDevice{idle: pr, script: []any{
		"6,100,1000,-;before the overrun\n",
		epipe,
		"6,250,2000,-;oldest record still in the ring\n",
		epipe, epipe,
		"not a record\n",
		"4,400,3000,-;NVRM: Xid (PCI:0000:4b:00): 119, pid=1, name=x, after two overruns\n",
	}}
	r := &Reader{f: pr, path: "/dev/kmsg", device: true, read: dev.read, log: discard, counts: counters.New()}
	ctx, cancel := context.WithCancel(context.Background())
	recs, done := run(t, ctx, r)
	var seqs []uint64
	for range 3 {
		seqs = append(seqs, within(t, recs, "a record").Seq)
	}
	if fmt.Sprint(seqs) != "[100 250 400]" {
		t.Errorf("records %v, want [100 250 400]", seqs)
	}
	if r.counts.Load(ringOverruns) != 3 || r.counts.Load(malformedRecords) != 1 {
		t.Errorf("overruns %d malformed %d, want 3 and 1", r.counts.Load(ringOverruns), r.counts.Load(malformedRecords))
	}
	// 101..249 and 251..399 were overwritten unread.
	if r.counts.Load(recordsLost) != 149+149 {
		t.Errorf("Lost() = %d, want %d (the gaps in the sequence numbers)", r.counts.Load(recordsLost), 149+149)
	}
	cancel()
	if err := within(t, done, "Run to return after cancel"); err != nil {
		t.Errorf("Run = %v, want nil", err)
	}
}

// TestDeviceReplaysRecordsWrittenBeforeOpen is a restart in the same boot
// on the real /dev/kmsg: the previous run handed on the record before the
// test's first one; a tagged record written while no reader was open (the
// logger restarting, or waiting on a stuck GPU: an Xid in production, a
// harmless line here) is handed on by the new Reader, as backlog, and
// nothing up to the saved record is.
func TestDeviceReplaysRecordsWrittenBeforeOpen(t *testing.T) {
	w, tag := openKmsgWriter(t, "replay")

	// The previous run: it handed on the tagged "seen" record, and stopped.
	r0 := openDevKmsg(t)
	// A first start in a boot begins at the end, and knows where that is.
	if _, ok := r0.LastSeq(); !ok {
		t.Error("LastSeq() unknown after opening /dev/kmsg at its end")
	}
	ctx0, cancel0 := context.WithCancel(context.Background())
	recs0, done0 := run(t, ctx0, r0)
	writeRecords(t, w, 6, tag+" seen by the previous run")
	seen := readTagged(t, recs0, tag, 1)[0]
	cancel0()
	within(t, done0, "the previous run to stop")
	if last, ok := r0.LastSeq(); !ok || last < seen.Seq {
		t.Fatalf("LastSeq() = %d, %v after handing on record %d", last, ok, seen.Seq)
	}
	saved, _ := r0.LastSeq()

	// Written while nothing reads the kernel log.
	missed := tag + " written while nothing reads the log"
	writeRecords(t, w, 4, missed)

	r, err := OpenWith("/dev/kmsg", Options{Log: discard, Counters: counters.New(), ResumeAfter: reading.Some(saved)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	recs, done := run(t, ctx, r)
	writeRecords(t, w, 6, tag+" after the start")
	var got []Record
	for len(got) < 2 {
		rec := within(t, recs, "a record after the saved one")
		if rec.Seq <= saved {
			t.Fatalf("record %d (%q) is not after the saved %d: replayed too much", rec.Seq, rec.Message, saved)
		}
		if strings.Contains(rec.Message, tag) {
			got = append(got, rec)
		}
	}
	if got[0].Message != missed || !got[0].Backlog || got[0].Level != 4 {
		t.Errorf("first tagged record %q level %d backlog %v, want the one written before Open, as backlog", got[0].Message, got[0].Level, got[0].Backlog)
	}
	// Whether it is backlog depends on whether Run had emptied the ring
	// when it was written (TestDeviceBacklogThenFresh pins that).
	if got[1].Message != tag+" after the start" {
		t.Errorf("second tagged record %q, want the one written after the start", got[1].Message)
	}
	if r.counts.Load(recordsLost) != 0 {
		t.Errorf("Lost() = %d, want 0: the ring still held every record", r.counts.Load(recordsLost))
	}
	cancel()
	if err := within(t, done, "Run to return"); err != nil {
		t.Errorf("Run after cancel = %v", err)
	}
}

// scriptedReader is a /dev/kmsg Reader over dev: reads follow its script,
// a reopen after a read error hands back a pipe and counts the tries (fails
// while failOpens is above zero), and the back-off's waits are recorded,
// not slept.
type scriptedReader struct {
	*Reader
	logs      *testutil.LogBuf
	opens     int
	failOpens int
	pauses    []time.Duration
	states    []string
}

func newScriptedReader(t *testing.T, dev *scriptedDevice, now *scriptedDevice) *scriptedReader {
	t.Helper()
	// The file being read is a pipe that the script's idle reads block on,
	// so that cancelling Run wakes them; a reopen makes a new one.
	idlePipe := func() *os.File {
		pr, pw, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { pw.Close() })
		dev.idle = pr
		return pr
	}
	s := &scriptedReader{logs: &testutil.LogBuf{}}
	s.Reader = &Reader{f: idlePipe(), path: "/dev/kmsg", device: true, read: dev.read, log: s.logs.Logger(), counts: counters.New()}
	if now != nil {
		s.readNow = now.read
	}
	s.open = func(string) (*os.File, fs.FileMode, error) {
		s.opens++
		if s.failOpens > 0 {
			s.failOpens--
			return nil, 0, &os.PathError{Op: "open", Path: "/dev/kmsg", Err: syscall.ENODEV}
		}
		return idlePipe(), fs.ModeDevice | fs.ModeCharDevice, nil
	}
	s.pause = func(ctx context.Context, d time.Duration) error {
		s.pauses = append(s.pauses, d)
		return ctx.Err()
	}
	s.OnState(func(st string) { s.states = append(s.states, st) })
	return s
}

// TestDeviceReadErrorReopens: a read error that is not an overrun does not
// stop the reader for good: it is counted and logged once, the device is
// opened again with back-off (1 s, doubling), and reading resumes after the
// last record handed on: the records read again are skipped, the ones
// overwritten meanwhile counted as lost.
func TestDeviceReadErrorReopens(t *testing.T) {
	eio := &os.PathError{Op: "read", Path: "/dev/kmsg", Err: syscall.EIO}
	dev := &scriptedDevice{script: []any{
		"6,100,1000,-;before the error\n",
		eio,
		// After the reopen, the ring from its oldest record.
		"6,99,900,-;old\n",
		"6,100,1000,-;before the error\n",
		"6,101,1100,-;after the error\n",
		"4,103,1300,-;NVRM: Xid (PCI:0000:4b:00): 79, pid=1, name=x, after a lost record\n",
		eio,
		"6,104,1400,-;after the second error\n",
	}}
	s := newScriptedReader(t, dev, nil)
	s.failOpens = 2 // the first reopen needs three tries
	ctx, cancel := context.WithCancel(context.Background())
	recs, done := run(t, ctx, s.Reader)
	var seqs []uint64
	for range 4 {
		seqs = append(seqs, within(t, recs, "a record").Seq)
	}
	cancel()
	if err := within(t, done, "Run to return after cancel"); err != nil {
		t.Errorf("Run = %v, want nil", err)
	}
	if fmt.Sprint(seqs) != "[100 101 103 104]" {
		t.Errorf("records %v, want [100 101 103 104]: each once, in order", seqs)
	}
	if s.counts.Load(readReopens) != 2 || s.counts.Load(recordsLost) != 1 {
		t.Errorf("Reopens() %d Lost() %d, want 2 and 1", s.counts.Load(readReopens), s.counts.Load(recordsLost))
	}
	if s.opens != 4 || fmt.Sprint(s.pauses) != "[1s 2s 4s 1s]" {
		t.Errorf("%d opens after waits %v, want 4 after [1s 2s 4s 1s] (back-off doubling, reset by a reopen)", s.opens, s.pauses)
	}
	if len(s.states) != 4 || !strings.Contains(s.states[0], "reopening after a read error") || !strings.Contains(s.states[0], "input/output error") || s.states[1] != "following" {
		t.Errorf("states %q, want reopening (with the error) then following, twice", s.states)
	}
	logs := s.logs.String()
	if n := strings.Count(logs, "kernel log read failed"); n != 1 {
		t.Errorf("the read failure logged %d times, want once (the first):\n%s", n, logs)
	}
	testutil.Contains(t, "the reader's log", logs, "input/output error", "overwritten before they were read")
}

// TestDeviceBacklogThenFresh: the records in the ring when Run begins are
// read without waiting and marked backlog, the saved record and those
// before it skipped, the gap between the saved record and the oldest one
// left counted and logged as records lost while the logger was not
// reading; once the ring is empty (EAGAIN) records are fresh.
func TestDeviceBacklogThenFresh(t *testing.T) {
	now := &scriptedDevice{script: []any{
		"6,45,450,-;overwritten ones were 41..44\n",
		"4,46,460,-;NVRM: Xid (PCI:0000:4b:00): 119, pid=1, name=x, while restarting\n",
		eagain,
	}}
	dev := &scriptedDevice{script: []any{"6,47,470,-;fresh\n"}}
	s := newScriptedReader(t, dev, now)
	s.seq.handed(40) // the previous run's last record
	ctx, cancel := context.WithCancel(context.Background())
	recs, done := run(t, ctx, s.Reader)
	var got []string
	for range 3 {
		rec := within(t, recs, "a record")
		got = append(got, fmt.Sprintf("%d:%v", rec.Seq, rec.Backlog))
	}
	cancel()
	within(t, done, "Run to return")
	if fmt.Sprint(got) != "[45:true 46:true 47:false]" {
		t.Errorf("records (seq:backlog) %v, want [45:true 46:true 47:false]", got)
	}
	if s.counts.Load(recordsLost) != 4 {
		t.Errorf("Lost() = %d, want 4 (41..44)", s.counts.Load(recordsLost))
	}
	if last, ok := s.LastSeq(); !ok || last != 47 {
		t.Errorf("LastSeq() = %d, %v, want 47", last, ok)
	}
	testutil.Contains(t, "the reader's log", s.logs.String(), "written while the logger was not reading were overwritten", "lost=4", "first_seq_read=45")
}

// TestDeviceSavedPositionAheadOfTheRing: a saved position beyond the
// newest record in the ring cannot be this ring's; skipping up to it would
// drop every new record unseen. Once the ring is read, reading goes on from
// its end, and says so.
func TestDeviceSavedPositionAheadOfTheRing(t *testing.T) {
	now := &scriptedDevice{script: []any{"6,7,70,-;old\n", "6,8,80,-;newest in the ring\n", eagain}}
	dev := &scriptedDevice{script: []any{"4,9,90,-;NVRM: Xid (PCI:0000:4b:00): 79, pid=1, name=x, fresh\n"}}
	s := newScriptedReader(t, dev, now)
	s.seq.handed(5000) // not this ring's
	ctx, cancel := context.WithCancel(context.Background())
	recs, done := run(t, ctx, s.Reader)
	rec := within(t, recs, "the fresh record")
	cancel()
	within(t, done, "Run to return")
	if rec.Seq != 9 || rec.Backlog {
		t.Errorf("got seq %d backlog %v, want the fresh record 9", rec.Seq, rec.Backlog)
	}
	testutil.Contains(t, "the reader's log", s.logs.String(), "beyond the newest record in the ring", "saved_seq=5000", "newest_seq=8")
}

// TestDeviceCaughtUpWithoutAFreshRecord: once the ring's records are read
// (EAGAIN), OnCaughtUp is told so at once, with LastSeq at the replay's last
// record, though no fresh record follows: the caller saves the position
// then, not when the log next speaks.
func TestDeviceCaughtUpWithoutAFreshRecord(t *testing.T) {
	now := &scriptedDevice{script: []any{
		"6,45,450,-;replayed one\n",
		"4,46,460,-;NVRM: Xid (PCI:0000:4b:00): 119, pid=1, name=x, replayed two\n",
		eagain,
	}}
	s := newScriptedReader(t, &scriptedDevice{}, now) // nothing fresh: the read waits
	s.seq.handed(44)
	caught := make(chan uint64, 1)
	s.OnCaughtUp(func() {
		last, _ := s.LastSeq()
		caught <- last
	})
	ctx, cancel := context.WithCancel(context.Background())
	recs, done := run(t, ctx, s.Reader)
	for range 2 {
		within(t, recs, "a replayed record")
	}
	if last := within(t, caught, "OnCaughtUp"); last != 46 {
		t.Errorf("LastSeq when caught up = %d, want 46", last)
	}
	cancel()
	within(t, done, "Run to return")
}
