package kmsg

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

// ErrPermission is wrapped by the errors of Open and Run when the kernel log
// may not be read: /dev/kmsg needs root or CAP_SYSLOG when
// kernel.dmesg_restrict=1. Callers can test for it with errors.Is, say so
// once, and carry on without the kernel log.
var ErrPermission = errors.New("no permission to read the kernel log (needs root or CAP_SYSLOG when kernel.dmesg_restrict=1)")

const (
	// recordBufSize is the read buffer for /dev/kmsg. One read returns one
	// record and fails with EINVAL if the buffer is smaller than the record;
	// the kernel caps a record with its dictionary at 8 KiB
	// (CONSOLE_EXT_LOG_MAX), so twice that is safe.
	recordBufSize = 16 << 10

	// chunkSize is how much is read at a time from a file or FIFO.
	chunkSize = 32 << 10

	// maxLineLen bounds a line of a file or FIFO. A longer one cannot be a
	// kernel record; it is dropped and counted as malformed, so a runaway
	// writer cannot grow the buffer without limit.
	maxLineLen = 64 << 10

	// defaultPoll is how often a file or FIFO is checked for new data once
	// everything has been read, like tail -f. A regular file is watched with
	// inotify instead where it can be (notify.go), and read at once when it
	// changes.
	defaultPoll = 100 * time.Millisecond
)

// Reader follows the kernel log, or a file or FIFO of records in the
// /dev/kmsg format, and hands each record to a callback.
type Reader struct {
	// mu guards f, notify and closed against interrupt and Close, which
	// run on other goroutines while Run replaces the file (reopen).
	mu     sync.Mutex
	f      *os.File
	closed bool

	path   string
	device bool // a character device (/dev/kmsg): one record per read, starting at the end
	log    *slog.Logger

	// read reads from the file being read (readFile): one /dev/kmsg record,
	// or the next chunk of a file or FIFO. Tests replace it to return what
	// the real device only does under load (EPIPE after an overrun), or to
	// act on a file at a chosen point of the loop.
	read func([]byte) (int, error)

	// wait is called when a file or FIFO has no more data; it returns after
	// the poll interval, or ctx's error once ctx is done. Tests replace it
	// to step the loop by hand instead of sleeping.
	wait func(ctx context.Context) error

	// readNow reads one /dev/kmsg record without waiting (readDevNow):
	// EAGAIN once every record in the ring has been read. Run reads the
	// records there when it begins (or after a reopen) with it, as backlog.
	// nil: no backlog phase (tests of the waiting read alone).
	readNow func([]byte) (int, error)

	// open opens the path again after a read error (openPath); tests
	// replace it to fail, or to hand back a stand-in for /dev/kmsg.
	open func(path string) (*os.File, fs.FileMode, error)

	// pause waits out the back-off before a reopen after a read error;
	// tests replace it to step the loop by hand.
	pause func(ctx context.Context, d time.Duration) error

	onState    func(string) // told about reopens (OnState); nil: nobody
	onCaughtUp func()       // told when /dev/kmsg's backlog is read (OnCaughtUp); nil: nobody

	seq seqTrack // /dev/kmsg: the last record handed on

	malformed atomic.Uint64
	overruns  atomic.Uint64
	restarts  atomic.Uint64
	lost      atomic.Uint64 // /dev/kmsg records overwritten unread (sequence gaps)
	reopens   atomic.Uint64 // reads failed and the path opened again

	caughtUp bool // a file or FIFO's end was reached once: later records are fresh

	notify *fileNotifier // a regular file's change notices; nil: polled

	reopenFailed bool // the replacement of the file could not be opened (logged once)

	closeOnce sync.Once
	closeErr  error
}

