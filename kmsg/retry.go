package kmsg

import (
	"context"
	"errors"
	"os"
	"time"
)

// A read that fails for another reason than an overrun or the end of a file
// (EIO, a file system gone away) does not end the reader: the path is opened
// again with back-off, on the monotonic clock (a timer), until it can be or
// Run is cancelled. /dev/kmsg resumes after the last record handed on (the
// records overwritten meanwhile are counted in Lost); a file resumes where
// it was when the path still names it, else the new one is read from its
// start.
const (
	reopenFirst = time.Second // wait before the first try
	reopenMax   = time.Minute // the back-off doubles up to this
)

// reopenAfterError counts the read error err (the first is logged), says so
// through the state callback, and opens the path again with back-off. It
// returns the old file's identity check: same is true when the path still
// names the file that failed (so a file's offset still holds). ok is false
// when ctx ended first.
func (r *Reader) reopenAfterError(ctx context.Context, err error) (same, ok bool) {
	if r.counts.Add(readReopens, 1) == 1 {
		r.log.Warn("kernel log read failed: opening it again with back-off (first occurrence; later ones are counted in kmsg_reopens)",
			"path", r.path, "error", err)
	}
	r.setState("reopening after a read error: " + err.Error())
	old, _ := r.f.Stat()
	delay := reopenFirst
	for {
		if r.pause(ctx, delay) != nil {
			return false, false
		}
		f, mode, oerr := r.open(r.path)
		if oerr == nil && (mode&os.ModeCharDevice != 0) != r.device {
			f.Close()
			oerr = errKindChanged
		}
		if oerr == nil {
			fi, _ := f.Stat()
			same = old != nil && fi != nil && os.SameFile(old, fi)
			var n *fileNotifier
			if mode.IsRegular() {
				n = newFileNotifier(r.path)
			}
			if !r.swap(f, n) {
				return false, false
			}
			r.log.Info("kernel log opened again after a read error", "path", r.path, "same_file", same)
			r.setState("following")
			return same, true
		}
		r.log.Debug("kernel log still cannot be opened", "path", r.path, "error", oerr, "next_try", min(2*delay, reopenMax))
		delay = min(2*delay, reopenMax)
	}
}

// errKindChanged: the path no longer names the kind of file being read
// (/dev/kmsg replaced by a file, or the other way round).
var errKindChanged = errors.New("kmsg: the path now names another kind of file")

// setState tells the state callback, if any, what the reader is doing.
func (r *Reader) setState(s string) {
	if r.onState != nil {
		r.onState(s)
	}
}

// OnState sets a function told what the reader is doing when that changes
// while Run runs: "reopening after a read error: ..." and "following" again.
// Call it before Run.
func (r *Reader) OnState(f func(string)) { r.onState = f }
