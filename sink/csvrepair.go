package sink

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
)

// cutBack truncates the file to its last whole line after a failed write,
// or a row's write that Close gave up on.
func (c *CSV) cutBack(gf *gpuFile) {
	if gf.f == nil {
		return
	}
	if err := gf.f.Truncate(gf.size); err != nil {
		// Leave the file to be reopened (and repaired) on the next row:
		// a torn line is cut then; a whole row refused at Close (no row
		// follows) stays in the file, counted in rows_dropped.
		if c.cutErrLogged.CompareAndSwap(false, true) {
			c.log.Error("cannot cut a CSV back to its last whole line; closed, to be reopened and repaired at the next row (a row refused at close stays in it, counted in rows_dropped; later failures are not logged)",
				"gpu", gf.index, "path", gf.path, "error", err)
		}
		gf.f.Close()
		gf.f, gf.osf = nil, nil
		c.released(gf.path)
	}
}

// dropRow counts the row Write began (gpuFile.writing) in rows_dropped,
// unless Close gave up on it and counted it first.
func (c *CSV) dropRow(gf *gpuFile) {
	if gf.writing.CompareAndSwap(true, false) {
		c.counts.Inc(rowsDropped)
	}
}

// abandonRows counts in rows_dropped the rows whose Write has not ended
// when Close gives up waiting (a write stuck on a stalled disk), and
// returns how many: the final summary, which follows Close, holds them, and
// nothing is counted after it (such a row's Write, returning at last,
// refuses it and cuts it back out of the file).
func (c *CSV) abandonRows() (n int) {
	for _, i := range c.order {
		if c.files[i].writing.CompareAndSwap(true, false) {
			n++
		}
	}
	c.counts.Add(rowsDropped, uint64(n))
	return n
}

// openAppend opens path for appending, writing header to a new or empty file,
// and reports whether it created the file (its directory entry then needs an
// fsync). An existing file that ends in a partial line (the last run died
// mid-write) is cut back to its last whole line first.
func openAppend(path string, header []byte, log *slog.Logger) (*os.File, int64, bool, error) {
	_, statErr := os.Lstat(path)
	created := os.IsNotExist(statErr)
	// Never through a link (ELOOP): see trust.go.
	f, err := OpenNoFollow(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return nil, 0, false, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, false, err
	}
	size := st.Size()
	if size > 0 {
		whole, err := cutToWholeLine(f, path, size, 0)
		if err != nil {
			f.Close()
			return nil, 0, false, err
		}
		if whole != size {
			log.Warn("CSV ended in a partial line; cut back to the last whole line", "path", path, "removed_bytes", size-whole)
			size = whole
		}
		// Cut in its first lines (the board line whole, the header not):
		// what is left is the start of header, written again whole.
		if size > 0 && size < int64(len(header)) && isStartOf(path, header) {
			if err := f.Truncate(0); err != nil {
				f.Close()
				return nil, 0, false, fmt.Errorf("repair %s: %w", path, err)
			}
			size = 0
		}
	}
	if size == 0 {
		n, err := f.Write(header)
		if err != nil {
			// A file this call created goes again (a full disk would leave an
			// empty file, one without its board line, for readers to choke
			// on); one that was there is left empty, to be written again.
			f.Truncate(0)
			f.Close()
			if created {
				os.Remove(path)
			}
			return nil, 0, false, fmt.Errorf("write header to %s: %w", path, err)
		}
		size = int64(n)
	}
	return f, size, created, nil
}

// isStartOf reports whether the file at path holds the first bytes of
// preamble and nothing else (false when it cannot be read).
func isStartOf(path string, preamble []byte) bool {
	b, err := os.ReadFile(path)
	return err == nil && len(b) <= len(preamble) && bytes.HasPrefix(preamble, b)
}

// cutToWholeLine truncates f, open at path and size bytes long, to its last
// whole line before its last drop bytes (0: none) and returns its new
// length. A CSV at open and a line log after a failed write (or at its
// first write, or a line refused after its close gave up) are repaired
// through it.
func cutToWholeLine(f *os.File, path string, size, drop int64) (int64, error) {
	whole, err := lastWholeLine(path, max(size-drop, 0))
	if err != nil {
		return 0, fmt.Errorf("repair %s: %w", path, err)
	}
	if whole != size {
		if err := f.Truncate(whole); err != nil {
			return 0, fmt.Errorf("repair %s: %w", path, err)
		}
	}
	return whole, nil
}

// cutPathToWholeLine cuts the file at path back to its last whole line
// and returns how many bytes it removed. With line set (a line log's
// refused line) it cuts the file only when it ends in line, back to its
// last whole line before it, and otherwise removes nothing: a count of
// bytes alone would cut another file's real lines. A missing file has
// nothing to cut.
func cutPathToWholeLine(path string, line []byte) (int64, error) {
	f, err := OpenNoFollow(path, os.O_RDWR, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("repair %s: %w", path, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return 0, fmt.Errorf("repair %s: %w", path, err)
	}
	drop := int64(len(line))
	if drop > st.Size() {
		return 0, nil
	}
	if drop > 0 {
		tail := make([]byte, drop)
		if _, err := f.ReadAt(tail, st.Size()-drop); err != nil {
			return 0, fmt.Errorf("repair %s: %w", path, err)
		}
		if !bytes.Equal(tail, line) {
			return 0, nil
		}
	}
	whole, err := cutToWholeLine(f, path, st.Size(), drop)
	if err != nil {
		return 0, err
	}
	return st.Size() - whole, nil
}

// lastWholeLine returns the offset just past the last newline of the file.
func lastWholeLine(path string, size int64) (int64, error) {
	r, err := OpenNoFollow(path, os.O_RDONLY, 0)
	if err != nil {
		return 0, err
	}
	defer r.Close()
	const chunk = 64 << 10
	end := size
	buf := make([]byte, chunk)
	for end > 0 {
		start := max(end-chunk, 0)
		n, err := r.ReadAt(buf[:end-start], start)
		if err != nil && !errors.Is(err, io.EOF) {
			return 0, err
		}
		if i := bytes.LastIndexByte(buf[:n], '\n'); i >= 0 {
			return start + int64(i) + 1, nil
		}
		end = start
	}
	return 0, nil
}
