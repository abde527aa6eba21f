package sink

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"
)

// housekeeping deletes days older than the retention and queues finished,
// uncompressed days (from this run or earlier ones) for compression. Days are
// judged by the date in the name, not by mtime, which a copy or touch changes.
func (c *CSV) housekeeping(now time.Time) {
	entries, err := os.ReadDir(c.cfg.Dir)
	if err != nil {
		c.log.Warn("cannot list log dir for retention", "dir", c.cfg.Dir, "error", err)
		return
	}
	y, m, d := now.Date()
	today := time.Date(y, m, d, 0, 0, 0, 0, now.Location())
	cutoff := today.AddDate(0, 0, -c.cfg.RetentionDays)
	var toCompress []string
	for _, e := range entries {
		f, ok := ParseFileName(e.Name(), now.Location())
		if !ok || !e.Type().IsRegular() {
			continue
		}
		path := filepath.Join(c.cfg.Dir, e.Name())
		switch {
		case f.Day.Before(cutoff):
			if err := os.Remove(path); err != nil {
				c.log.Warn("cannot delete expired CSV", "path", path, "error", err)
			} else {
				c.log.Info("deleted expired CSV", "path", path, "retention_days", c.cfg.RetentionDays)
			}
		case !f.GZ && f.Day.Before(today) && c.gz != nil:
			toCompress = append(toCompress, path)
		}
	}
	sort.Strings(toCompress)
	for _, p := range toCompress {
		if !c.isOpen(p) {
			c.gz.add(p)
		}
	}
}

func (c *CSV) isOpen(path string) bool {
	for _, gf := range c.files {
		c.lock(gf)
		open := gf.f != nil && gf.path == path
		gf.mu.Unlock()
		if open {
			return true
		}
	}
	return false
}

// compressor gzips finished days one at a time on its own goroutine, so the
// poll loop never waits for it (a day at 100 ms is ~100 MB per GPU).
type compressor struct {
	log     *slog.Logger
	ops     FileOps // the writes of the .gz (Atomic); tests stall them
	mu      sync.Mutex
	queued  map[string]bool
	held    map[string]int  // files open for writing (hold): never compressed
	kept    map[string]bool // days kept beside a .gz not adopted (errGzKept): said once, not tried again this run
	running string          // the file being compressed now
	work    chan string
	stop    chan struct{}
	done    chan struct{}
}

func newCompressor(log *slog.Logger, ops FileOps) *compressor {
	z := &compressor{log: log, ops: ops, queued: map[string]bool{}, held: map[string]int{}, kept: map[string]bool{}, work: make(chan string, 1024),
		stop: make(chan struct{}), done: make(chan struct{})}
	go z.run()
	return z
}

// hold marks path as open for writing, so that it is not compressed (and
// removed) under the writer; false when it is being compressed right now:
// the writer must use another file. Every successful hold is ended by a
// release.
func (z *compressor) hold(path string) bool {
	z.mu.Lock()
	defer z.mu.Unlock()
	if z.running == path {
		return false
	}
	z.held[path]++
	return true
}

// release ends a hold of path.
func (z *compressor) release(path string) {
	z.mu.Lock()
	defer z.mu.Unlock()
	if z.held[path] <= 1 {
		delete(z.held, path)
		return
	}
	z.held[path]--
}

func (z *compressor) add(path string) {
	z.mu.Lock()
	defer z.mu.Unlock()
	if z.queued[path] || z.kept[path] {
		return
	}
	select {
	case z.work <- path:
		z.queued[path] = true
	default: // queue full: the next housekeeping pass picks it up
	}
}

func (z *compressor) run() {
	defer close(z.done)
	for {
		select {
		case <-z.stop:
			return
		case p := <-z.work:
			select {
			case <-z.stop: // both were ready: halt wins, no new file is started on a disk that may have stalled
				return
			default:
			}
			z.mu.Lock()
			if z.held[p] > 0 {
				// Open for writing again (the clock stepped back to its
				// day): it is queued again when it is finished.
				delete(z.queued, p)
				z.mu.Unlock()
				continue
			}
			z.running = p
			z.mu.Unlock()
			err := gzipFile(p, z.stop, z.ops)
			switch {
			case errors.Is(err, errStopped):
				z.log.Info("compression of a finished CSV halted at stop; it stays uncompressed until the next start", "path", p)
			case errors.Is(err, errGzKept):
				z.log.Warn("a finished CSV has a .csv.gz that is not it compressed, or that could not be checked; both are kept, and readers read the .csv (not tried again until the next start)",
					"path", p, "error", err)
			case err != nil:
				z.log.Warn("compressing finished CSV failed; it stays uncompressed", "path", p, "error", err)
			default:
				z.log.Info("compressed finished CSV", "path", p+".gz")
			}
			z.mu.Lock()
			if errors.Is(err, errGzKept) {
				z.kept[p] = true
			}
			delete(z.queued, p)
			z.running = ""
			z.mu.Unlock()
		}
	}
}

// halt abandons queued work and asks the file in progress to stop (it
// stops between members); halted waits for that.
func (z *compressor) halt() { close(z.stop) }

