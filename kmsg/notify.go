package kmsg

import (
	"context"
	"os"
	"time"

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
type fileNotifier struct {
	f   *os.File // the inotify descriptor, non-blocking, in Go's poller
	buf [4096]byte
}

// newFileNotifier watches path for writes, truncation and replacement; nil
// when inotify is not available (the caller then polls).
func newFileNotifier(path string) *fileNotifier {
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		return nil
	}
	const mask = unix.IN_MODIFY | unix.IN_ATTRIB | unix.IN_CLOSE_WRITE | unix.IN_MOVE_SELF | unix.IN_DELETE_SELF
	if _, err := unix.InotifyAddWatch(fd, path, mask); err != nil {
		unix.Close(fd)
		return nil
	}
	return &fileNotifier{f: os.NewFile(uintptr(fd), "inotify:"+path)}
}

// wait returns when the file changed since the last wait (at once if it
// did meanwhile), after max at the latest, or with ctx's error once ctx is
// done (interrupt wakes it).
func (n *fileNotifier) wait(ctx context.Context, max time.Duration) error {
	if err := n.f.SetReadDeadline(time.Now().Add(max)); err != nil {
		return sleep(ctx, max)
	}
	// interrupt sets a deadline in the past after ctx is done: checked
	// after the deadline above was set, so a cancel in between is seen.
	if err := ctx.Err(); err != nil {
		return err
	}
	n.f.Read(n.buf[:]) // the events themselves do not matter: the file is read to its end
	return ctx.Err()
}

// interrupt wakes a wait in progress.
func (n *fileNotifier) interrupt() { n.f.SetReadDeadline(time.Unix(1, 0)) }

func (n *fileNotifier) close() { n.f.Close() }
