package snapshot

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/gpu-telemetry/gpu-telemetry/sink"
)

const (
	// fileMode: snapshots hold kernel log lines, which many distributions
	// keep from unprivileged users (kernel.dmesg_restrict), so not world-readable.
	fileMode = 0o640
	dirMode  = 0o750
)

// The directories of the log dir that snapshots are written in.
const (
	CrashDir = "crashes" // crash and boot snapshots, follow-ups
	SpikeDir = "spikes"  // fan-spike snapshots
)

// createNew writes data with files to a new file dir/base+ext (base-2+ext
// ... when the name is taken), creating dir (and its parents) first,
// durably: never replacing a file, never following a link planted there (a
// link at dir is refused: sink.CheckNotLink). A path with an error means
// the file is in place but the directory could not be fsynced. Every
// snapshot file, the boot log and the raw records kept beside them are
// written here.
func createNew(files sink.Atomic, dir, base, ext string, data []byte) (string, error) {
	if err := sink.CheckNotLink(dir, true); err != nil {
		return "", err
	}
	err := os.Mkdir(dir, dirMode)
	if errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(filepath.Dir(dir), dirMode); err != nil {
			return "", fmt.Errorf("create %s: %w", filepath.Dir(dir), err)
		}
		err = os.Mkdir(dir, dirMode)
	}
	switch {
	case errors.Is(err, fs.ErrExist):
	case err != nil:
		return "", fmt.Errorf("create %s: %w", dir, err)
	default:
		if err := sink.SyncDir(filepath.Dir(dir)); err != nil {
			return "", err
		}
	}
	return files.CreateNew(dir, base, ext, data)
}

// SaveCrashFile writes data to a new file crashes/<base><ext> under logDir
// (createNew). It is how raw records (CPER) are kept beside the snapshots.
func SaveCrashFile(logDir, base, ext string, data []byte) (string, error) {
	return createNew(sink.Atomic{Perm: fileMode}, filepath.Join(logDir, CrashDir), base, ext, data)
}