// halted waits until deadline at most for the compression in progress to
// stop, and reports whether it did. One still running then is stuck on the
// disk (a write, the fsync of its .gz or of the directory) and is abandoned:
// its .csv stays until it ends, and the next start removes its temp file
// (NewCSV) and compresses the day again, or adopts its .gz when it
// was linked already (adoptGz).
func (z *compressor) halted(deadline time.Time) bool {
	select {
	case <-z.done:
		return true
	default:
	}
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case <-z.done:
		return true
	case <-t.C:
		return false
	}
}

// wait blocks until the queue is empty (tests).
func (z *compressor) wait(d time.Duration) bool {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		z.mu.Lock()
		n := len(z.queued)
		z.mu.Unlock()
		if n == 0 {
			return true
		}
		time.Sleep(5 * time.Millisecond)
	}
	return false
}

// CompressFile gzips the finished CSV at path as the logger does (path.gz,
// in members, then path removed): for tools and benchmarks that need the
// logger's own archive.
func CompressFile(path string) error { return gzipFile(path, nil, FileOps{}) }

// gzipFile writes path.gz through ops, in members a reader can seek to (gzindex.go),
// atomically (see Atomic.CreateFrom: an existing
// .gz is never replaced) and then removes path. It gives up, leaving path
// alone, when stop is closed. When the directory cannot be fsynced, path is
// kept too: the new .gz might not survive a power loss. When path.gz
// exists already, it is adopted instead (adoptGz).
func gzipFile(path string, stop <-chan struct{}, ops FileOps) error {
	in, err := OpenOwnRegular(path) // a link's target is not ours to archive; a FIFO is never waited on
	if err != nil {
		return err
	}
	defer in.Close()
	if fi, err := os.Lstat(path + ".gz"); err == nil && fi.Mode().IsRegular() && fi.Size() == 0 {
		// The reserveAndRename fallback's placeholder, left by a crash
		// before its rename: nothing to adopt, so the day is compressed.
		if err := os.Remove(path + ".gz"); err != nil {
			return fmt.Errorf("%w: %w", errGzKept, err)
		}
	} else if err == nil {
		err := adoptGz(in, path, stop, ops)
		if err != nil && !errors.Is(err, errStopped) {
			return fmt.Errorf("%w: %w", errGzKept, err)
		}
		return err
	}
	err = Atomic{Perm: 0o644, Ops: ops}.CreateFrom(path+".gz", func(w io.Writer) error {
		return gzWriteMembers(w, in, stop)
	})
	if err != nil {
		return err
	}
	return os.Remove(path)
}

// errGzKept: a finished day's .csv.gz exists and could not be adopted (it
// is not the .csv compressed, not whole gzip, not a regular file, or a read
// or fsync failed): both are kept, and readers read the .csv (ListDays).
var errGzKept = errors.New("its .csv.gz exists and was not adopted: both are kept")

// errStopped: the compressor was halted (Close) in the middle of a file.
var errStopped = errors.New("stopped")

// adoptGz finishes a compression whose .gz was linked but whose .csv (in,
// at path) stayed: the directory fsync after the link failed, or Close
// abandoned the compression there. The .gz need not be whole (the
// reserveAndRename fallback links an empty placeholder first, and older
// versions linked before the last write), so it is adopted only when it
// decompresses to exactly the .csv's bytes, read side by side a buffer at
// a time (stop checked before each; the decompressed stream is cut one
// byte past the .csv's length, so a gzip bomb stops there): then it is
// fsynced, with the directory, and the .csv removed. Before, the next
// start tried to compress the day again, which failed (an existing .gz is
// never replaced) and warned at every start, and the .csv stayed until
// retention deleted both.
func adoptGz(in *os.File, path string, stop <-chan struct{}, ops FileOps) error {
	gz, err := OpenOwnRegular(path + ".gz") // a planted link is not followed
	if err != nil {
		return err
	}
	defer gz.Close()
	fi, err := in.Stat()
	if err != nil {
		return err
	}
	zr, err := gzip.NewReader(gz)
	if err != nil {
		return err
	}
	z := io.LimitReader(zr, fi.Size()+1)
	a, b := make([]byte, 256<<10), make([]byte, 256<<10)
	for done := false; !done; {
		select {
		case <-stop:
			return errStopped
		default:
		}
		n, zerr := fill(z, a)
		m, perr := fill(in, b)
		for _, err := range []error{zerr, perr} {
			if err != nil && err != io.EOF {
				return err
			}
		}
		if n != m || !bytes.Equal(a[:n], b[:m]) {
			return errors.New("the bytes differ")
		}
		done = zerr == io.EOF && perr == io.EOF
	}
	if err := gz.Sync(); err != nil {
		return fmt.Errorf("fsync %s: %w", gz.Name(), err)
	}
	if err := ops.syncDir(filepath.Dir(path)); err != nil {
		return err
	}
	return os.Remove(path)
}

// fill reads r into p until p is full or r fails; unlike io.ReadFull it
// passes r's error on as it is (io.EOF at its end), so a gzip stream cut
// short (io.ErrUnexpectedEOF) is told from one that ended.
func fill(r io.Reader, p []byte) (int, error) {
	n := 0
	for n < len(p) {
		k, err := r.Read(p[n:])
		n += k
		if err != nil {
			return n, err
		}
	}
	return n, nil
}
