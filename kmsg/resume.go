package kmsg

import (
	"fmt"
	"io"
	"os"
	"sync/atomic"
	"syscall"

	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

// /dev/kmsg numbers its records: every record of a boot has the next
// sequence number, so a gap between two records read means the kernel
// overwrote the ones in between before they were read. A restarted logger
// (systemctl restart, a crash and RestartSec) resumes after the last record
// the previous run handed on in the same boot: the ring is read from its
// oldest record, records up to that one are skipped, newer ones are handed on
// as backlog, and the records overwritten before the replay reached them are
// counted as lost.

// seqTrack is the sequence number of the last /dev/kmsg record handed on.
// Only Run's goroutine checks and advances it; others read it (LastSeq), so
// it is atomic, kept as seq+1: 0 means none yet.
type seqTrack struct{ v atomic.Uint64 }

// check says whether a record with sequence number seq is new (after the
// last one handed on), and how many records were lost before it: those
// between the last one and seq, which the kernel overwrote unread.
func (s *seqTrack) check(seq uint64) (fresh bool, lost uint64) {
	last, ok := s.get()
	if !ok {
		return true, 0
	}
	if seq <= last {
		return false, 0
	}
	return true, seq - last - 1
}

// handed records that the record with sequence number seq was handed on.
func (s *seqTrack) handed(seq uint64) { s.v.Store(seq + 1) }

// get returns the last sequence number handed on, false when none is known.
func (s *seqTrack) get() (uint64, bool) {
	v := s.v.Load()
	if v == 0 {
		return 0, false
	}
	return v - 1, true
}

// rewind positions a freshly opened /dev/kmsg at the oldest record still in
// the ring (SEEK_SET; SEEK_DATA would stop at the last "dmesg -C" instead).
func rewind(f *os.File, path string) error {
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("kmsg: seek to the start of %s: %w", path, err)
	}
	return nil
}

// skipToEnd reads, without waiting, every record in the ring of a /dev/kmsg
// opened at its start, hands none on, and remembers the last one's sequence
// number: a first start in a boot begins at the end of the log, as before,
// yet knows where it began, so that its own restart can resume there.
func (r *Reader) skipToEnd() error {
	buf := make([]byte, recordBufSize)
	for {
		n, err := r.readNow(buf)
		switch {
		case err == nil:
			if rec, perr := ParseRecord(buf[:n]); perr == nil {
				r.seq.handed(rec.Seq)
			}
		case isEAGAIN(err):
			return nil
		case isEPIPE(err):
			// Overwritten while being skipped: nothing is lost that would
			// have been handed on.
		default:
			return readError(err)
		}
	}
}

// readDevNow reads one /dev/kmsg record without waiting for one: EAGAIN
// when every record in the ring has been read. The device is opened
// O_NONBLOCK, so a raw read(2) on it never blocks.
func (r *Reader) readDevNow(b []byte) (int, error) {
	rc, err := r.f.SyscallConn()
	if err != nil {
		return 0, err
	}
	var (
		n    int
		rerr error
	)
	if err := rc.Read(func(fd uintptr) bool {
		n, rerr = syscall.Read(int(fd), b)
		return true
	}); err != nil {
		return 0, err
	}
	if rerr != nil {
		return 0, &os.PathError{Op: "read", Path: r.path, Err: rerr}
	}
	if n == 0 {
		return 0, io.EOF
	}
	return n, nil
}

// handOn passes rec to fn when its sequence number is after the last one
// handed on, counting (and logging) the records lost before it.
func (r *Reader) handOn(rec Record, fn func(Record)) {
	fresh, lost := r.seq.check(rec.Seq)
	if !fresh {
		return
	}
	if lost > 0 {
		r.countLost(lost, rec)
	}
	fn(rec)
	r.seq.handed(rec.Seq)
}

// countLost counts records the kernel overwrote before they were read. A
// gap at a replay (after a restart or a reopen) is logged each time, the
// first gap while following is logged; later ones are only counted.
func (r *Reader) countLost(n uint64, next Record) {
	total := r.counts.Add(recordsLost, n)
	switch {
	case next.Backlog:
		r.log.Warn("kernel log records written while the logger was not reading were overwritten in the kernel's ring before they could be read",
			"path", r.path, "lost", n, "first_seq_read", next.Seq, "lost_total", total)
	case total == n:
		r.log.Warn("kernel log records overwritten before they were read (first occurrence; later ones are counted in kmsg_records_lost)",
			"path", r.path, "lost", n, "first_seq_read", next.Seq)
	}
}

// checkAhead is called once the ring has been read to its end, newest
// being the last record read from it: a position to resume after that lies
// beyond it cannot be this ring's (a run-state copied from another host, a
// boot id that did not change), and skipping up to it would drop every new
// record unseen. It is logged, and reading goes on from the ring's end.
func (r *Reader) checkAhead(newest reading.Opt[uint64]) {
	top, ok := newest.Get()
	last, known := r.seq.get()
	if !ok || !known || top >= last {
		return
	}
	r.log.Warn("the saved kernel log position is beyond the newest record in the ring; reading on from the ring's end",
		"path", r.path, "saved_seq", last, "newest_seq", top)
	r.seq.handed(top)
}

// LastSeq returns the sequence number of the last /dev/kmsg record handed
// on (or, before Run, where it will resume or begin), and false when none
// is known (a file or FIFO, or an empty ring). It is safe to call while Run
// is running.
func (r *Reader) LastSeq() (uint64, bool) { return r.seq.get() }

// OnCaughtUp sets a function called on Run's goroutine each time the
// records already in /dev/kmsg's ring when reading began (at the start, and
// after a reopen) have all been handed on, fresh record or not: the moment
// a position saved for the next run (LastSeq) covers the whole replay. It
// must not block. Call it before Run; a file or FIFO never calls it.
func (r *Reader) OnCaughtUp(f func()) { r.onCaughtUp = f }