// Options are Open's settings besides the path.
type Options struct {
	// Log is told what happens to the source: a file replaced or
	// truncated, records lost, a read error and the reopen.
	Log *slog.Logger
	// ResumeAfter, for /dev/kmsg, is the sequence number of the last record
	// the previous run handed on in this boot: Run begins at the oldest
	// record still in the kernel's ring, skips that one and those before
	// it, and hands on the newer ones first, as backlog; the records the
	// kernel overwrote before they could be read are counted (Lost) and
	// logged. Absent (a first start in this boot), reading begins at the
	// end of the log: the boot's earlier records are not replayed as new
	// Xids. A file or FIFO ignores it: a file is read from its start, a
	// FIFO holds only what was written since it was opened.
	ResumeAfter reading.Opt[uint64]
}

// Open opens path for Run with only a logger (Options.Log): /dev/kmsg from
// its end, a file or FIFO from its start.
func Open(path string, log *slog.Logger) (*Reader, error) {
	return OpenWith(path, Options{Log: log})
}

// OpenWith opens path for Run. A character device is taken to be
// /dev/kmsg. Records written from the moment it returns stay in the
// kernel's ring, and a file or FIFO holds them, until Run reads them, so
// the caller may open the log early (before a slow start-up) and Run later
// without losing what came in between: Run hands those on first, as
// backlog. A ring that overflowed meanwhile is counted (Overruns, Lost).
// OpenWith never blocks waiting for a FIFO's writer.
//
// An error wraps ErrPermission when path may not be read.
func OpenWith(path string, o Options) (*Reader, error) {
	f, mode, err := openPath(path)
	if err != nil {
		return nil, err
	}
	device := mode&os.ModeCharDevice != 0
	log := o.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	// A pipe holds only what was written since it was opened: no backlog.
	r := &Reader{f: f, path: path, device: device, log: log, caughtUp: mode&os.ModeNamedPipe != 0, open: openPath, pause: sleep}
	r.read, r.wait = r.readFile, r.waitChange
	if mode.IsRegular() {
		r.notify = newFileNotifier(path)
	}
	if device {
		r.readNow = r.readDevNow
		if after, ok := o.ResumeAfter.Get(); ok {
			r.seq.handed(after)
		} else if err := r.skipToEnd(); err != nil {
			r.Close()
			return nil, err
		}
	}
	return r, nil
}

// openPath opens path for reading and says what it is: a character device
// (non-blocking, at the oldest record in its ring), a FIFO (non-blocking)
// or a regular file.
func openPath(path string) (*os.File, fs.FileMode, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, 0, openError(err)
	}
	mode := fi.Mode()
	flag := os.O_RDONLY
	switch {
	case mode&os.ModeCharDevice != 0:
		// Non-blocking, so that a raw read(2) says when the ring has been
		// read (EAGAIN) instead of waiting (readDevNow); Go's reads still
		// wait for a record in the runtime poller.
		flag |= syscall.O_NONBLOCK
	case mode&os.ModeNamedPipe != 0:
		// Without O_NONBLOCK, open(2) on a FIFO blocks until a writer opens
		// it, and nothing could cancel that. With it, the runtime poller
		// watches the FIFO and reads see EOF while no writer is attached.
		flag |= syscall.O_NONBLOCK
	case mode.IsRegular():
	default:
		return nil, 0, fmt.Errorf("kmsg: open %s: is a %v, want /dev/kmsg, a regular file or a FIFO", path, mode.Type())
	}
	f, err := os.OpenFile(path, flag, 0)
	if err != nil {
		return nil, 0, openError(err)
	}
	if mode&os.ModeCharDevice != 0 {
		if err := rewind(f, path); err != nil {
			f.Close()
			return nil, 0, err
		}
	}
	return f, mode, nil
}

// waitChange waits for a file or FIFO to change: until inotify says a
// regular file did (notifyFallback at most), else for the poll interval.
func (r *Reader) waitChange(ctx context.Context) error {
	if r.notify != nil {
		return r.notify.wait(ctx, notifyFallback)
	}
	return sleep(ctx, defaultPoll)
}

