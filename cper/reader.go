package cper

import (
	"errors"
	"hash/fnv"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"
)

// ReadFunc reads the GPU uuid's records after handle (0: from the first),
// laid end to end, and the handle to resume from; on an error, what it read
// before it (sampler's Host.ReadCPER). An error with an Unavailable method
// that reports true is the driver refusing the call here (it needs root),
// not a fault.
type ReadFunc func(uuid string, handle uint64) (records []byte, next uint64, err error)

// Reader reads each GPU's new records, bounded by a deadline, and the
// host's boot error record, and keeps their cursors (CursorFile). A read
// the driver does not return from is abandoned (no other starts until it
// returns); its records are read again next time, since the cursor moves
// only as they are saved.
type Reader struct {
	read     ReadFunc
	deadline time.Duration
	mu       sync.Mutex // cursors
	cursors  *Cursors
	busy     atomic.Bool // a read is in the driver
	refused  atomic.Bool // logged that the driver refuses it (needs root)
}

// NewReader returns a Reader that reads through read, bounded by deadline,
// with the cursors' file CursorFile in dir; a file it cannot read is logged
// and the records are read from the first (the ids saved skip repeats).
func NewReader(dir string, read ReadFunc, deadline time.Duration, log *slog.Logger) *Reader {
	cur, err := LoadCursors(filepath.Join(dir, CursorFile))
	if err != nil {
		log.Warn("CPER cursors unreadable; reading the driver's records from the first (those saved before are skipped by id)", "error", err)
	}
	return &Reader{read: read, deadline: deadline, cursors: cur}
}

// Read calls save for each of the GPU uuid's records after its cursor not
// saved before, in order, with the time they were read (rec nil: the rest
// that could not be decoded, saved raw), and marks each saved only once
// save returns: a stop between two records repeats none already saved. It
// returns how many it skipped as saved already, and does nothing while
// uuid is empty (the GPU not identified yet) or a read is in the driver.
func (r *Reader) Read(log *slog.Logger, uuid string, save func(now time.Time, raw []byte, rec *Record)) (repeats int) {
	if uuid == "" || !r.busy.CompareAndSwap(false, true) {
		return 0
	}
	r.mu.Lock()
	cur := r.cursors.Get(uuid)
	r.mu.Unlock()
	type result struct {
		buf  []byte
		next uint64
		err  error
	}
	ch := make(chan result, 1)
	go func() {
		buf, next, err := r.read(uuid, cur.Handle)
		r.busy.Store(false) // before the result: the next GPU's read may start at once
		ch <- result{buf, next, err}
	}()
	var res result
	select {
	case res = <-ch:
	case <-time.After(r.deadline):
		log.Warn("CPER read did not return in time; read again after the next critical event", "waited", r.deadline)
		return 0
	}
	var u interface{ Unavailable() bool }
	if errors.As(res.err, &u) && u.Unavailable() {
		if r.refused.CompareAndSwap(false, true) {
			log.Info("the driver refuses CPER records here (the call needs root)", "error", res.err)
		}
		return 0
	}
	if res.err != nil {
		log.Warn("CPER read failed; records read before it are kept, the next read starts from the first record (the ids saved skip repeats)", "error", res.err)
		// A handle the driver no longer takes (a new boot, a reloaded
		// driver) would fail every read after this one.
		res.next = 0
	}
	now := time.Now()
	recs, err := Split(res.buf)
	whole := 0
	for _, raw := range recs {
		whole += len(raw)
		rec, _ := Parse(raw) // Split parsed it
		if cur.Saw(rec.ID) {
			repeats++ // saved before the driver forgot our handle
			continue
		}
		save(now, raw, &rec)
		cur.Mark(rec.ID)
		r.set(log, uuid, cur)
	}
	if err != nil {
		save(now, res.buf[whole:], nil)
		// Not lost (saved raw, its line says decoded=corrupt): logged, not counted.
		log.Warn("a CPER record could not be decoded; saved raw", "error", err)
	}
	if res.next == cur.Handle && len(res.buf) == 0 {
		return repeats // nothing new
	}
	cur.Handle = res.next
	r.set(log, uuid, cur)
	return repeats
}

// InDriver reports whether a read is inside the driver: one in progress,
// or one abandoned after its deadline that has not returned (then
// nvmlShutdown could block on it, or pull the library from under it).
func (r *Reader) InDriver() bool { return r.busy.Load() }

// set replaces uuid's cursor in the cursors' file.
func (r *Reader) set(log *slog.Logger, uuid string, cur Cursor) {
	r.mu.Lock()
	err := r.cursors.Set(uuid, cur)
	r.mu.Unlock()
	if err != nil {
		log.Warn("cannot save the CPER cursor; a restart reads these records again (skipped by id)", "error", err)
	}
}

// HasBERT reports whether the host under root has a boot error record or
// rasdaemon's database: whether ReadBERT has anything to read.
func HasBERT(root string) bool {
	for _, rel := range []string{DefaultBERTPath, DefaultRasdaemonDB} {
		if _, err := os.Stat(filepath.Join(root, rel)); err == nil {
			return true
		}
	}
	return false
}

// ReadBERT notes rasdaemon's database under root when present, and reads
// the host firmware's boot error record once per boot: one no earlier run
// of the boot bootID recorded (the cursor "bert" remembers a hash of the
// boot id and the record) goes to record (rec nil: it could not be decoded,
// saved raw), then is marked; one recorded before goes to seen if it
// decodes, since status and metrics still show it after a restart.
func (r *Reader) ReadBERT(log *slog.Logger, root, bootID string, record func(raw []byte, rec *Record), seen func(rec *Record)) {
	if fi, err := os.Stat(filepath.Join(root, DefaultRasdaemonDB)); err == nil {
		log.Info("rasdaemon's database is present (host errors it decoded are there)", "path", DefaultRasdaemonDB,
			"bytes", fi.Size(), "has_entries", fi.Size() > 0)
	}
	data, err := os.ReadFile(filepath.Join(root, DefaultBERTPath))
	if err != nil {
		return // no BERT, or not readable: nothing the firmware left
	}
	rec, ok, perr := ParseBERT(data)
	if perr == nil && !ok {
		return
	}
	h := fnv.New64a()
	h.Write([]byte(bootID))
	h.Write(data)
	id := h.Sum64()
	r.mu.Lock()
	defer r.mu.Unlock()
	cur := r.cursors.Get("bert")
	if cur.Saw(id) {
		if perr == nil {
			seen(&rec)
		}
		return
	}
	if perr != nil {
		record(data, nil)
		log.Warn("the host's BERT record could not be decoded; saved raw", "error", perr)
	} else {
		log.Warn("the firmware recorded an error before this boot (ACPI BERT)", "severity", rec.Severity, "sections", rec.SectionTypes())
		record(data, &rec)
	}
	cur.Mark(id)
	if err := r.cursors.Set("bert", cur); err != nil {
		log.Warn("cannot save the CPER cursor; the next start records the BERT record again", "error", err)
	}
}
