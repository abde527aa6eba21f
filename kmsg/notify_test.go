package kmsg

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// A regular file is followed through change notices: with the fallback poll
// an hour away, only the notice of the appended line can wake the reader,
// so the record arriving at all shows the file is not left to a poll.
func TestReaderWakesOnAppendToRegularFile(t *testing.T) {
	path, r := openFile(t, "6,1,10,-;first\n")
	if r.notify == nil {
		t.Fatal("a regular file is not watched with inotify")
	}
	idle := make(chan struct{}, 10)
	r.wait = func(ctx context.Context) error {
		idle <- struct{}{}
		return r.notify.wait(ctx, time.Hour)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	recs, done := run(t, ctx, r)
	if got := within(t, recs, "the first record"); got.Message != "first" {
		t.Fatalf("got %q, want first", got.Message)
	}
	within(t, idle, "the reader at the end of the file")
	appendFile(t, path, "3,2,20,-;NVRM: Xid (PCI:0000:01:00): 79, GPU has fallen off the bus.\n")
	if got := within(t, recs, "the appended record"); got.Seq != 2 || got.Backlog {
		t.Fatalf("got seq %d backlog %v, want the fresh record 2", got.Seq, got.Backlog)
	}
	// Cancelling wakes the wait on the notice descriptor.
	cancel()
	if err := within(t, done, "Run to return after cancel"); err != nil {
		t.Fatalf("Run: %v", err)
	}
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
