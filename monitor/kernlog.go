package monitor

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/internal/counters"
	"github.com/gpu-telemetry/gpu-telemetry/kmsg"
	"github.com/gpu-telemetry/gpu-telemetry/reading"
	"github.com/gpu-telemetry/gpu-telemetry/sink"
	"github.com/gpu-telemetry/gpu-telemetry/snapshot"
)

// KernelLog is the kernel log, opened as early as the daemon can
// (OpenKernelLog, before NVML's start-up wait on a stuck GPU), so that what
// the kernel logs from then on waits in its ring (or the file) until the
// monitor reads it: an Xid 79 logged during a 20 s start-up is not lost.
// When the previous run saved its position in this boot (kmsg_seq in
// run-state), the records after it are read first, as backlog: those logged
// while no logger was running.
type KernelLog struct {
	path   string
	resume reading.Opt[uint64] // the previous run's last record, in this boot
	r      *kmsg.Reader        // nil until opened, or when it could not be
	err    error               // why it could not be opened
	opened bool
	// standIn, set by tests only, rewrites each record before it is parsed
	// (nil: none). The tests of the real /dev/kmsg write harmless lines
	// into the host's kernel log, where an Xid 79 would page its operators,
	// and turn them here into the driver's lines they stand for (the
	// kernel's records: the host marks the lines written as user space's).
	standIn func(kmsg.Record) kmsg.Record
}

// OpenKernelLog opens cfg.KmsgPath for the monitor that cfg will build;
// nil when the kernel log is off. It reads the previous run's saved
// position from cfg.LogDir's run-state first (a small file read), so call it
// before New, which rewrites run-state. An open that fails is kept and
// reported when the monitor runs. Pass the result in Config.KernelLog;
// Close it when no monitor runs.
func OpenKernelLog(cfg Config) *KernelLog {
	cfg.defaults()
	k := planKernelLog(cfg)
	if k != nil {
		k.open(cfg.Logger)
	}
	return k
}

// planKernelLog decides where the kernel log will be read from, without
// opening it: after the previous run's last record when it saved one in
// this boot, else from the end, as a first start in a boot does. cfg has
// its defaults.
func planKernelLog(cfg Config) *KernelLog {
	if cfg.KmsgPath == "" {
		return nil
	}
	k := &KernelLog{path: cfg.KmsgPath}
	log := cfg.Logger
	st, found, err := snapshot.ReadRunState(cfg.LogDir)
	if err != nil {
		log.Warn("cannot read the previous run's kernel log position; the kernel log is read from its end", "error", err)
		return k
	}
	seq, ok := st.KmsgSeq.Get()
	if !found || !ok {
		return k
	}
	boot := snapshot.ReadBootID(filepath.Join(cfg.HostRoot, snapshot.DefaultBootIDPath))
	if boot == "" || st.BootID != boot {
		log.Info("the previous run's kernel log position is of another boot; the kernel log is read from its end",
			"prev_boot", st.BootID, "boot", boot)
		return k
	}
	k.resume = reading.Some(seq)
	return k
}

// open opens the kernel log once.
func (k *KernelLog) open(log *slog.Logger) {
	if k.opened {
		return
	}
	k.opened = true
	k.r, k.err = kmsg.OpenWith(k.path, kmsg.Options{Log: log, ResumeAfter: k.resume})
	if seq, ok := k.resume.Get(); ok && k.err == nil {
		if _, dev := k.r.LastSeq(); dev {
			log.Info("kernel log: reading the records logged since the previous run's last one in this boot", "path", k.path, "after_seq", seq)
		}
	}
}

// Close releases the kernel log of a monitor that never ran.
func (k *KernelLog) Close() {
	if k != nil && k.r != nil {
		k.r.Close()
	}
}

// kmsgSeqRefresh is how often the kernel log position is saved to run-state
// while it moves: a run killed without its clean stop has the records of at
// most this long replayed (marked backlog) at the next start.
const kmsgSeqRefresh = 10 * time.Second

