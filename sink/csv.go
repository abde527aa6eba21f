package sink

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

// CSVConfig configures the per-GPU CSV files.
type CSVConfig struct {
	Dir string
	// RetentionDays: files of days older than this are deleted. Default 14.
	RetentionDays int
	// FsyncEvery bounds how many rows a power loss can take: dirty files are
	// fsync'ed this often. Default 1 s.
	FsyncEvery time.Duration
	// MinFreeMB: below this much free space rows are not written (and
	// counted as dropped) until space returns. Default 500.
	MinFreeMB uint64
	// DiskCheckEvery is how often free space is checked while rows are
	// written. Default 10 s. While rows are paused, space is checked on
	// every FsyncEvery tick, so rows resume within a tick of space returning.
	DiskCheckEvery time.Duration
	// RingRows is how many recent rows per GPU are kept in memory for
	// snapshots (the file may be behind or unreadable). Default 50.
	RingRows int
	// Compress gzips finished days in the background.
	Compress bool
	// Now is the clock for retention. Default time.Now.
	Now func() time.Time
	// FreeBytes reports free space for the directory. Default statfs.
	FreeBytes func(dir string) (uint64, error)
	// Tick, when set, paces the periodic round (the sync of dirty files and
	// the disk check): it runs once per value received, and the sender
	// keeps to FsyncEvery. The logger sends from its poll loop, so the
	// round runs while the process is awake for a tick instead of waking it
	// on a timer of its own. Nil: a ticker every FsyncEvery.
	Tick   <-chan time.Time
	Logger *slog.Logger

	// wrap lets tests put a failing writer around the opened file.
	wrap func(*os.File) file
}

// file is what the CSV writer needs of an open file.
type file interface {
	Write([]byte) (int, error)
	Sync() error
	Close() error
	Truncate(int64) error
}

