package monitor

import (
	"path/filepath"

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

// CheckLogDir checks, before anything is written, that the log dir is one
// only root and the daemon's user can write (sink.CheckDir), and that none
// of the names the daemon writes through code that follows links is a link:
// events.log and summary.log (lumberjack opens them, and the copies it
// rotates to, by name and follows links), the lock file (flock opens it by
// name) and the snapshot directories.
// Links are refused once, here: in a directory no one else can write, no
// one else can plant one later. The CSVs are opened without following links
// (sink.OpenNoFollow) and the whole files are written by rename, which
// replaces a link rather than writing through it.
func CheckLogDir(dir string) error {
	if err := sink.CheckDir(dir); err != nil {
		return err
	}
	for _, name := range []string{EventsLog, SummaryLog, LockFile} {
		if err := sink.CheckNotLink(filepath.Join(dir, name), false); err != nil {
			return err
		}
	}
	for _, name := range []string{snapshot.CrashDir, snapshot.SpikeDir} {
		if err := sink.CheckNotLink(filepath.Join(dir, name), true); err != nil {
			return err
		}
	}
	return nil
}
