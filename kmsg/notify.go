package kmsg

import (
	"context"
	"os"
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
type fileNotifier struct {
	f    *os.File // the inotify descriptor, non-blocking, in Go's poller
	buf  [4096]byte
	wd   int  // the watch
	gone bool // the watch was removed: poll
}

// newFileNotifier watches path for writes, truncation and replacement; nil
// when inotify is not available (the caller then polls).
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
	return &fileNotifier{f: os.NewFile(uintptr(fd), "inotify:"+path), wd: wd}
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
	// Which change does not matter (the file is read to its end), only
	// whether the watch is gone.
	k, _ := n.f.Read(n.buf[:])
	for off := 0; off+unix.SizeofInotifyEvent <= k; {
		ev := (*unix.InotifyEvent)(unsafe.Pointer(&n.buf[off]))
		if ev.Mask&(unix.IN_IGNORED|unix.IN_DELETE_SELF|unix.IN_UNMOUNT) != 0 {
			n.gone = true
		}
		off += unix.SizeofInotifyEvent + int(ev.Len)
	}
	return ctx.Err()
}

// interrupt wakes a wait in progress.
func (n *fileNotifier) interrupt() { n.f.SetReadDeadline(time.Unix(1, 0)) }

func (n *fileNotifier) close() { n.f.Close() }