func (c *CSVConfig) defaults() {
	if c.RetentionDays <= 0 {
		c.RetentionDays = 14
	}
	if c.FsyncEvery <= 0 {
		c.FsyncEvery = time.Second
	}
	if c.DiskCheckEvery <= 0 {
		c.DiskCheckEvery = 10 * time.Second
	}
	if c.RingRows <= 0 {
		c.RingRows = 50
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.FreeBytes == nil {
		c.FreeBytes = statfsFree
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
}

func statfsFree(dir string) (uint64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return st.Bavail * uint64(st.Bsize), nil
}

// CSV writes one CSV per GPU per local day: gpu<index>-deep-<YYYY-MM-DD>.csv,
// continued in gpu<index>-deep-<YYYY-MM-DD>_<n>.csv when the GPU's column
// set changes (see PartName): every file is one table under one header.
// Each row goes to the kernel in one write(2) as soon as it is formatted;
// files are fsync'ed every FsyncEvery and on Sync and Close. A write that
// fails half-way is cut back to the last whole line, so a file never holds a
// torn line.
type CSV struct {
	cfg    CSVConfig
	log    *slog.Logger
	files  map[int]*gpuFile
	order  []int
	paused atomic.Uint32 // disk guard: 0 writing, else why rows are paused (pauseLowSpace, pauseENOSPC)
	gz     *compressor

	// inflight is the periodic sync batch on the sync thread and the files
	// it holds, in submission order; only the background goroutine uses it.
	inflight struct {
		seq   uint64
		files []syncedFile
	}
	syncErrLogged  atomic.Bool
	syncSkipLogged atomic.Bool
	// newEntry: a file was created since the directory was last fsynced.
	// The background goroutine syncs it within a tick, off the row path: at
	// midnight every GPU creates a file, and eight directory fsyncs in the
	// poll loop would cost ticks.
	newEntry     atomic.Bool
	dirErrLogged atomic.Bool

	// leaving counts the parts let go of (leave) whose fsync and close
	// still run on goroutines of their own: Close waits for them.
	leaving sync.WaitGroup

	stop      chan struct{}
	done      chan struct{}
	closeMu   sync.Mutex
	closed    bool
	shut      atomic.Bool // set by Close: later rows are dropped
	dropped   atomic.Uint64
	written   atomic.Uint64
	syncErrs  atomic.Uint64
	syncSkips atomic.Uint64
}

type gpuFile struct {
	mu       sync.Mutex
	index    int
	fans     int // fan column pairs; changed by SetFans under mu
	header   []byte
	f        file
	osf      *os.File // f's os.File, for the sync thread
	path     string
	day      time.Time // local midnight starting the file's day (kept while closed)
	last     time.Time // the latest row time in the open file (zero: none)
	next     time.Time // local midnight ending it
	size     int64     // bytes in the file, all whole lines
	dirty    atomic.Bool
	buf      []byte
	ring     []reading.Sample // the last rows, as samples: Rows lays them out under the current header
	ringNext int
	ringLen  int
	failing  bool // last write failed (logged once)
}

// syncedFile names a file handed to the sync thread, for the log.
type syncedFile struct {
	gpu  int
	path string
}

// Why the disk guard paused rows.
const (
	pauseLowSpace = iota + 1 // free space below MinFreeMB
	pauseENOSPC              // a write failed: the disk is full
)

// closeSyncWaits bounds how many milliseconds Close waits for the last
// periodic sync batch's outcome.
const closeSyncWaits = 200

// enospcResumeFree is the free space a disk that ran full must have again
// before rows resume: room for many seconds of rows from 16 GPUs (a row is
// under 1 KiB), so that a disk with a few bytes back does not flap between
// full and writing.
const enospcResumeFree = 64 << 10

var errClosed = errors.New("csv: closed")

// GPUColumns describes one GPU's file: its index and fan count.
type GPUColumns struct {
	Index int
	Fans  int
}

// NewCSV prepares the files for gpus (nothing is opened until the first row),
// removes expired days and queues unfinished compressions from earlier runs.
// It starts the background fsync and disk-guard goroutine.
func NewCSV(cfg CSVConfig, gpus []GPUColumns) (*CSV, error) {
	cfg.defaults()
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("create log dir: %w", err)
	}
	c := &CSV{cfg: cfg, log: cfg.Logger, files: map[int]*gpuFile{}, stop: make(chan struct{}), done: make(chan struct{})}
	for _, g := range gpus {
		fans := min(max(g.Fans, 0), reading.MaxFans)
		gf := &gpuFile{index: g.Index, fans: fans, header: Header(fans), ring: make([]reading.Sample, cfg.RingRows)}
		c.files[g.Index] = gf
		c.order = append(c.order, g.Index)
	}
	if cfg.Compress {
		c.gz = newCompressor(c.log)
	}
	c.checkDisk()
	c.housekeeping(cfg.Now())
	go c.background()
	return c, nil
}

// lateRowSlack is how far before the open file's day, or before the latest
// row in the file, a row may be stamped and still go into that file: a
// sample that was stuck in the driver over midnight (an NVML call can block
// 45 s), or a small step of the clock. Its own day may be finished and
// compressed by then. A row further back (the wall clock stepped back) goes
// to its own day's file, to a new part of it when that file holds later
// rows: every file stays in time order to within this slack, which readers
// that search a file by time (report) rely on.
const lateRowSlack = 2 * time.Minute

// Write formats s and appends it to its GPU's file for the sample's day. It
// also keeps the row in the GPU's in-memory ring. Errors are logged, counted
// and returned; they never stop the caller.
func (c *CSV) Write(s *reading.Sample) error {
	gf := c.files[s.GPU]
	if gf == nil {
		return fmt.Errorf("csv: GPU %d is not configured", s.GPU)
	}
	gf.mu.Lock()
	defer gf.mu.Unlock()
	if c.shut.Load() {
		// A sample that was stuck in the driver until after shutdown.
		c.dropped.Add(1)
		return errClosed
	}
	gf.buf = AppendRow(gf.buf[:0], s, gf.fans)
	gf.remember(s)
	if c.paused.Load() != 0 {
		c.dropped.Add(1)
		return nil
	}
	if err := c.ensureOpen(gf, s.Time); err != nil {
		c.dropped.Add(1)
		if !gf.failing {
			gf.failing = true
			c.log.Error("cannot open CSV; rows are dropped until it works", "gpu", gf.index, "error", err)
		}
		return err
	}
	n, err := gf.f.Write(gf.buf)
	if err != nil || n != len(gf.buf) {
		c.dropped.Add(1)
		c.cutBack(gf)
		if errors.Is(err, syscall.ENOSPC) {
			c.pause(pauseENOSPC, "disk full (ENOSPC)")
		}
		if !gf.failing {
			gf.failing = true
			c.log.Error("CSV write failed; the file was cut back to its last whole line", "gpu", gf.index, "path", gf.path, "error", err)
		}
		if err == nil {
			err = io.ErrShortWrite
		}
		return fmt.Errorf("write csv for gpu %d: %w", gf.index, err)
	}
	if gf.failing {
		gf.failing = false
		c.log.Info("CSV writes work again", "gpu", gf.index, "path", gf.path)
	}
	gf.size += int64(n)
	if s.Time.After(gf.last) {
		gf.last = s.Time
	}
	gf.dirty.Store(true)
	c.written.Add(1)
	return nil
}

// remember copies the sample of a row into the ring.
func (gf *gpuFile) remember(s *reading.Sample) {
	if len(gf.ring) == 0 {
		return
	}
	gf.ring[gf.ringNext] = *s
	gf.ringNext = (gf.ringNext + 1) % len(gf.ring)
	if gf.ringLen < len(gf.ring) {
		gf.ringLen++
	}
}

// Rows returns the GPU's header line and its last rows, oldest first, without
// newlines, all laid out under the current header (a row written before
// the GPU's fans were known has empty fan cells). They come from memory, so
// they are there even when the file is not.
func (c *CSV) Rows(index int) (header string, rows []string) {
	gf := c.files[index]
	if gf == nil {
		return "", nil
	}
	gf.mu.Lock()
	defer gf.mu.Unlock()
	rows = make([]string, 0, gf.ringLen)
	start := (gf.ringNext - gf.ringLen + len(gf.ring)) % max(len(gf.ring), 1)
	var b []byte
	for i := range gf.ringLen {
		b = AppendRow(b[:0], &gf.ring[(start+i)%len(gf.ring)], gf.fans)
		rows = append(rows, string(bytes.TrimSuffix(b, []byte("\n"))))
	}
	return string(bytes.TrimSuffix(gf.header, []byte("\n"))), rows
}

// Columns returns the column names of GPU index's file.
func (c *CSV) Columns(index int) []string {
	gf := c.files[index]
	if gf == nil {
		return nil
	}
	gf.mu.Lock()
	defer gf.mu.Unlock()
	return Columns(gf.fans)
}

// SetFans changes GPU index's column set to fans fan column pairs, from its
// next row on: a GPU that did not answer at start (0 fans known) gets its
// fan columns once its facts arrive. The file under the old header is closed
// and the next row starts a new part of the day under the new header
// (PartName), so every file stays one table. The in-memory ring keeps its
// rows: Rows lays them out under the new header. Nothing happens when fans
// is unchanged.
func (c *CSV) SetFans(index, fans int) {
	gf := c.files[index]
	if gf == nil {
		return
	}
	fans = min(max(fans, 0), reading.MaxFans)
	gf.mu.Lock()
	defer gf.mu.Unlock()
	if fans == gf.fans {
		return
	}
	c.log.Info("CSV column set changes: the next row starts a new part of the day", "gpu", index, "fans_before", gf.fans, "fans", fans)
	gf.fans, gf.header = fans, Header(fans)
	if gf.f != nil {
		c.leave(gf, false)
	}
}

// cutBack truncates the file to its last whole line after a failed write.
func (c *CSV) cutBack(gf *gpuFile) {
	if gf.f == nil {
		return
	}
	if err := gf.f.Truncate(gf.size); err != nil {
		// Leave the file to be reopened (and repaired) on the next row.
		gf.f.Close()
		gf.f, gf.osf = nil, nil
		c.released(gf.path)
	}
}

// ensureOpen opens the file for the row stamped t, rotating at local
// midnight. A row stamped up to lateRowSlack before the open day, or before
// the file's latest row, goes into it; one further back (the wall clock
// stepped back) opens its own day's file, a new part of it when that file
// holds later rows, and the day it leaves is not compressed (its rows
// continue once the clock is back).
func (c *CSV) ensureOpen(gf *gpuFile, t time.Time) error {
	row := t
	if !gf.day.IsZero() && t.Before(gf.day) && gf.day.Sub(t) <= lateRowSlack {
		// A late row: the current day, never a finished one that may be
		// compressed by now.
		t = gf.day
	}
	stepBack := gf.f != nil && gf.last.Sub(row) > lateRowSlack
	if gf.f != nil && !t.Before(gf.day) && t.Before(gf.next) && !stepBack {
		return nil
	}
	back := stepBack || (!gf.day.IsZero() && t.Before(gf.day))
	if gf.f != nil {
		c.leave(gf, !back)
	}
	y, m, d := t.Date()
	day := time.Date(y, m, d, 0, 0, 0, 0, t.Location())
	if back {
		c.log.Warn("CSV row stamped before the rows already written (the wall clock stepped back); writing it to its own day's file, in time order",
			"gpu", gf.index, "row_time", row, "open_day", gf.day.Format(dayLayout))
	}
	path, last, err := c.pickPart(gf, day, row)
	if err != nil {
		return err
	}
	f, size, created, err := openAppend(path, gf.header, c.log)
	if err != nil {
		c.released(path)
		return err
	}
	if created {
		c.newEntry.Store(true)
	}
	gf.f, gf.osf, gf.path, gf.size, gf.last = f, f, path, size, last
	if c.cfg.wrap != nil {
		gf.f = c.cfg.wrap(f)
	}
	gf.day, gf.next = day, time.Date(y, m, d+1, 0, 0, 0, 0, t.Location())
	return nil
}

// pickPart returns the path of the part of day that GPU gf's row stamped
// row goes to, held from the compressor (see compressor.hold), and the time
// of the latest row in it: the day's last part when it is a plain file under
// gf's header without rows later than row (or does not exist yet), else a
// new part after it, whose start is logged with the reason: a restart or a
// SetFans with another column set, a day already compressed, or later rows
// (the clock stepped back).
func (c *CSV) pickPart(gf *gpuFile, day, row time.Time) (string, time.Time, error) {
	last := 1
	for exists(filepath.Join(c.cfg.Dir, PartName(gf.index, day, last+1))) ||
		exists(filepath.Join(c.cfg.Dir, PartName(gf.index, day, last+1)+".gz")) {
		last++
	}
	for part := last; part < last+100; part++ {
		path := filepath.Join(c.cfg.Dir, PartName(gf.index, day, part))
		why := ""
		var last time.Time
		switch {
		case c.gz != nil && !c.gz.hold(path):
			why = "the day's file is being compressed"
		case exists(path):
			first, err := firstLine(path)
			if err == nil {
				last, err = lastRowTime(path)
			}
			if err != nil {
				c.released(path)
				return "", time.Time{}, err
			}
			switch {
			case first != "" && first != string(gf.header):
				why = "the day's file has other columns"
			case last.Sub(row) > lateRowSlack:
				why = "the day's file has later rows (the clock stepped back)"
			}
		case exists(path + ".gz"):
			why = "the day's file is compressed already"
		}
		if why == "" {
			return path, last, nil
		}
		c.released(path)
		c.log.Info("CSV continues in a new part of the day", "gpu", gf.index, "reason", why,
			"after", filepath.Base(path), "part", part+1)
	}
	return "", time.Time{}, fmt.Errorf("csv for gpu %d: no usable part of %s", gf.index, day.Format(dayLayout))
}

// released tells the compressor that path is no longer open for writing.
func (c *CSV) released(path string) {
	if c.gz != nil {
		c.gz.release(path)
	}
}

// exists reports whether path names anything.
func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

// firstLine returns the first line of path with its newline, or "" when
// the file holds no whole line (a new file, or one cut in its header, which
// openAppend rewrites).
func firstLine(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	buf := make([]byte, 4096)
	n, err := io.ReadFull(f, buf)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return "", err
	}
	if i := bytes.IndexByte(buf[:n], '\n'); i >= 0 {
		return string(buf[:i+1]), nil
	}
	if n == len(buf) {
		return string(buf), nil // longer than any header: not ours
	}
	return "", nil
}

