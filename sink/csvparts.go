package sink

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// ensureOpen opens the file for the row stamped t, rotating at local
// midnight. A row stamped up to lateRowSlack before the open day, or before
// the file's latest row, goes into it; one further back (the wall clock
// stepped back) opens its own day's file, a new part of it when that file
// holds later rows, and the day it leaves is not compressed (its rows
// continue once the clock is back).
func (c *CSV) ensureOpen(gf *gpuFile, t time.Time) error {
	row := t
	if !gf.day.IsZero() && t.Before(gf.day) && gf.day.Sub(t) <= lateRowSlack {
		// A late row: the current day, never a finished one that may be
		// compressed by now.
		t = gf.day
	}
	stepBack := gf.f != nil && gf.last.Sub(row) > lateRowSlack
	if gf.f != nil && !t.Before(gf.day) && t.Before(gf.next) && !stepBack {
		return nil
	}
	back := stepBack || (!gf.day.IsZero() && t.Before(gf.day))
	if gf.f != nil {
		c.leave(gf, !back)
	}
	y, m, d := t.Date()
	day := time.Date(y, m, d, 0, 0, 0, 0, t.Location())
	if back {
		c.log.Warn("CSV row stamped before the rows already written (the wall clock stepped back); writing it to its own day's file, in time order",
			"gpu", gf.index, "row_time", row, "open_day", gf.day.Format(dayLayout))
	}
	path, last, err := c.pickPart(gf, day, row)
	if err != nil {
		return err
	}
	f, size, created, err := openAppend(path, gf.preamble, c.log)
	if err != nil {
		c.released(path)
		return err
	}
	if created {
		c.newEntry.Store(true)
	}
	gf.mine[path] = true
	gf.f, gf.osf, gf.path, gf.size, gf.last = f, f, path, size, last
	if c.cfg.wrap != nil {
		gf.f = c.cfg.wrap(f)
	}
	gf.day, gf.next = day, time.Date(y, m, d+1, 0, 0, 0, 0, t.Location())
	return nil
}

// pickPart returns the path of the part of day that GPU gf's row stamped
// row goes to, held from the compressor (see compressor.hold), and the time
// of the latest row in it: the day's last part when it is a plain file under
// gf's board line and header without rows later than row (or does not exist yet), else a
// new part after it, whose start is logged with the reason: a restart or a
// SetGPU with another column set or board line, a day already compressed, or later rows
// (the clock stepped back).
func (c *CSV) pickPart(gf *gpuFile, day, row time.Time) (string, time.Time, error) {
	last := 1
	for exists(filepath.Join(c.cfg.Dir, PartName(gf.index, gf.board.ID(), day, last+1))) ||
		exists(filepath.Join(c.cfg.Dir, PartName(gf.index, gf.board.ID(), day, last+1)+".gz")) {
		last++
	}
	for part := last; part < last+100; part++ {
		path := filepath.Join(c.cfg.Dir, PartName(gf.index, gf.board.ID(), day, part))
		why := ""
		var last time.Time
		switch {
		case c.gz != nil && !c.gz.hold(path):
			why = "the day's file is being compressed"
		case exists(path + ".gz"):
			// Before the plain file: a .csv beside its .gz is one whose
			// compression did not finish (adoptGz), not one to append to.
			why = "the day's file is compressed already"
		case exists(path):
			first, err := leading(path, len(gf.preamble))
			if err == nil {
				last, err = lastRowTime(path)
			}
			if err != nil {
				c.released(path)
				return "", time.Time{}, err
			}
			switch {
			case first != "" && gf.board.UUID == "" && !gf.mine[path]:
				// Every GPU not identified yet has the same board line: a
				// file an earlier run left may be another board's.
				why = "the day's file is of a GPU not identified, written before (it may be another board)"
			case first != "" && first != string(gf.preamble) && !strings.HasPrefix(string(gf.preamble), first):
				// (A file cut in its preamble holds the start of it:
				// openAppend writes it again whole.)
				why = "the day's file has other columns, or names the board otherwise (its serial or bus id changed)"
			case last.Sub(row) > lateRowSlack:
				why = "the day's file has later rows (the clock stepped back)"
			}
		}
		if why == "" {
			return path, last, nil
		}
		c.released(path)
		c.log.Info("CSV continues in a new part of the day", "gpu", gf.index, "reason", why,
			"after", filepath.Base(path), "part", part+1)
	}
	return "", time.Time{}, fmt.Errorf("csv for gpu %d: no usable part of %s", gf.index, day.Format(dayLayout))
}

