package monitor

import (
	"context"
	"errors"
	"hash/fnv"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/cper"
	"github.com/gpu-telemetry/gpu-telemetry/internal/counters"
	"github.com/gpu-telemetry/gpu-telemetry/live"
	"github.com/gpu-telemetry/gpu-telemetry/sampler"
	"github.com/gpu-telemetry/gpu-telemetry/sink"
	"github.com/gpu-telemetry/gpu-telemetry/snapshot"
)

// cperRepeats counts the records a read skipped as saved already.
var cperRepeats = counters.Declare(counters.Def{Name: "cper_records_repeated",
	Help: "CPER records the driver returned again and that were not saved twice: their record id was saved already (a read that restarted from the first record after a failure, or a cursor whose save failed)"})

// cperRefresh is how often every GPU's CPER records are read besides at
// start and after a critical event: a record the driver writes later than
// the reads after its event (or of a fault that raised none) is read within
// a minute.
const cperRefresh = time.Minute

// cperReader reads the driver's CPER records (R610+) at start, since they
// may describe the previous boot's failure, after each critical event and
// again before that incident's first follow-up (the driver may write the
// record just after the event: it then joins the incident), and every
// cperRefresh.
// A read runs on the side goroutine, bounded by the sample deadline: one
// the driver does not return from is abandoned (no other starts until it
// returns) and its records are read again next time, since the cursor
// moves only once they are saved.
type cperReader struct {
	once    sync.Once
	on      atomic.Bool // the driver has the call: critical events may read
	mu      sync.Mutex
	cursors *cper.Cursors
	busy    atomic.Bool // a read is in the driver
	// queued is each GPU's "a read is on the side queue": an Xid flood
	// queues one read, not one per Xid, so it never crowds out snapshots.
	queued  map[int]*atomic.Bool
	refused atomic.Bool // logged that the driver refuses it (needs root)
	// late carries the GPUs whose critical event asks for a later read
	// (runCPER); a send never waits: one already waiting covers it.
	late chan *gpuState
}

// startCPER reads every GPU's records once, at start, and the host's boot
// error record; then, where the driver has the call, runs runCPER in wg
// until ctx is done.
func (m *Monitor) startCPER(ctx context.Context, wg *sync.WaitGroup) {
	c := &m.cper
	c.once.Do(func() {
		c.late = make(chan *gpuState, len(m.gpus))
		cur, err := cper.LoadCursors(filepath.Join(m.cfg.LogDir, cper.CursorFile))
		if err != nil {
			m.log.Warn("CPER cursors unreadable; reading the driver's records from the first (those saved before are skipped by id)", "error", err)
		}
		c.cursors = cur
		c.queued = map[int]*atomic.Bool{}
		for _, gs := range m.gpus {
			c.queued[gs.idx] = &atomic.Bool{}
		}
		if !m.host.HasCPER() {
			m.log.Info("the driver lacks nvmlSystemGetCPER_v1 (R610+): no GPU CPER records are read")
			return
		}
		c.on.Store(true)
	})
	if m.hostFile(cper.DefaultBERTPath) || m.hostFile(cper.DefaultRasdaemonDB) {
		m.side.queue("reading the host's boot error record (BERT)", -1, m.readBERT)
	}
	for _, gs := range m.gpus {
		m.readCPER(gs)
	}
	if c.on.Load() {
		wg.Go(func() { m.runCPER(ctx) })
	}
}

// runCPER queues a read of every GPU's records each cperRefresh, and of a
// GPU's cperLate after its critical event (readCPERLate), until ctx is
// done. It only queues: the reads run on the side goroutine, bounded.
func (m *Monitor) runCPER(ctx context.Context) {
	tick := time.NewTicker(cperRefresh)
	defer tick.Stop()
	late := time.NewTimer(time.Hour)
	late.Stop()
	due := map[*gpuState]time.Time{}
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			for _, gs := range m.gpus {
				m.readCPER(gs)
			}
		case gs := <-m.cper.late:
			if _, ok := due[gs]; !ok {
				due[gs] = time.Now().Add(m.cperLate())
			}
		case <-late.C:
		}
		var next time.Time
		for gs, at := range due {
			switch {
			case !time.Now().Before(at):
				delete(due, gs)
				m.readCPER(gs)
			case next.IsZero() || at.Before(next):
				next = at
			}
		}
		late.Stop()
		if !next.IsZero() {
			late.Reset(time.Until(next))
		}
	}
}