func openError(err error) error {
	if errors.Is(err, fs.ErrPermission) {
		return fmt.Errorf("kmsg: %w: %w", err, ErrPermission)
	}
	return fmt.Errorf("kmsg: %w", err)
}

// Run reads records and calls fn with each, in order, from the calling
// goroutine, until ctx is cancelled; then it closes the Reader and returns
// nil. It returns an error only when fn is nil. Run may be called once.
//
// A record that does not parse is skipped and counted (see Malformed). On
// /dev/kmsg, the records already in the ring when Run begins (written since
// OpenWith, and with Options.ResumeAfter those since the previous run's
// last one) come first, marked Backlog; records the kernel overwrote before
// they could be read are counted (see Overruns and Lost). A read that fails
// otherwise is counted (see Reopens), the first logged, and the path opened
// again with back-off (1 s doubling to 1 min): /dev/kmsg resumes after the
// last record handed on, a file where it was. A file or FIFO is followed like
// tail -f: at its end Run waits for more (a regular file: until inotify says
// it changed, or at most a second; without inotify, or once its watch is
// gone, and for a FIFO, it polls every 100 ms), emits a
// line only once its newline has arrived, and starts over when the file is
// truncated. When the path comes to name another file (a log rotation
// renamed it away, a restarted writer created it again), the old file is
// read to its end once the new one has data, then the new one from its
// start; see Restarts.
func (r *Reader) Run(ctx context.Context, fn func(Record)) error {
	defer r.Close()
	if fn == nil {
		return errors.New("kmsg: Run needs a callback, got nil")
	}
	// Reads of /dev/kmsg, and of a FIFO with an idle writer, block in the
	// runtime poller; cancelling ctx must wake them.
	stop := context.AfterFunc(ctx, r.interrupt)
	defer stop()
	if r.device {
		return r.runDevice(ctx, fn)
	}
	return r.runStream(ctx, fn)
}

// readFile reads from the file being read: the one Run opened last (only
// Run's goroutine replaces it).
func (r *Reader) readFile(b []byte) (int, error) { return r.f.Read(b) }

// interrupt wakes a read blocked in the poller. A deadline in the past fails
// it at once. A file the poller does not watch (a regular file) never blocks,
// and the loop notices ctx by itself; closing is the fallback for anything
// else.
func (r *Reader) interrupt() {
	r.mu.Lock()
	f, n := r.f, r.notify
	r.mu.Unlock()
	if n != nil {
		n.interrupt()
	}
	if err := f.SetReadDeadline(time.Unix(1, 0)); err != nil {
		r.Close()
	}
}

func (r *Reader) runDevice(ctx context.Context, fn func(Record)) error {
	buf := make([]byte, recordBufSize)
	// The records already in the ring when Run begins (after the last one
	// handed on) are read without waiting, as backlog, until it is empty.
	backlog := r.readNow != nil
	var newest reading.Opt[uint64] // the newest record read in the backlog phase
	for {
		var (
			n   int
			err error
		)
		if backlog {
			n, err = r.readNow(buf)
		} else {
			n, err = r.read(buf)
		}
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			switch {
			case backlog && isEAGAIN(err):
				backlog = false // caught up: later records are fresh
				r.checkAhead(newest)
				newest = reading.Opt[uint64]{}
				if r.onCaughtUp != nil {
					r.onCaughtUp()
				}
				continue
			case isEPIPE(err):
				// The kernel overwrote records we had not read yet; the
				// next read returns the oldest one still there, and the
				// gap in sequence numbers says how many were lost.
				r.overruns.Add(1)
				continue
			case errors.Is(err, io.EOF), isEAGAIN(err):
				// /dev/kmsg never ends, and waits in the poller; another
				// character device might end, or not be pollable.
				if err := r.wait(ctx); err != nil {
					return nil
				}
				continue
			}
			if _, ok := r.reopenAfterError(ctx, err); !ok {
				return nil
			}
			backlog = r.readNow != nil // read what came meanwhile, after the last record handed on
			continue
		}
		rec, err := ParseRecord(buf[:n])
		if err != nil {
			r.malformed.Add(1)
			continue
		}
		rec.Backlog = backlog
		if backlog {
			newest = reading.Some(rec.Seq)
		}
		r.handOn(rec, fn)
	}
}

