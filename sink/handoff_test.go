package sink

import (
	"errors"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/internal/testutil"
)

// syncCounted is a CSV file whose fsyncs are counted once they are done.
type syncCounted struct {
	*os.File
	n *atomic.Int32
}

func (f syncCounted) Sync() error {
	err := f.File.Sync()
	f.n.Add(1)
	return err
}

// waitFor fails t unless ch is closed (or sends) within a generous
// deadline: what never came.
func waitFor(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(30 * time.Second):
		t.Fatalf("%s not within 30s", what)
	}
}

// TestCSVCloseWaitsForTheLeaveARowRuns: Close queues each file's leave
// (withLock) and finds the lock held by a row; before Close looks at the
// queue, the next row takes the lock and the queued leave with it, and is
// held there (a busy machine) before running it. Close finds the queue
// empty and no goroutine waiting, yet the file's last fsync is still to
// come: it is waited for, or abandoned and counted in sync_errors, before
// Close returns. Before, Close's wait found nothing running and returned
// at once; the fsync began after it, neither waited for nor counted.
func TestCSVCloseWaitsForTheLeaveARowRuns(t *testing.T) {
	var synced atomic.Int32
	var armed atomic.Bool
	busy, taken, closed := make(chan struct{}), make(chan struct{}), make(chan struct{})
	var busyOnce, takenOnce sync.Once
	var c *CSV
	c = newTestCSV(t, t.TempDir(), CSVConfig{Tick: make(chan time.Time), // no background round takes the lock
		wrap: func(f *os.File) file { return syncCounted{f, &synced} },
		hold: func(at handStep) {
			if !armed.Load() {
				return
			}
			switch at {
			case handBusy: // Close queued GPU 0's leave; a row holds the lock
				busyOnce.Do(func() { close(busy) })
				<-taken
			case handTaken: // the next row took the leave, not run yet (the first batch taken after Close's)
				first := false
				takenOnce.Do(func() { close(taken); first = true })
				if !first {
					return // GPU 1's, on Close
				}
				// Held until Close returned or waits for what runs.
				testutil.WaitUntil(30*time.Second, func() bool {
					select {
					case <-closed:
						return true
					default:
					}
					c.leaving.mu.Lock()
					defer c.leaving.mu.Unlock()
					return c.leaving.idle != nil
				})
			}
		}})
	s := fullSample()
	if err := c.Write(&s); err != nil {
		t.Fatal(err)
	}
	c.syncNewEntries(true) // the new file's directory is synced (a background round): Close waits on nothing else
	gf := c.files[s.GPU]
	gf.mu.Lock() // a row's write in progress
	armed.Store(true)
	done := make(chan error, 1)
	go func() { done <- c.Close() }()
	waitFor(t, busy, "Close's leave of GPU 0 queued behind the row")
	gf.mu.Unlock() // the row is written
	wrote := make(chan error, 1)
	go func() { s := s; wrote <- c.Write(&s) }() // a late row takes the lock, and Close's leave
	closeBounded(t, func() error { return <-done }, "a leave a row runs")
	n, errs := synced.Load(), c.Stats().SyncErrors
	close(closed)
	if n == 0 && errs == 0 {
		t.Error("Close returned before its file's last fsync: neither waited for nor counted in sync_errors")
	}
	if err := <-wrote; !errors.Is(err, errClosed) {
		t.Errorf("the late row: %v, want errClosed", err)
	}
}

// holdWaiter makes cfg hold withLock's goroutine back before it waits for
// a file's lock, until release is called.
func holdWaiter(cfg *CSVConfig) (release func()) {
	ch := make(chan struct{})
	var once sync.Once
	cfg.hold = func(at handStep) {
		if at == handWaiter {
			<-ch
		}
	}
	return func() { once.Do(func() { close(ch) }) }
}

// TestCSVReadsAfterSetGPUSeeIt: SetGPU returns without waiting on a row
// write stuck on the disk; once that write returns, the GPU's columns and
// recent rows (a snapshot's) are under the new header, even when the
// goroutine that waits to apply it has not run yet: who takes the lock
// first runs the work queued before it. Before, the reads took the lock
// alone and showed the old header until that goroutine ran.
func TestCSVReadsAfterSetGPUSeeIt(t *testing.T) {
	want := strings.TrimSuffix(string(Header(1)), "\n")
	for _, tc := range []struct {
		name   string
		header func(c *CSV) string
	}{
		{"Recent", func(c *CSV) string { return c.Recent(0).Header }},
		{"Rows", func(c *CSV) string { h, _ := c.Rows(0); return h }},
		{"Columns", func(c *CSV) string { return strings.Join(c.Columns(0), ",") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := CSVConfig{Tick: make(chan time.Time)}
			release := holdWaiter(&cfg)
			c, _, stall, wrote, unstick := stuckRow(t, t.TempDir(), cfg)
			t.Cleanup(release) // before unstick's and Close's
			returnsSoon(t, func() {
				c.SetGPU(GPUColumns{Index: 0, Fans: 1, Board: Board{UUID: "GPU-5e1f0c2a-0000-4000-8000-000000000001"}})
			}, "SetGPU")
			stall.Store(false)
			unstick()
			if err := <-wrote; err != nil {
				t.Fatalf("the stuck write, once the disk answers: %v", err)
			}
			if got := tc.header(c); got != want {
				t.Errorf("%d columns after SetGPU returned and the write it waited on ended, want the 1-fan header's %d",
					strings.Count(got, ",")+1, strings.Count(want, ",")+1)
			}
		})
	}
}
