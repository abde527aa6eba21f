package monitor

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

// TestShutdownLinesOnAStuckDiskAreBounded: the lines the stop writes itself,
// events.log's last burst-limit line (XID_LINES_SUPPRESSED for a storm's
// held Xids) and summary.log's final line, are written by each log's Close
// within its bound: a write of one that is stuck in the kernel (a disk that
// stopped answering; here a FIFO nobody reads, whose open for writing never
// returns) does not hold up the exit; each such line is counted in
// log_lines_lost_at_exit, and the loss logged. Before, they were written
// like any other line, and Run waited on the stuck write for as long as the
// disk did not answer: systemd's TimeoutStopSec was the only bound.
// It runs the daemon's line logs (sink.LineLog) on real time: a goroutine
// in a blocking system call is not durably blocked in a synctest bubble.
func TestShutdownLinesOnAStuckDiskAreBounded(t *testing.T) {
	var readers []*os.File
	t.Cleanup(func() { // last: the stuck writes have their reader until the end
		for _, f := range readers {
			f.Close()
		}
	})
	r := newRig(t, 1, func(c *Config) { c.openLog = nil }) // the daemon's line logs
	t.Cleanup(func() {
		// Once the FIFOs have their reader, before the temp dir goes: the
		// stuck opens return and their writers go. events.log's open was
		// lumberjack's, in the write of its line, which then goes through
		// (a regular file's line would be cut back out); summary.log's was
		// the cut back of a partial line before its first write, and no
		// write is begun after Close gave up (sink's
		// TestLineLogNoWriteBeginsAfterCloseGaveUp), so its FIFO may get
		// no line. The abandoned closes count nothing again.
		for _, f := range readers {
			if !writerGone(t, f, 30*time.Second) {
				t.Errorf("%s: the stuck open has not returned 30s after the FIFO got a reader", f.Name())
			}
		}
		if got := r.counted("log_lines_lost_at_exit"); got != 2 {
			t.Errorf("log_lines_lost_at_exit = %d once the stuck writes returned, want still 2", got)
		}
	})
	// hang makes the log at name a FIFO without a reader: the next write of
	// it is stuck in open(2). At the end a reader lets it go.
	hang := func(name string) {
		p := filepath.Join(r.dir, name)
		if err := os.Remove(p); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		if err := syscall.Mkfifo(p, 0o600); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NONBLOCK, 0); err == nil {
				readers = append(readers, f)
			}
		})
	}
	hang(SummaryLog)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.m.Run(ctx, r.sigs) }()
	time.Sleep(500 * time.Millisecond)
	const storm = 40 // 10 lines written (the burst limit), 30 held for the stop's line
	for range storm {
		r.m.onEvent(reading.Event{Time: time.Now(), GPU: 0, Kind: reading.EventXid, Source: reading.SourceNVML, Data: 13})
	}
	if n := strings.Count(r.eventsLog(), "type=Xid xid=13 "); n != 10 {
		t.Fatalf("%d Xid 13 lines in events.log before the stop, want 10 (the burst limit)", n)
	}
	hang(EventsLog) // logrotate's rename is followed at the next line: the FIFO
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run: %v", err)
		}
	case <-time.After(60 * time.Second): // far above the logs' two 1 s bounds
		t.Fatal("Run has not returned 60s after the stop: it waits on a log line's write stuck in the kernel")
	}
	if got := r.counted("log_lines_lost_at_exit"); got != 2 {
		t.Errorf("log_lines_lost_at_exit = %d, want 2 (events.log's XID_LINES_SUPPRESSED, summary.log's final line)", got)
	}
	logs := r.logs.String()
	for _, name := range []string{EventsLog, SummaryLog} {
		logged := slices.ContainsFunc(strings.Split(logs, "\n"), func(l string) bool {
			return strings.Contains(l, "lines are lost") && strings.Contains(l, "path="+filepath.Join(r.dir, name)+" ") &&
				strings.Contains(l, " lines=1 ")
		})
		if !logged {
			t.Errorf("the lost line of %s is not logged:\n%s", name, logs)
		}
	}
}

// writerGone reads f, a FIFO opened without blocking before any writer,
// until a writer has come and gone (POLLHUP, which Linux reports only once
// a writer has opened the FIFO since f was), within limit (a failure
// guard, not a timing assertion).
func writerGone(t *testing.T, f *os.File, limit time.Duration) bool {
	raw, err := f.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4096)
	for end := time.Now().Add(limit); time.Now().Before(end); {
		var hup bool
		raw.Control(func(fd uintptr) {
			p := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
			if n, _ := unix.Poll(p, 100); n <= 0 {
				return
			}
			if p[0].Revents&unix.POLLIN != 0 {
				unix.Read(int(fd), buf) // drained; the writer may still be there: poll again
				return
			}
			hup = p[0].Revents&unix.POLLHUP != 0
		})
		if hup {
			return true
		}
	}
	return false
}
