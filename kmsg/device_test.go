package kmsg

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

// openKmsgWriter opens /dev/kmsg for writing, or skips the test saying why.
// CI runs as root, where it is writable; the test is not opt-in there.
func openKmsgWriter(t *testing.T) *os.File {
	t.Helper()
	w, err := os.OpenFile("/dev/kmsg", os.O_WRONLY, 0)
	if err != nil {
		t.Skipf("/dev/kmsg is not writable here (%v): the kernel log round trip needs root (CI runs as root)", err)
	}
	t.Cleanup(func() { w.Close() })
	return w
}

// writeRecords writes each message as one kernel log record at level
// "<lvl>". One open file may write 10 records per 5 s before the kernel's
// printk_devkmsg rate limit drops them, so tests stay below that.
func writeRecords(t *testing.T, w *os.File, lvl int, msgs ...string) {
	t.Helper()
	for _, m := range msgs {
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
// /dev/kmsg and reads them back through the Reader: text, level, facility
// and order intact, nothing from before Open replayed; a second Reader (a
// restarted daemon) starts at the end again and sees only newer records.
func TestDevKmsgRoundTrip(t *testing.T) {
	w := openKmsgWriter(t)
	tag := fmt.Sprintf("gpu-telemetry-kmsg-test-%d-%d", os.Getpid(), time.Now().UnixNano())

	r, err := Open("/dev/kmsg", discard)
	if err != nil {
		t.Fatalf("Open(/dev/kmsg) as a writer of it: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	recs, done := run(t, ctx, r)
	first := []string{tag + " one", tag + " two: NVRM: Xid (PCI:0000:4b:00): 79, pid=1, name=x, test", tag + " three"}
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
	// The Xid in a real kernel record parses as one.
	if x, ok := ParseXid(got[1].Message); !ok || x.Code != 79 {
		t.Errorf("ParseXid(%q) = %+v, %v", got[1].Message, x, ok)
	}
	cancel()
	if err := within(t, done, "Run on /dev/kmsg to return"); err != nil {
		t.Errorf("Run after cancel = %v, want nil", err)
	}
	if r.Overruns() != 0 || r.Malformed() != 0 {
		t.Errorf("overruns %d, malformed %d; want 0 and 0", r.Overruns(), r.Malformed())
	}

	// A restart: the first records are not replayed as new.
	r2, err := Open("/dev/kmsg", discard)
	if err != nil {
		t.Fatal(err)
	}
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
	r := &Reader{f: pr, path: "/dev/kmsg", device: true, read: dev.read}
	ctx, cancel := context.WithCancel(context.Background())
	recs, done := run(t, ctx, r)
	var seqs []uint64
	for range 3 {
		seqs = append(seqs, within(t, recs, "a record").Seq)
	}
	if fmt.Sprint(seqs) != "[100 250 400]" {
		t.Errorf("records %v, want [100 250 400]", seqs)
	}
	if r.Overruns() != 3 || r.Malformed() != 1 {
		t.Errorf("overruns %d malformed %d, want 3 and 1", r.Overruns(), r.Malformed())
	}
	cancel()
	if err := within(t, done, "Run to return after cancel"); err != nil {
		t.Errorf("Run = %v, want nil", err)
	}
}

// TestDeviceReadErrorStopsWithIt: any other read error ends Run with an
// error that names it.
func TestDeviceReadErrorStopsWithIt(t *testing.T) {
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pw.Close()
	dev := &scriptedDevice{idle: pr, script: []any{&os.PathError{Op: "read", Path: "/dev/kmsg", Err: syscall.EIO}}}
	r := &Reader{f: pr, path: "/dev/kmsg", device: true, read: dev.read}
	_, done := run(t, context.Background(), r)
	if err := within(t, done, "Run to fail"); !errors.Is(err, syscall.EIO) {
		t.Errorf("Run = %v, want EIO", err)
	}
}