// lastRowTime returns the timestamp of the last whole row of path; zero
// when it has none (only a header) or the row's timestamp does not parse.
func lastRowTime(path string) (time.Time, error) {
	f, err := os.Open(path)
	if err != nil {
		return time.Time{}, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return time.Time{}, err
	}
	const tail = 16 << 10 // many rows: a row is under 1 KiB
	off := max(st.Size()-tail, 0)
	buf := make([]byte, st.Size()-off)
	if _, err := f.ReadAt(buf, off); err != nil && !errors.Is(err, io.EOF) {
		return time.Time{}, err
	}
	end := bytes.LastIndexByte(buf, '\n') // a partial last line is cut off at open
	if end < 0 {
		return time.Time{}, nil
	}
	line := buf[bytes.LastIndexByte(buf[:end], '\n')+1 : end]
	ts, _, _ := bytes.Cut(line, []byte(","))
	t, err := time.Parse(TimestampLayout, string(ts))
	if err != nil {
		return time.Time{}, nil // the header, or not a row of ours
	}
	return t, nil
}

// leave hands the current file to a goroutine that syncs and closes it;
// with finished set (rotation at midnight) it then queues it for
// compression. Called with gf.mu held: a day's file can be 100 MB, and its
// fsync must not hold up the GPU's next row. A file left for another
// reason (a new column set, the clock stepped back) is not compressed: its
// day is not over.
func (c *CSV) leave(gf *gpuFile, finished bool) {
	f, path := gf.f, gf.path
	gf.f, gf.osf = nil, nil
	gf.dirty.Store(false)
	if finished {
		c.log.Info("CSV day finished", "gpu", gf.index, "path", path)
	}
	c.leaving.Add(1)
	go func() {
		defer c.leaving.Done()
		if err := f.Sync(); err != nil {
			c.syncFailed(gf.index, path, err)
		}
		if err := f.Close(); err != nil {
			c.syncFailed(gf.index, path, err)
		}
		c.released(path)
		if !finished {
			return
		}
		if c.gz != nil {
			c.gz.add(path)
		}
		c.housekeeping(c.cfg.Now())
	}()
}

