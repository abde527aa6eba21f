package monitor

import (
	"context"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/cper"
	"github.com/gpu-telemetry/gpu-telemetry/internal/counters"
	"github.com/gpu-telemetry/gpu-telemetry/live"
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
// cperRefresh. A read runs on the side goroutine (cper.Reader bounds it).
type cperReader struct {
	r  *cper.Reader
	on atomic.Bool // the driver has the call: critical events may read
	// late carries the GPUs whose critical event asks for a later read
	// (runCPER); a send never waits: one already waiting covers it.
	late chan *gpuState
}

// startCPER reads every GPU's records once, at start, and the host's boot
// error record; then, where the driver has the call, runs runCPER in wg
// until ctx is done.
func (m *Monitor) startCPER(ctx context.Context, wg *sync.WaitGroup) {
	c := &m.cper
	c.late = make(chan *gpuState, len(m.gpus))
	c.r = cper.NewReader(m.cfg.LogDir, m.host.ReadCPER, m.cfg.Deadline, m.log)
	if m.host.HasCPER() {
		c.on.Store(true)
	} else {
		m.log.Info("the driver lacks nvmlSystemGetCPER_v1 (R610+): no GPU CPER records are read")
	}
	if cper.HasBERT(m.cfg.HostRoot) {
		// Recorded once per boot; one an earlier run of this boot recorded
		// is shown (cper.Reader.ReadBERT).
		m.side.queue("reading the host's boot error record (BERT)", -1, func() {
			c.r.ReadBERT(m.log, m.cfg.HostRoot, m.ident.BootID,
				func(raw []byte, rec *cper.Record) { m.cperRecord(nil, "bert", time.Now(), raw, rec) },
				func(rec *cper.Record) { m.publishBERT(time.Now(), rec) })
		})
	}
	for _, gs := range m.gpus {
		m.readCPER(gs)
	}
	if c.on.Load() {
		wg.Go(func() { m.runCPER(ctx) })
	}
}

// runCPER queues a read of every GPU's records each cperRefresh, and of a
// GPU's a moment after its critical event (readCPERLate), until ctx is
// done. It only queues: the reads run on the side goroutine, bounded.
func (m *Monitor) runCPER(ctx context.Context) {
	tick := time.NewTicker(cperRefresh)
	defer tick.Stop()
	due := map[*gpuState]bool{}
	fire := make(chan *gpuState, len(m.gpus)) // one timer a GPU at most: never full
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			for _, gs := range m.gpus {
				m.readCPER(gs)
			}
		case gs := <-m.cper.late:
			// Half the first follow-up's offset, so that a record the
			// driver wrote just after the event joins the incident before
			// that follow-up lists its events (5 s with the default
			// follow-ups); cperRefresh when there are no follow-ups.
			if !due[gs] {
				due[gs] = true
				wait := cperRefresh
				if first := m.snaps.FirstFollowUp(); first > 0 {
					wait = first / 2
				}
				time.AfterFunc(wait, func() { fire <- gs })
			}
		case gs := <-fire:
			delete(due, gs)
			m.readCPER(gs)
		}
	}
}

// readCPERLate asks runCPER for another read of the GPU's records after
// its critical event; it never waits.
func (m *Monitor) readCPERLate(gs *gpuState) {
	if m.cper.on.Load() {
		nudge(m.cper.late, gs) // dropped: a request is waiting already; its read covers this event
	}
}

// readCPER queues a read of the GPU's new CPER records, each routed by
// cperRecord.
func (m *Monitor) readCPER(gs *gpuState) {
	if !m.cper.on.Load() {
		return
	}
	q := &gs.cperQueued
	if !q.CompareAndSwap(false, true) {
		return // one is queued already: it reads this event's records too
	}
	m.side.enqueue(sideJob{what: "reading the GPU's CPER records", gpu: gs.idx,
		f: func() {
			q.Store(false)
			uuid := gs.g.Info().UUID
			m.reg.Add(cperRepeats, uint64(m.cper.r.Read(gs.log, uuid, func(now time.Time, raw []byte, rec *cper.Record) {
				m.cperRecord(gs, uuid, now, raw, rec)
			})))
		},
		dropped: func(string) { q.Store(false) }})
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
