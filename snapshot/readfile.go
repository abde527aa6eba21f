package snapshot

import (
	"errors"
	"io"
	"io/fs"
	"os"
)

// maxFileRead bounds a /proc or /sys file read into a snapshot.
const maxFileRead = 64 << 10

// readSmall reads at most maxFileRead bytes from the start of path.
func readSmall(path string) ([]byte, error) {
	return readBounded(path, maxFileRead, false)
}

// readTail reads at most max bytes from the end of path.
func readTail(path string, max int64) ([]byte, error) {
	return readBounded(path, max, true)
}

// readBounded reads at most max bytes of path: its start, or its end when
// tail is set. The size is not trusted to stop the read (/proc and /sys
// files say 0 or 4096): the reader's limit does.
func readBounded(path string, max int64, tail bool) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if tail {
		fi, err := f.Stat()
		if err != nil {
			return nil, err
		}
		if fi.Size() > max {
			if _, err := f.Seek(fi.Size()-max, io.SeekStart); err != nil {
				return nil, err
			}
		}
	}
	return io.ReadAll(io.LimitReader(f, max))
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
