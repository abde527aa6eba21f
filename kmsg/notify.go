package kmsg

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// notifyFallback is how long a regular file's reader waits for a change
// notice before it looks at the file anyway: a safety net for changes
// inotify does not report (a file written on another host over NFS).
const notifyFallback = time.Second

// fileNotifier wakes the reader of a regular file when the file changes
// (inotify), so a line appended to it is read at once, as on /dev/kmsg,
// instead of on the next 100 ms poll: an Xid that reaches the log only through
// the file must not wait up to a poll interval for its crash snapshot.
//
// Once the watch is gone (IN_IGNORED: its filesystem was unmounted, or the
// watch was removed; IN_DELETE_SELF), no notice will come again, though a
// writer may still append to the file: waits then poll every 100 ms
// (defaultPoll), as without inotify. A file deleted or replaced while the
// reader holds it open keeps its watch (the kernel removes it only when the
// last descriptor closes), so appends to it still wake the reader at once.
//
// The directory is watched too, for the name alone: a new file created or
// renamed to the path, or written, wakes the reader, which then switches to
// it (Reader.reopen) without waiting for the fallback.
type fileNotifier struct {
	f    *os.File // the inotify descriptor, non-blocking, in Go's poller
	buf  [4096]byte
	wd   int    // the watch on the file
	dwd  int    // the watch on its directory; -1: none
	name []byte // the file's name in the directory
	gone bool   // the file's watch was removed: poll
}

// newFileNotifier watches path for writes, truncation and replacement, and
// its directory for a new file at path; nil when inotify is not available
// (the caller then polls). Without the directory's watch (not readable), a
// new file is found by the fallback poll.
func newFileNotifier(path string) *fileNotifier {
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		return nil
	}
	const mask = unix.IN_MODIFY | unix.IN_ATTRIB | unix.IN_CLOSE_WRITE | unix.IN_MOVE_SELF | unix.IN_DELETE_SELF
	wd, err := unix.InotifyAddWatch(fd, path, mask)
	if err != nil {
		unix.Close(fd)
		return nil
	}
	const dirMask = unix.IN_CREATE | unix.IN_MOVED_TO | unix.IN_MODIFY | unix.IN_CLOSE_WRITE | unix.IN_ONLYDIR
	dwd, err := unix.InotifyAddWatch(fd, filepath.Dir(path), dirMask)
	if err != nil {
		dwd = -1
	}
	return &fileNotifier{f: os.NewFile(uintptr(fd), "inotify:"+path), wd: wd, dwd: dwd, name: []byte(filepath.Base(path))}
}

// wait returns when the file changed since the last wait (at once if it
// did meanwhile), after max at the latest, or with ctx's error once ctx is
// done (interrupt wakes it).
func (n *fileNotifier) wait(ctx context.Context, max time.Duration) error {
	if n.gone {
		return sleep(ctx, min(max, defaultPoll))
	}
	if err := n.f.SetReadDeadline(time.Now().Add(max)); err != nil {
		return sleep(ctx, max)
	}
	// interrupt sets a deadline in the past after ctx is done: checked
	// after the deadline above was set, so a cancel in between is seen.
	if err := ctx.Err(); err != nil {
		return err
	}
	// Read notices until one is about the file or its name; a read that
	// fails (the deadline, or interrupt) ends the wait.
	for {
		k, err := n.f.Read(n.buf[:])
		if err != nil || n.relevant(n.buf[:k]) {
			return ctx.Err()
		}
	}
}

// relevant reports whether a batch of notices tells of a change to the file
// or to what its name in the directory names, and notes whether the file's
// watch is gone. Which change does not matter (the reader reads to the end
// and looks at the path), only that one happened. Notices of other files in
// the directory are not relevant.
func (n *fileNotifier) relevant(b []byte) bool {
	found := false
	for off := 0; off+unix.SizeofInotifyEvent <= len(b); {
		ev := (*unix.InotifyEvent)(unsafe.Pointer(&b[off]))
		name := b[off+unix.SizeofInotifyEvent : min(len(b), off+unix.SizeofInotifyEvent+int(ev.Len))]
		off += unix.SizeofInotifyEvent + int(ev.Len)
		switch {
		case ev.Wd == int32(n.wd):
			if ev.Mask&(unix.IN_IGNORED|unix.IN_DELETE_SELF|unix.IN_UNMOUNT) != 0 {
				n.gone = true
			}
			found = true
		case ev.Wd == int32(n.dwd) && n.dwd >= 0:
			if i := bytes.IndexByte(name, 0); i >= 0 {
				name = name[:i]
			}
			found = found || bytes.Equal(name, n.name)
		default:
			found = true // the queue overflowed (wd -1): anything may have changed
		}
	}
	return found
}

// interrupt wakes a wait in progress.
func (n *fileNotifier) interrupt() { n.f.SetReadDeadline(time.Unix(1, 0)) }

func (n *fileNotifier) close() { n.f.Close() }
