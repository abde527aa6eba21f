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
