package kmsg

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/internal/counters"
	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

// ErrPermission is wrapped by the errors of Open and Run when the kernel log
// may not be read: /dev/kmsg needs root or CAP_SYSLOG when
// kernel.dmesg_restrict=1. Callers can test for it with errors.Is, say so
// once, and carry on without the kernel log.
var ErrPermission = errors.New("no permission to read the kernel log (needs root or CAP_SYSLOG when kernel.dmesg_restrict=1)")

// Reader follows the kernel log, or a file or FIFO of records in the
// /dev/kmsg format, and hands each record to a callback.
type Reader struct {
	// mu guards f, notify and closed against interrupt and Close, which
	// run on other goroutines while Run replaces the file (reopen).
	mu     sync.Mutex
	f      *os.File
	closed bool

	path   string
	device bool // a character device (/dev/kmsg), else a file or FIFO: the source Run follows (source)
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

	counts *counters.Registry // Options.Counters

	caughtUp bool // a file or FIFO's end was reached once: later records are fresh

	notify *fileNotifier // a regular file's change notices; nil: polled

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
	// Counters is the registry the reader counts in (counters.go). Required.
	Counters *counters.Registry
}

// Open opens path for Run with only a logger and the registry it counts in
// (Options.Log, Options.Counters): /dev/kmsg from its end, a file or FIFO
// from its start.
func Open(path string, log *slog.Logger, reg *counters.Registry) (*Reader, error) {
	return OpenWith(path, Options{Log: log, Counters: reg})
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
	counts := counters.Need(o.Counters, "kmsg.Options.Counters")
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
	r := &Reader{f: f, path: path, device: device, log: log, caughtUp: mode&os.ModeNamedPipe != 0, open: openPath, pause: sleep,
		counts: counts}
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
	return r.source().follow(ctx, fn)
}

// source is one kind of kernel log Run follows: /dev/kmsg (deviceSource,
// device.go) or a file or FIFO of its records (streamSource, stream.go).
// The Reader holds what they share: the file, its reopening after a read
// error, the counters and Close.
type source interface {
	// follow hands each record to fn, in order, until ctx is done.
	follow(ctx context.Context, fn func(Record)) error
}

// source returns the source of the kind of file OpenWith found (device).
func (r *Reader) source() source {
	if r.device {
		return deviceSource{r}
	}
	return &streamSource{Reader: r}
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