// released tells the compressor that path is no longer open for writing.
func (c *CSV) released(path string) {
	if c.gz != nil {
		c.gz.release(path)
	}
}

// exists reports whether path names anything.
func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

// leading returns the first n bytes of path when they end a line, the
// lines they hold otherwise: what to compare with a preamble of n bytes.
// It is "" when the file holds no whole line (a new file, or one cut in its
// first line, which openAppend rewrites).
func leading(path string, n int) (string, error) {
	f, err := OpenNoFollow(path, os.O_RDONLY, 0)
	if err != nil {
		return "", err
	}
	defer f.Close()
	buf := make([]byte, max(n, 4096))
	got, err := io.ReadFull(f, buf)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return "", err
	}
	buf = buf[:got]
	if len(buf) >= n && n > 0 && buf[n-1] == '\n' {
		return string(buf[:n]), nil
	}
	if i := bytes.LastIndexByte(buf[:min(n, len(buf))], '\n'); i >= 0 {
		return string(buf[:i+1]), nil // another preamble: not the same file's
	}
	if got == len(buf) {
		return string(buf), nil // longer than any preamble: not ours
	}
	return "", nil
}

// lastRowTime returns the timestamp of the last whole row of path; zero
// when it has none (only a header) or the row's timestamp does not parse.
func lastRowTime(path string) (time.Time, error) {
	f, err := OpenNoFollow(path, os.O_RDONLY, 0)
	if err != nil {
		return time.Time{}, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return time.Time{}, err
	}
	const tail = 16 << 10 // many rows: a row is under 1 KiB
	off := max(st.Size()-tail, 0)
	buf := make([]byte, st.Size()-off)
	if _, err := f.ReadAt(buf, off); err != nil && !errors.Is(err, io.EOF) {
		return time.Time{}, err
	}
	end := bytes.LastIndexByte(buf, '\n') // a partial last line is cut off at open
	if end < 0 {
		return time.Time{}, nil
	}
	line := buf[bytes.LastIndexByte(buf[:end], '\n')+1 : end]
	ts, _, _ := bytes.Cut(line, []byte(","))
	t, err := time.Parse(TimestampLayout, string(ts))
	if err != nil {
		return time.Time{}, nil // the header, or not a row of ours
	}
	return t, nil
}

// leave hands the current file to a goroutine that syncs and closes it;
// with finished set (rotation at midnight) it then queues it for
// compression. Called with gf.mu held: a day's file can be 100 MB, and its
// fsync must not hold up the GPU's next row. A file left for another
// reason (a new column set, the clock stepped back, SIGHUP, Close) is not
// compressed: its day is not over. The file is released and queued before
// its sync is reported done, so that once Close has waited for it no part
// is held any more and nothing is added to the (halted) compressor; only the
// housekeeping a finished day starts may still run after Close has returned
// (its work is picked up again at the next start).
func (c *CSV) leave(gf *gpuFile, finished bool) {
	f, path := gf.f, gf.path
	gf.f, gf.osf = nil, nil
	gf.dirty.Store(false)
	if finished {
		c.log.Info("CSV day finished", "gpu", gf.index, "path", path)
	}
	c.leaving.begin()
	go func() {
		if c.cfg.leaveDone != nil {
			defer c.cfg.leaveDone()
		}
		serr, cerr := f.Sync(), f.Close()
		if !c.leaving.end(func() {
			for _, err := range []error{serr, cerr} {
				if err != nil {
					c.syncFailed(gf.index, path, err)
				}
			}
			c.released(path)
			if finished && c.gz != nil {
				c.gz.add(path)
			}
		}) {
			return // Close gave up on it, and counted it; the compressor is closed
		}
		if finished {
			c.housekeeping(c.cfg.Now())
		}
	}()
}