// cperLate is how long after a critical event its GPU's records are read
// again: half the first follow-up's offset, so that a record the driver
// wrote just after the event joins the incident before that follow-up
// lists its events (5 s with the default follow-ups); cperRefresh when
// there are no follow-ups.
func (m *Monitor) cperLate() time.Duration {
	fu := m.cfg.Snapshots.FollowUps
	if fu == nil {
		fu = snapshot.DefaultFollowUps
	}
	first := time.Duration(0)
	for _, d := range fu {
		if d > 0 && (first == 0 || d < first) {
			first = d
		}
	}
	if first == 0 {
		return cperRefresh
	}
	return first / 2
}

// readCPERLate asks runCPER for another read of the GPU's records after
// its critical event (cperLate); it never waits.
func (m *Monitor) readCPERLate(gs *gpuState) {
	if !m.cper.on.Load() {
		return
	}
	select {
	case m.cper.late <- gs:
	default: // a request is waiting already: its read covers this event
	}
}

// readCPER queues a read of the GPU's new CPER records.
func (m *Monitor) readCPER(gs *gpuState) {
	if !m.cper.on.Load() {
		return
	}
	q := m.cper.queued[gs.idx]
	if q == nil || !q.CompareAndSwap(false, true) {
		return // one is queued already: it reads this event's records too
	}
	m.side.enqueue(sideJob{what: "reading the GPU's CPER records", gpu: gs.idx,
		f:       func() { q.Store(false); m.cperRead(gs) },
		dropped: func(string) { q.Store(false) }})
}

// cperRead reads the GPU's new records (bounded), saves each and writes its
// line, then moves the cursor past them.
func (m *Monitor) cperRead(gs *gpuState) {
	c := &m.cper
	uuid := gs.g.Info().UUID
	if uuid == "" || !c.busy.CompareAndSwap(false, true) {
		return // the GPU not identified yet, or a read still in the driver
	}
	c.mu.Lock()
	cur := c.cursors.Get(uuid)
	c.mu.Unlock()
	type result struct {
		buf  []byte
		next uint64
		err  error
	}
	ch := make(chan result, 1)
	go func() {
		buf, next, err := m.host.ReadCPER(uuid, cur.Handle)
		c.busy.Store(false) // before the result: the next GPU's read may start at once
		ch <- result{buf, next, err}
	}()
	var r result
	select {
	case r = <-ch:
	case <-time.After(m.cfg.Deadline):
		gs.log.Warn("CPER read did not return in time; read again after the next critical event", "waited", m.cfg.Deadline)
		return
	}
	var ce *sampler.CPERError
	if errors.As(r.err, &ce) && ce.Unavailable() {
		if c.refused.CompareAndSwap(false, true) {
			gs.log.Info("the driver refuses CPER records here (the call needs root)", "error", r.err)
		}
		return
	}
	if r.err != nil {
		gs.log.Warn("CPER read failed; records read before it are kept, the next read starts from the first record (the ids saved skip repeats)", "error", r.err)
		// A handle the driver no longer takes (a new boot, a reloaded
		// driver) would fail every read after this one.
		r.next = 0
	}
	now := time.Now()
	recs, err := cper.Split(r.buf)
	for _, raw := range recs {
		rec, _ := cper.Parse(raw) // Split parsed it
		if cur.Saw(rec.ID) {
			m.reg.Inc(cperRepeats) // saved before the driver forgot our handle
			continue
		}
		m.cperRecord(gs, uuid, now, raw, &rec)
		cur.Mark(rec.ID)
		// Saved with each record: a stop between two records repeats none
		// already saved.
		m.saveCursor(gs, c, uuid, cur)
	}
	if err != nil {
		m.cperRecord(gs, uuid, now, r.buf[len(r.buf)-restLen(r.buf, recs):], nil)
		// Not lost (saved raw, its line says decoded=corrupt): logged, not counted.
		gs.log.Warn("a CPER record could not be decoded; saved raw", "error", err)
	}
	if r.next == cur.Handle && len(r.buf) == 0 {
		return // nothing new
	}
	cur.Handle = r.next
	m.saveCursor(gs, c, uuid, cur)
}

// saveCursor replaces uuid's cursor in the cursors' file.
func (m *Monitor) saveCursor(gs *gpuState, c *cperReader, uuid string, cur cper.Cursor) {
	c.mu.Lock()
	err := c.cursors.Set(uuid, cur)
	c.mu.Unlock()
	if err != nil {
		gs.log.Warn("cannot save the CPER cursor; a restart reads these records again (skipped by id)", "error", err)
	}
}

// restLen is how many bytes of buf follow the whole records recs.
func restLen(buf []byte, recs [][]byte) int {
	n := len(buf)
	for _, r := range recs {
		n -= len(r)
	}
	return n
}