func isEAGAIN(err error) bool { return errors.Is(err, syscall.EAGAIN) }
func isEPIPE(err error) bool  { return errors.Is(err, syscall.EPIPE) }

func (r *Reader) runStream(ctx context.Context, fn func(Record)) error {
	chunk := make([]byte, chunkSize)
	var (
		pending    []byte // the start of a line whose newline has not arrived
		offset     int64  // bytes read so far, to notice truncation
		discarding bool   // inside an over-long line, dropping up to its newline
		drained    bool   // the old file was read to its end after the path named a new one
	)
	for {
		if ctx.Err() != nil {
			return nil
		}
		n, err := r.read(chunk)
		if n > 0 {
			offset += int64(n)
			pending = append(pending, chunk[:n]...)
			pending, discarding = r.lines(pending, discarding, fn)
		}
		if err == nil {
			continue
		}
		if ctx.Err() != nil {
			return nil
		}
		if !errors.Is(err, io.EOF) {
			same, ok := r.reopenAfterError(ctx, err)
			if !ok {
				return nil
			}
			if same && offset > 0 {
				// The same file: go on where the read failed.
				if _, err := r.f.Seek(offset, io.SeekStart); err == nil {
					continue
				}
			}
			// Another file (or one that cannot be positioned): from its
			// start, like a replaced one.
			pending, discarding = r.abandon(pending, discarding)
			offset, drained = 0, false
			continue
		}
		r.caughtUp = true
		if r.replaced() {
			if !drained {
				// Read what the old file got until the new one had
				// data (a writer's last lines), then switch.
				drained = true
				continue
			}
			if r.reopen() {
				pending, discarding = r.abandon(pending, discarding)
				offset, drained = 0, false
				continue
			}
		}
		drained = false
		if fi, err := r.f.Stat(); err == nil && fi.Mode().IsRegular() && fi.Size() < offset {
			// Truncated (log rotation by copytruncate): start over.
			if _, err := r.f.Seek(0, io.SeekStart); err != nil {
				return fmt.Errorf("kmsg: rewind truncated %s: %w", r.path, err)
			}
			pending, discarding = r.abandon(pending, discarding)
			offset = 0
			r.restarts.Add(1)
			r.log.Info("kernel log file truncated: reading it again from its start", "path", r.path)
		}
		if err := r.wait(ctx); err != nil {
			return nil
		}
	}
}

// replaced reports whether the path now names another file than the one
// being read, one a writer has begun: a regular file with data, or a FIFO.
// An empty new file is not switched to yet: a writer that has not been told
// to reopen (a syslog daemon before its rotation signal) still appends to the
// old one.
func (r *Reader) replaced() bool {
	cur, err := r.f.Stat()
	if err != nil {
		return false
	}
	fi, err := os.Stat(r.path)
	if err != nil || os.SameFile(cur, fi) {
		return false // gone (renamed away, not created again yet), or the same
	}
	m := fi.Mode()
	return m&os.ModeNamedPipe != 0 || (m.IsRegular() && fi.Size() > 0)
}

// reopen replaces the file being read with the one the path names now, and
// reports whether it could. A failure is logged once and tried again at the
// next end of the old file, which is followed meanwhile.
func (r *Reader) reopen() bool {
	f, mode, err := openPath(r.path)
	if err == nil && mode&os.ModeCharDevice != 0 {
		f.Close()
		err = fmt.Errorf("kmsg: %s became a character device", r.path)
	}
	if err != nil {
		if !r.reopenFailed {
			r.log.Warn("kernel log file replaced, but the new one cannot be opened: following the old one, trying again", "path", r.path, "error", err)
		}
		r.reopenFailed = true
		return false
	}
	r.reopenFailed = false
	var n *fileNotifier
	if mode.IsRegular() {
		n = newFileNotifier(r.path)
	}
	if !r.swap(f, n) {
		return false
	}
	r.restarts.Add(1)
	r.log.Info("kernel log file replaced: reading the new one from its start", "path", r.path)
	return true
}

