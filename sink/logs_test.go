package sink

import (
	"bytes"
	"errors"
	"os"
	"sync"
	"testing"
	"time"
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

// TestLineLogStatsDoNotWaitForTheDisk: a status request reads the counters
// while a line is stuck in write(2) on a stalled disk.
func TestLineLogStatsDoNotWaitForTheDisk(t *testing.T) {
	l := NewLineLog(t.TempDir(), "events.log", 1, 1, nil)
	w := &blockingWriter{entered: make(chan struct{}), release: make(chan struct{})}
	l.w = w
	done := make(chan error)
	go func() { done <- l.Line("stuck") }()
	<-w.entered
	got := make(chan LineLogStats)
	go func() { got <- l.Stats() }()
	select {
	case st := <-got:
		if st.Pending != 0 || st.Delayed != 0 {
			t.Errorf("stats while a line is being written: %+v", st)
		}
		close(w.release)
	case <-time.After(time.Minute):
		// Not a timing assertion: a minute means Stats waits for the writer.
		t.Error("Stats waited for a write stuck on the disk")
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
