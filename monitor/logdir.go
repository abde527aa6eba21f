package monitor

import (
	"path/filepath"
	"sync"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/sink"
	"github.com/gpu-telemetry/gpu-telemetry/snapshot"
)

// The line logs of the log dir, and its single-instance lock (flock, with
// the PID of the logger writing there).
const (
	EventsLog  = "events.log"
	SummaryLog = "summary.log"
	LockFile   = "gpu-telemetry.lock"
)

// CheckLogDir checks, before anything is written, that only root and the
// daemon's user can write the log dir (sink.CheckDir), and that no name
// written through code that follows links is one: the line logs (lumberjack),
// the lock file (flock) and the snapshot directories. Once is enough: no one
// else can plant a link later. The CSVs are opened without following links
// and whole files are written by rename, which replaces a link.
func CheckLogDir(dir string) error {
	if err := sink.CheckDir(dir); err != nil {
		return err
	}
	for _, name := range []string{EventsLog, SummaryLog, LockFile, snapshot.CrashDir, snapshot.SpikeDir} {
		isDir := name == snapshot.CrashDir || name == snapshot.SpikeDir
		if err := sink.CheckNotLink(filepath.Join(dir, name), isDir); err != nil {
			return err
		}
	}
	return nil
}

// cleanStopBound bounds the wait for the clean-stop marker's write and
// fsyncs: on a disk that stopped answering the exit goes on (nvmlShutdown
// and the final lines follow, and systemd kills the daemon TimeoutStopSec
// after asking it to stop: deploy/gpu-telemetry.service sums the stop's
// bounds). 3 s, not less: during a host's shutdown the writeback of
// everything else can hold the file's and the directory's fsyncs for
// more than a second, and a marker abandoned then makes the next boot
// report a clean stop as unclean (a boot log, UNCLEAN_STOP).
const cleanStopBound = 3 * time.Second

// markCleanStop writes the clean-stop marker, waiting cleanStopBound at
// most: a write still running then is left to finish (or not: the next
// start then reports an unclean stop) and logged.
func (m *Monitor) markCleanStop() {
	var marked sync.WaitGroup
	var err error
	marked.Go(func() { err = m.cfg.markCleanStop(m.cfg.LogDir, time.Now()) })
	switch {
	case !waitBounded(&marked, cleanStopBound):
		m.log.Warn("clean-stop marker still being written at exit (a stalled disk); abandoned so that the exit goes on: unless it completes, the next start will report an unclean stop",
			"waited", cleanStopBound)
	case err != nil:
		m.log.Warn("cannot write the clean-stop marker; the next start will report an unclean stop", "error", err)
	}
}