// swap makes f (watched by n, nil for none) the file being read and closes
// the old one; it reports false, closing f and n instead, when the Reader
// was closed meanwhile.
func (r *Reader) swap(f *os.File, n *fileNotifier) bool {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		f.Close()
		if n != nil {
			n.close()
		}
		return false
	}
	oldF, oldN := r.f, r.notify
	r.f, r.notify = f, n
	r.mu.Unlock()
	oldF.Close()
	if oldN != nil {
		oldN.close()
	}
	return true
}

// abandon drops the start of a line whose newline will never come (its file
// was replaced or truncated), counted as malformed, and returns the emptied
// buffer and line state.
func (r *Reader) abandon(pending []byte, discarding bool) ([]byte, bool) {
	if len(pending) > 0 && !discarding {
		r.malformed.Add(1)
	}
	return pending[:0], false
}

// lines hands every complete line in buf to handleLine and returns what is
// left: the start of the next line, moved to the front of buf.
func (r *Reader) lines(buf []byte, discarding bool, fn func(Record)) ([]byte, bool) {
	start := 0
	for {
		i := bytes.IndexByte(buf[start:], '\n')
		if i < 0 {
			break
		}
		line := buf[start : start+i]
		start += i + 1
		if discarding {
			discarding = false // this was the tail of an over-long line
			continue
		}
		r.handleLine(line, fn)
	}
	rest := buf[start:]
	if len(rest) > maxLineLen {
		if !discarding {
			r.malformed.Add(1)
		}
		rest, discarding = rest[:0], true
	}
	return append(buf[:0], rest...), discarding
}

func (r *Reader) handleLine(line []byte, fn func(Record)) {
	line = bytes.TrimSuffix(line, []byte{'\r'})
	if len(line) == 0 || line[0] == ' ' {
		// Blank, or a dictionary line (" SUBSYSTEM=pci") belonging to the
		// record before it: neither is a record.
		return
	}
	rec, err := ParseRecord(line)
	if err != nil {
		r.malformed.Add(1)
		return
	}
	rec.Backlog = !r.caughtUp
	fn(rec)
}

func readError(err error) error {
	if errors.Is(err, fs.ErrPermission) {
		return fmt.Errorf("kmsg: %w: %w", err, ErrPermission)
	}
	return fmt.Errorf("kmsg: %w", err)
}

// sleep waits for d or until ctx is done, whichever comes first.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Malformed returns how many lines or records could not be parsed and were
// skipped. It is safe to call while Run is running.
func (r *Reader) Malformed() uint64 { return r.malformed.Load() }

// Overruns returns how many times the kernel overwrote /dev/kmsg records
// before they were read (each time, one or more records were lost). It is
// safe to call while Run is running.
func (r *Reader) Overruns() uint64 { return r.overruns.Load() }

// Restarts returns how many times a followed file was replaced (the new one
// is read from its start) or truncated (read again from its start); each is
// logged. It is safe to call while Run is running.
func (r *Reader) Restarts() uint64 { return r.restarts.Load() }

// Close releases the file. Run closes it on return; Close is for a Reader
// that is never run, and is safe to call more than once.
func (r *Reader) Close() error {
	r.closeOnce.Do(func() {
		r.mu.Lock()
		r.closed = true
		f, n := r.f, r.notify
		r.mu.Unlock()
		r.closeErr = f.Close()
		if n != nil {
			n.close()
		}
	})
	return r.closeErr
}
