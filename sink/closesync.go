package sink

import (
	"sync"
	"time"
)

// closeSyncBound bounds how long a Close waits for its last fsyncs (the
// CSV's files, the parts it let go of and their directory, with its
// background goroutine and the compression in progress, all from Close's
// start; a line log's last lines): a disk that never answers
// must not hold up the daemon's exit behind them (the summary, nvmlShutdown
// and the clean-stop marker follow, and systemd kills the daemon
// TimeoutStopSec after asking it to stop: deploy/gpu-telemetry.service sums
// the stop's bounds). A sync still
// running then is abandoned: counted with the failed ones (sync_errors,
// log_sync_errors) and logged, as its file's last lines may not survive a
// power loss.
const closeSyncBound = time.Second

// closeSyncs counts the fsyncs running on goroutines of their own, so that
// Close waits for them within a bound and counts those it gives up on. A
// sync's outcome is counted once: by the sync when it ends first (end), by
// Close when it gives up first (wait).
type closeSyncs struct {
	mu      sync.Mutex
	running int
	idle    chan struct{} // closed when running falls to 0; made by wait
	gaveUp  bool
}

// begin notes a sync about to start on a goroutine of its own.
func (g *closeSyncs) begin() {
	g.mu.Lock()
	g.running++
	g.mu.Unlock()
}

// end notes a sync's end: unless Close gave up on it, it calls report (to
// count its outcome, before wait returns) and returns true; false means
// the sync was counted as abandoned and its caller must do nothing more.
func (g *closeSyncs) end(report func()) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.gaveUp {
		return false
	}
	report()
	if g.running--; g.running == 0 && g.idle != nil {
		close(g.idle)
		g.idle = nil
	}
	return true
}

// wait waits until no sync runs, for d at most, and returns how many it
// gave up on; those are the caller's to count, and later ones are not
// waited for.
func (g *closeSyncs) wait(d time.Duration) int {
	g.mu.Lock()
	if g.running == 0 {
		g.mu.Unlock()
		return 0
	}
	idle := make(chan struct{})
	g.idle = idle
	g.mu.Unlock()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-idle:
		return 0
	case <-t.C:
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.gaveUp = true
	return g.running
}