// openAppend opens path for appending, writing header to a new or empty file,
// and reports whether it created the file (its directory entry then needs an
// fsync). An existing file that ends in a partial line (the last run died
// mid-write) is cut back to its last whole line first.
func openAppend(path string, header []byte, log *slog.Logger) (*os.File, int64, bool, error) {
	_, statErr := os.Stat(path)
	created := os.IsNotExist(statErr)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
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
		whole, err := lastWholeLine(path, size)
		if err != nil {
			f.Close()
			return nil, 0, false, err
		}
		if whole != size {
			if err := f.Truncate(whole); err != nil {
				f.Close()
				return nil, 0, false, fmt.Errorf("repair %s: %w", path, err)
			}
			log.Warn("CSV ended in a partial line; cut back to the last whole line", "path", path, "removed_bytes", size-whole)
			size = whole
		}
	}
	if size == 0 {
		n, err := f.Write(header)
		if err != nil {
			f.Truncate(0)
			f.Close()
			return nil, 0, false, fmt.Errorf("write header to %s: %w", path, err)
		}
		size = int64(n)
	}
	return f, size, created, nil
}

// lastWholeLine returns the offset just past the last newline of the file.
func lastWholeLine(path string, size int64) (int64, error) {
	r, err := os.Open(path)
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

// Sync flushes GPU index's file to disk now (before a snapshot is taken).
func (c *CSV) Sync(index int) error {
	gf := c.files[index]
	if gf == nil {
		return nil
	}
	gf.mu.Lock()
	f, path := gf.f, gf.path
	gf.mu.Unlock()
	if f == nil {
		return nil
	}
	gf.dirty.Store(false)
	if err := f.Sync(); err != nil && !errors.Is(err, os.ErrClosed) {
		c.syncFailed(index, path, err)
		return fmt.Errorf("fsync csv for gpu %d: %w", index, err)
	}
	return nil
}

// syncFailed counts a failed fsync, fdatasync or close of a CSV and logs
// the first one with its file: rows written since the last good sync may not
// survive a power loss.
func (c *CSV) syncFailed(gpu int, path string, err error) {
	c.syncErrs.Add(1)
	if c.syncErrLogged.CompareAndSwap(false, true) {
		c.log.Error("fsync of a CSV failed; its recent rows may not survive a power loss (later failures are only counted: sync_errors)",
			"gpu", gpu, "path", path, "error", err)
	}
}

// syncNewEntries fsyncs the directory once files were created in it, so a
// power loss cannot lose a whole new day's file, only its last second. The
// first failure is logged and all are counted with the sync errors.
func (c *CSV) syncNewEntries() {
	if !c.newEntry.Swap(false) {
		return
	}
	if err := SyncDir(c.cfg.Dir); err != nil {
		c.syncErrs.Add(1)
		if c.dirErrLogged.CompareAndSwap(false, true) {
			c.log.Error("fsync of the log directory failed; new CSV files may not survive a power loss (later failures are only counted: sync_errors)",
				"dir", c.cfg.Dir, "error", err)
		}
	}
}

// collectSync takes the outcome of the batch on the sync thread, if it is
// done, and counts and logs every file whose fdatasync failed.
func (c *CSV) collectSync() {
	in := &c.inflight
	if in.seq == 0 {
		return
	}
	errs := make([]error, len(in.files))
	switch syncResult(in.seq, errs) {
	case syncRunning:
		return
	case syncDone:
		for i, err := range errs {
			if err != nil {
				c.syncFailed(in.files[i].gpu, in.files[i].path, err)
			}
		}
	case syncGone:
		// Another CSV in this process (tests only) submitted after it;
		// its outcome is unknown.
	}
	in.seq, in.files = 0, nil
}

// syncDirty hands every dirty file to the sync thread without waiting. While
// the previous round is still on the disk, this round is skipped (counted,
// the first logged): a slow disk gets fewer syncs rather than a pile of them.
func (c *CSV) syncDirty() {
	c.collectSync()
	var fds []int
	var gfs []*gpuFile
	var files []syncedFile
	for _, i := range c.order {
		gf := c.files[i]
		if !gf.dirty.Load() {
			continue
		}
		// Duplicate under the lock: a rotation or reopen cannot close the
		// file (and let its number be reused) in between.
		gf.mu.Lock()
		if gf.osf != nil {
			if d, err := dupFile(gf.osf); err == nil {
				fds = append(fds, d)
				gfs = append(gfs, gf)
				files = append(files, syncedFile{gf.index, gf.path})
				gf.dirty.Store(false)
			}
		}
		gf.mu.Unlock()
	}
	if len(fds) == 0 {
		return
	}
	seq, ok := syncAsync(fds)
	if !ok {
		c.syncSkips.Add(1)
		for _, gf := range gfs {
			gf.dirty.Store(true)
		}
		if c.syncSkipLogged.CompareAndSwap(false, true) {
			c.log.Warn("periodic fsync skipped: the previous round is still on the disk; these files' rows wait in the page cache for the next round (later skips are only counted: sync_skips)",
				"files", len(files), "first", files[0].path, "every", c.cfg.FsyncEvery)
		}
		return
	}
	c.inflight.seq, c.inflight.files = seq, files
}

// Reopen closes every file so that the next row reopens it by name (SIGHUP:
// an external tool moved the files away).
// Each file is synced and closed outside its GPU's lock (a slow disk does
// not hold up rows); a failure counts in sync_errors, the first logged.
func (c *CSV) Reopen() {
	for _, i := range c.order {
		gf := c.files[i]
		gf.mu.Lock()
		f, path := gf.f, gf.path
		gf.f, gf.osf = nil, nil
		gf.dirty.Store(false)
		gf.mu.Unlock()
		if f == nil {
			continue
		}
		if err := f.Sync(); err != nil {
			c.syncFailed(i, path, err)
		}
		if err := f.Close(); err != nil {
			c.syncFailed(i, path, err)
		}
		c.released(path)
	}
}

// Stats are the sink's counters.
type Stats struct {
	Written, Dropped uint64
	SyncBatches      uint64 // periodic sync rounds completed (process-wide)
	SyncErrors       uint64 // failed fsync/fdatasync (or close) of a CSV; the first is logged with its path
	SyncSkips        uint64 // periodic rounds skipped: the previous one was still on the disk; the first is logged
	Paused           bool
}

// Stats returns the counters.
func (c *CSV) Stats() Stats {
	return Stats{Written: c.written.Load(), Dropped: c.dropped.Load(), SyncBatches: asyncSyncBatches(),
		SyncErrors: c.syncErrs.Load(), SyncSkips: c.syncSkips.Load(), Paused: c.paused.Load() != 0}
}

// Close stops the background work, fsyncs and closes every file, and waits
// for the fsync and close of the parts let go of before (leave). Pending
// compressions are abandoned (they are picked up at the next start).
func (c *CSV) Close() error {
	c.closeMu.Lock()
	if c.closed {
		c.closeMu.Unlock()
		return nil
	}
	c.closed = true
	c.shut.Store(true)
	c.closeMu.Unlock()
	close(c.stop)
	<-c.done
	c.syncNewEntries()
	// The last periodic batch's failures still count: wait a little for its
	// outcome, never long (a hung disk must not hold up shutdown; the fsync
	// below then reports what it can).
	for range closeSyncWaits {
		if c.collectSync(); c.inflight.seq == 0 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	var errs []error
	for _, i := range c.order {
		gf := c.files[i]
		gf.mu.Lock()
		if gf.f != nil {
			if err := gf.f.Sync(); err != nil {
				c.syncFailed(i, gf.path, err)
				errs = append(errs, fmt.Errorf("fsync csv for gpu %d: %w", i, err))
			}
			if err := gf.f.Close(); err != nil {
				errs = append(errs, err)
			}
			gf.f, gf.osf = nil, nil
			c.released(gf.path)
		}
		gf.mu.Unlock()
	}
	// A part let go of just before (a new column set, midnight) is synced
	// on its own goroutine: its rows are on the disk, and its fsync's
	// outcome in sync_errors, before Close returns.
	c.leaving.Wait()
	if c.gz != nil {
		c.gz.close()
	}
	return errors.Join(errs...)
}

// background hands dirty files to the sync thread every FsyncEvery (or at
// each value from cfg.Tick) and checks
// free space every DiskCheckEvery, or on every tick while rows are paused (a
// full disk is probed each tick, so rows resume within a tick of space
// returning). Syncing runs outside the GPU locks and off the Go scheduler, so
// a slow disk never holds up a row.
func (c *CSV) background() {
	defer close(c.done)
	tick := c.cfg.Tick
	if tick == nil {
		t := time.NewTicker(c.cfg.FsyncEvery)
		defer t.Stop()
		tick = t.C
	}
	lastDisk := time.Now()
	for {
		select {
		case <-c.stop:
			return
		case <-tick:
		}
		c.syncDirty()
		c.syncNewEntries()
		if c.paused.Load() != 0 || time.Since(lastDisk) >= c.cfg.DiskCheckEvery {
			lastDisk = time.Now()
			c.checkDisk()
		}
	}
}

// checkDisk pauses or resumes writing by free space. After ENOSPC, rows
// resume once enospcResumeFree bytes are free again (and MinFreeMB, when set).
func (c *CSV) checkDisk() {
	floor := c.cfg.MinFreeMB << 20
	need := floor
	if c.paused.Load() == pauseENOSPC {
		need = max(need, enospcResumeFree)
	}
	if need == 0 {
		c.resume()
		return
	}
	free, err := c.cfg.FreeBytes(c.cfg.Dir)
	if err != nil {
		return // can't tell: let writes fail on their own
	}
	switch {
	case free >= need:
		c.resume()
	case free < floor:
		c.pause(pauseLowSpace, fmt.Sprintf("free space %d MB below %d MB", free>>20, c.cfg.MinFreeMB))
	}
}

func (c *CSV) pause(by uint32, why string) {
	if c.paused.CompareAndSwap(0, by) {
		c.log.Warn("disk guard: not writing rows", "dir", c.cfg.Dir, "reason", why)
	}
}

func (c *CSV) resume() {
	if c.paused.Swap(0) != 0 {
		c.log.Info("disk guard: space is back, writing rows again", "dir", c.cfg.Dir, "dropped_so_far", c.dropped.Load())
	}
}
