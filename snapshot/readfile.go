package snapshot

import (
	"errors"
	"io/fs"
	"os"

	"github.com/gpu-telemetry/gpu-telemetry/sink"
)

// maxFileRead bounds a /proc or /sys file read into a snapshot.
const maxFileRead = 64 << 10

// readSmall reads at most maxFileRead bytes from the start of path.
func readSmall(path string) ([]byte, error) {
	return sink.ReadBounded(os.Open, path, maxFileRead, false)
}

// readTail reads at most max bytes from the end of path, a regular file
// (events.log, a pstore record): anything else is refused
// (sink.ErrNotRegular), never waited on (a FIFO).
func readTail(path string, max int64) ([]byte, error) {
	return sink.ReadBounded(sink.OpenRegular, path, max, true)
}

// fileErr says why a file could not be read, short.
func fileErr(err error) string {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "missing"
	case errors.Is(err, fs.ErrPermission):
		return "no permission"
	}
	return err.Error()
}