// runState is this run's run-state, written by BeginRun and then rewritten
// (atomically) when the kernel log position moves.
type runState struct {
	mu    sync.Mutex
	begun bool // BeginRun has read the previous run's state and written ours
	cur   snapshot.RunState
	// prev are the previous run's boards (nil: none recorded): a GPU that
	// answers late is compared with them (lateBoard).
	prev []sink.Board
	// write rewrites run-state (snapshot.WriteRunState); tests stall it.
	write func(dir string, s snapshot.RunState) error
}

// kmsgSeq is the position to save: the last /dev/kmsg record handed on.
func (m *Monitor) kmsgSeq() reading.Opt[uint64] {
	if m.klog == nil || m.klog.r == nil {
		return reading.Opt[uint64]{}
	}
	seq, ok := m.klog.r.LastSeq()
	return reading.Opt[uint64]{V: seq, OK: ok}
}

// beginRun records this run in run-state (with the kernel log position it
// starts from) and returns how the previous run ended.
func (m *Monitor) beginRun(bootID string) (snapshot.PreviousRun, error) {
	rs := &m.runState
	rs.mu.Lock()
	defer rs.mu.Unlock()
	rs.cur = snapshot.RunState{BootID: bootID, Started: m.start, PID: os.Getpid(), KmsgSeq: m.kmsgSeq(), GPUs: m.boards()}
	prev, err := snapshot.BeginRun(m.cfg.LogDir, rs.cur)
	rs.begun, rs.prev = true, prev.State.GPUs
	return prev, err
}

// boards are the monitored GPUs' boards, as their static facts name them.
func (m *Monitor) boards() []sink.Board {
	out := make([]sink.Board, 0, len(m.gpus))
	for _, gs := range m.gpus {
		out = append(out, csvColumns(gs.idx, gs.info()).Board)
	}
	return out
}

// lateBoard is called (on the side queue) once a GPU stuck at start has
// answered: its board is written to run-state (the next start knows it) and
// compared with the previous run's, one INVENTORY line (identified, with
// where the previous run had it, or new). Before beginRun it does nothing:
// beginRun records and compares every board known by then.
func (m *Monitor) lateBoard(gs *gpuState) {
	rs := &m.runState
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if !rs.begun {
		return
	}
	if rs.prev != nil {
		m.eventLine(sink.IdentifyLate(rs.prev, csvColumns(gs.idx, gs.info()).Board).Event(time.Now()))
	}
	next := rs.cur
	next.GPUs = m.boards()
	if err := rs.write(m.cfg.LogDir, next); err != nil {
		m.log.Warn("cannot record the GPU that answered late in run-state; the next start will not compare it", "error", err)
		return
	}
	rs.cur = next
}

var kmsgSaveFailures = counters.Declare(counters.Def{Name: "kmsg_position_save_failures", Loss: true, OwnLog: true,
	Help: "saves of the kernel log position in run-state that failed (the first is logged with why; tried again at the next save): a restart meanwhile may replay or miss kernel log records"})

// saveKmsgSeq rewrites run-state when the kernel log position moved. Before
// beginRun it does nothing: the previous run's state is still to be read.
func (m *Monitor) saveKmsgSeq() {
	rs := &m.runState
	rs.mu.Lock()
	defer rs.mu.Unlock()
	seq := m.kmsgSeq()
	if !rs.begun || seq == rs.cur.KmsgSeq {
		return
	}
	next := rs.cur
	next.KmsgSeq = seq
	if err := rs.write(m.cfg.LogDir, next); err != nil {
		if m.reg.Add(kmsgSaveFailures, 1) == 1 {
			m.log.Warn("cannot save the kernel log position; a restart may replay or miss records logged meanwhile (tried again later)", "error", err)
		}
		return
	}
	rs.cur = next
}

// refreshKmsgSeq saves the kernel log position every kmsgSeqRefresh, and
// whenever now delivers (a replay has been read), until ctx is done. It is
// the only saver while the kernel log is read: the reader never waits on
// the disk.
func (m *Monitor) refreshKmsgSeq(ctx context.Context, now <-chan struct{}) {
	every(ctx, kmsgSeqRefresh, now, m.saveKmsgSeq)
}
