package sink

import (
	"bytes"
	"errors"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/internal/counters"
)

// blockingWriter blocks every Write until release is closed.
type blockingWriter struct {
	entered chan struct{}
	release chan struct{}
	once    sync.Once
	buf     bytes.Buffer
}

func (w *blockingWriter) Write(b []byte) (int, error) {
	w.once.Do(func() { close(w.entered) })
	<-w.release
	return w.buf.Write(b)
}

func (w *blockingWriter) Close() error { return nil }

// lineStats is what a test checks of a line log: its counters (in its
// registry), the lines it keeps and those it refused.
type lineStats struct{ Delayed, Pending, Overflowed, LostAtClose uint64 }

// statsOf reads l's lineStats; it takes l.mu (for what only Line and Close
// change).
func statsOf(l *LineLog) lineStats {
	l.mu.Lock()
	defer l.mu.Unlock()
	return lineStats{Delayed: l.counts.Load(linesDelayed), Pending: uint64(l.Waiting()),
		Overflowed: l.overflowN, LostAtClose: l.counts.Load(linesLostAtExit)}
}

// TestLineLogCountsDoNotWaitForTheDisk: a status request reads the counters
// and the lines waiting while a line is stuck in write(2) on a stalled disk.
func TestLineLogCountsDoNotWaitForTheDisk(t *testing.T) {
	reg := counters.New()
	l := NewLineLog(t.TempDir(), "events.log", 1, 1, 0, nil, reg)
	w := &blockingWriter{entered: make(chan struct{}), release: make(chan struct{})}
	l.w = w
	done := make(chan error)
	go func() { done <- l.Line("stuck") }()
	<-w.entered
	got := make(chan [2]uint64)
	go func() {
		var delayed uint64
		for _, c := range reg.Read() {
			if c.Name == linesDelayed.Name {
				delayed = c.Value
			}
		}
		got <- [2]uint64{uint64(l.Waiting()), delayed}
	}()
	select {
	case st := <-got:
		if st != [2]uint64{0, 0} {
			t.Errorf("waiting and delayed while a line is being written: %v", st)
		}
		close(w.release)
	case <-time.After(time.Minute):
		// Not a timing assertion: a minute means the read waits for the writer.
		t.Error("reading the counts waited for a write stuck on the disk")
		close(w.release)
		<-got
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil && !errors.Is(err, os.ErrClosed) {
		t.Fatal(err)
	}
}