// cperRecord saves a raw record as crashes/cper-<time>-<source>.bin and
// writes its events.log line; a record read after a critical event joins
// that incident (its follow-ups list it). rec nil: a corrupt buffer, saved
// raw only. gs nil: the host's.
func (m *Monitor) cperRecord(gs *gpuState, source string, now time.Time, raw []byte, rec *cper.Record) {
	name := cper.FileName(now, source)
	path, err := snapshot.SaveCrashFile(m.cfg.LogDir, name, ".bin", raw)
	file := ""
	if path != "" {
		file = filepath.Join(snapshot.CrashDir, filepath.Base(path))
	}
	if err != nil {
		m.log.Warn("cannot save a CPER record", "source", source, "error", err)
	}
	var kv []string // the GPU's line names its UUID; the host's says source=bert
	if rec != nil {
		kv = rec.Fields()
	} else {
		kv = []string{"decoded", "corrupt", "length", strconv.Itoa(len(raw))}
	}
	kv = append(kv, "file", file)
	l := sink.EventLine{Time: now, GPU: -1, Source: "nvml", Type: sink.TypeCPER, Fields: sink.KV(kv...)}
	if gs == nil {
		l.Source = "bert"
		if rec != nil {
			m.publishBERT(now, rec)
		}
		m.eventLine(l)
		return
	}
	l.GPU, l.Bus = gs.idx, gs.g.Info().BusID
	if rec != nil {
		gs.slot.Update(func(g *live.GPU) { g.CPERRecord(lastCPER(now, rec)) })
		what := "CPER record " + strings.Join(rec.Fields()[:4], " ") + " " + rec.SectionTypes() + " (" + file + ")"
		l.Incident, l.Snapshot = m.snaps.Attach(gs.idx, snapshot.Event{Time: now, Reason: what, Stage: snapshot.StageNotice})
	}
	m.eventLine(l)
}

// publishBERT puts the host's boot error record rec, read at now, in the
// host view (status, gpu_telemetry_boot_error_record).
func (m *Monitor) publishBERT(now time.Time, rec *cper.Record) {
	b := lastCPER(now, rec)
	m.states.mu.Lock()
	m.states.bert = &b
	m.states.mu.Unlock()
}

// lastCPER is rec, read at now, for the live view.
func lastCPER(now time.Time, rec *cper.Record) live.LastCPER {
	return live.LastCPER{Time: now, ID: rec.ID, Severity: rec.Severity.String(), Recorded: rec.Time}
}

// hostFile reports whether the host has the file rel (under HostRoot).
func (m *Monitor) hostFile(rel string) bool {
	_, err := os.Stat(filepath.Join(m.cfg.HostRoot, rel))
	return err == nil
}

// readBERT records the host firmware's boot error record once per boot
// (the cursor "bert" remembers a hash of the boot id and the record), and
// notes rasdaemon's database when present.
func (m *Monitor) readBERT() {
	if fi, err := os.Stat(filepath.Join(m.cfg.HostRoot, cper.DefaultRasdaemonDB)); err == nil {
		m.log.Info("rasdaemon's database is present (host errors it decoded are there)", "path", cper.DefaultRasdaemonDB,
			"bytes", fi.Size(), "has_entries", fi.Size() > 0)
	}
	data, err := os.ReadFile(filepath.Join(m.cfg.HostRoot, cper.DefaultBERTPath))
	if err != nil {
		return // no BERT, or not readable: nothing the firmware left
	}
	rec, ok, perr := cper.ParseBERT(data)
	if perr == nil && !ok {
		return
	}
	h := fnv.New64a()
	h.Write([]byte(snapshot.ReadBootID(filepath.Join(m.cfg.HostRoot, snapshot.DefaultBootIDPath))))
	h.Write(data)
	id := h.Sum64()
	c := &m.cper
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cursors == nil {
		return
	}
	cur := c.cursors.Get("bert")
	if cur.Saw(id) {
		// Recorded by an earlier run of this boot: no second line, but
		// status and metrics still show it after a restart.
		if perr == nil {
			m.publishBERT(time.Now(), &rec)
		}
		return
	}
	if perr != nil {
		m.cperRecord(nil, "bert", time.Now(), data, nil)
		m.log.Warn("the host's BERT record could not be decoded; saved raw", "error", perr)
	} else {
		m.log.Warn("the firmware recorded an error before this boot (ACPI BERT)", "severity", rec.Severity, "sections", rec.SectionTypes())
		m.cperRecord(nil, "bert", time.Now(), data, &rec)
	}
	cur.Mark(id)
	if err := c.cursors.Set("bert", cur); err != nil {
		m.log.Warn("cannot save the CPER cursor; the next start records the BERT record again", "error", err)
	}
}
