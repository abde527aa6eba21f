package kmsg

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// A regular file is followed through change notices: with the fallback poll
// an hour away, only the notice of the appended line can wake the reader,
// so the record arriving at all shows the file is not left to a poll.
func TestReaderWakesOnAppendToRegularFile(t *testing.T) {
	f := runWatched(t, "6,1,10,-;first\n")
	if got := within(t, f.recs, "the first record"); got.Message != "first" {
		t.Fatalf("got %q, want first", got.Message)
	}
	within(t, f.idle, "the reader at the end of the file")
	appendFile(t, f.path, "3,2,20,-;NVRM: Xid (PCI:0000:01:00): 79, GPU has fallen off the bus.\n")
	if got := within(t, f.recs, "the appended record"); got.Seq != 2 || got.Backlog {
		t.Fatalf("got seq %d backlog %v, want the fresh record 2", got.Seq, got.Backlog)
	}
	// Cancelling wakes the wait on the notice descriptor.
	f.stop(t)
}

// Changes made while nobody waits are not lost: the next wait returns at
// once, and a cancelled context ends it.
func TestFileNotifierPendingChangeAndCancel(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	n := newFileNotifier(path)
	if n == nil {
		t.Fatal("inotify not available")
	}
	defer n.close()
	appendFile(t, path, "x\n")
	woke := make(chan error, 1)
	go func() { woke <- n.wait(context.Background(), time.Hour) }()
	if err := within(t, woke, "a wait with a change pending to return"); err != nil {
		t.Fatalf("wait: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { woke <- n.wait(ctx, time.Hour) }()
	cancel()
	n.interrupt()
	if err := within(t, woke, "a cancelled wait to return"); err == nil {
		t.Fatal("a cancelled wait returned no error")
	}
}

// A file replaced under the reader (rename over it, as a log rotation does)
// while a writer that still holds the old file open (a syslog daemon not yet
// told to reopen) appends to it: the reader, holding the old file open too,
// keeps its watch, so with the fallback an hour away the appended line still
// arrives. The same after the watch is gone (IN_IGNORED, here by removing
// it): then only polling can see the line, every 100 ms.
func TestReaderFollowsReplacedFile(t *testing.T) {
	for _, dropWatch := range []bool{false, true} {
		t.Run(map[bool]string{false: "watch kept", true: "watch gone"}[dropWatch], func(t *testing.T) {
			replacedFile(t, dropWatch)
		})
	}
}

func replacedFile(t *testing.T, dropWatch bool) {
	f := runWatched(t, "6,1,10,-;first\n")
	path, r := f.path, f.r
	writer, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer writer.Close()
	within(t, f.recs, "the first record")
	within(t, f.idle, "the reader at the end of the file")
	replacement := filepath.Join(filepath.Dir(path), "new")
	if err := os.WriteFile(replacement, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(replacement, path); err != nil {
		t.Fatal(err)
	}
	if dropWatch {
		// (through the raw descriptor: Fd would take it out of the poller)
		rc, err := r.notify.f.SyscallConn()
		if err != nil {
			t.Fatal(err)
		}
		var rmErr error
		if err := rc.Control(func(fd uintptr) { _, rmErr = unix.InotifyRmWatch(int(fd), uint32(r.notify.wd)) }); err != nil || rmErr != nil {
			t.Fatal(err, rmErr)
		}
	}
	// The notices (link count, IN_IGNORED) wake the reader; it reads
	// nothing new and waits again.
	within(t, f.idle, "the reader waiting again after the replacement")
	if _, err := writer.WriteString("3,2,20,-;NVRM: Xid (PCI:0000:01:00): 79, GPU has fallen off the bus.\n"); err != nil {
		t.Fatal(err)
	}
	if got := within(t, f.recs, "the record appended to the replaced file"); got.Seq != 2 {
		t.Fatalf("got seq %d, want 2", got.Seq)
	}
	f.stop(t)
}

// A file created at the path after the old one was renamed away wakes the
// reader through the watch on the directory: with the fallback poll an hour
// away, nothing else could, so the new file's record arriving at all shows
// it.
func TestReaderWakesOnNewFileAtPath(t *testing.T) {
	f := runWatched(t, "6,1,10,-;first\n")
	within(t, f.recs, "the first record")
	within(t, f.idle, "the reader at the end of the file")
	if err := os.Rename(f.path, f.path+".1"); err != nil {
		t.Fatal(err)
	}
	// The rename's notice wakes the reader; no file at the path yet.
	within(t, f.idle, "the reader waiting again after the rename")
	writeNew(t, f.path, "3,1,20,-;NVRM: Xid (PCI:0000:01:00): 79, GPU has fallen off the bus.\n")
	if got := within(t, f.recs, "the record of the new file"); got.Seq != 1 || got.Backlog {
		t.Fatalf("got seq %d backlog %v, want the fresh record 1 of the new file", got.Seq, got.Backlog)
	}
	f.stop(t)
}
