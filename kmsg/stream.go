package kmsg

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"
)

const (
	// chunkSize is how much is read at a time from a file or FIFO.
	chunkSize = 32 << 10

	// maxLineLen bounds a line of a file or FIFO (64 KiB, its newline not
	// counted). A longer one cannot be a kernel record (the kernel's own
	// records are under 1 KiB); it is dropped and counted as malformed,
	// whether its newline comes in the same read or after it was cut, so a
	// runaway writer cannot grow the buffer past maxLineLen+chunkSize nor
	// hand a longer line on.
	maxLineLen = 64 << 10

	// defaultPoll is how often a file or FIFO is checked for new data once
	// everything has been read, like tail -f. A regular file is watched with
	// inotify instead where it can be (notify.go), and read at once when it
	// changes.
	defaultPoll = 100 * time.Millisecond
)

// waitChange waits for a file or FIFO to change: until inotify says a
// regular file did (notifyFallback at most), else for the poll interval.
func (r *Reader) waitChange(ctx context.Context) error {
	if r.notify != nil {
		return r.notify.wait(ctx, notifyFallback)
	}
	return sleep(ctx, defaultPoll)
}

// streamSource follows a file or FIFO of records in the /dev/kmsg format
// (one per line), like tail -f: through replacement, truncation and
// over-long lines.
type streamSource struct {
	*Reader
	reopenFailed bool // the replacement of the file could not be opened (logged once)
}

func (r *streamSource) follow(ctx context.Context, fn func(Record)) error {
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
			r.counts.Inc(fileRestarts)
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
func (r *streamSource) replaced() bool {
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
func (r *streamSource) reopen() bool {
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
	r.counts.Inc(fileRestarts)
	r.log.Info("kernel log file replaced: reading the new one from its start", "path", r.path)
	return true
}

// abandon drops the start of a line whose newline will never come (its file
// was replaced or truncated), counted as malformed, and returns the emptied
// buffer and line state.
func (r *streamSource) abandon(pending []byte, discarding bool) ([]byte, bool) {
	if len(pending) > 0 && !discarding {
		r.counts.Inc(malformedRecords)
	}
	return pending[:0], false
}

// lines hands every complete line in buf of at most maxLineLen bytes to
// handleLine and returns what is left: the start of the next line, moved to
// the front of buf, or nothing and discarding when that start is already
// over-long. A longer line is counted as malformed once.
func (r *streamSource) lines(buf []byte, discarding bool, fn func(Record)) ([]byte, bool) {
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
		if len(line) > maxLineLen {
			// Over-long, its newline in the buffer already (it came
			// within the reads that took the buffer past the bound).
			r.counts.Inc(malformedRecords)
			continue
		}
		r.handleLine(line, fn)
	}
	rest := buf[start:]
	if len(rest) > maxLineLen {
		if !discarding {
			r.counts.Inc(malformedRecords)
		}
		rest, discarding = rest[:0], true
	}
	return append(buf[:0], rest...), discarding
}

func (r *streamSource) handleLine(line []byte, fn func(Record)) {
	line = bytes.TrimSuffix(line, []byte{'\r'})
	if len(line) == 0 || line[0] == ' ' {
		// Blank, or a dictionary line (" SUBSYSTEM=pci") belonging to the
		// record before it: neither is a record.
		return
	}
	rec, err := ParseRecord(line)
	if err != nil {
		r.counts.Inc(malformedRecords)
		return
	}
	rec.Backlog = !r.caughtUp
	fn(rec)
}
