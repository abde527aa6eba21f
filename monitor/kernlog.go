package monitor

import (
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/kmsg"
	"github.com/gpu-telemetry/gpu-telemetry/reading"
	"github.com/gpu-telemetry/gpu-telemetry/sink"
	"github.com/gpu-telemetry/gpu-telemetry/snapshot"
)

// KernelLog is the kernel log, opened before NVML's start-up wait on a stuck
// GPU (OpenKernelLog) so that an Xid 79 logged during a 20 s start-up waits
// in the ring. The records after the previous run's last one in this boot
// (kmsg_seq in run-state) are read first, as backlog.
type KernelLog struct {
	path   string
	resume reading.Opt[uint64] // the previous run's last record, in this boot
	r      *kmsg.Reader        // nil until opened, or when it could not be
	err    error               // why it could not be opened
	opened bool
	// standIn (tests) rewrites each record before it is parsed: tests of the
	// real /dev/kmsg write harmless lines (an Xid 79 would page the host's
	// operators) and turn them here into the driver's lines.
	standIn func(kmsg.Record) kmsg.Record
}

// OpenKernelLog opens cfg.KmsgPath (nil: off) for Config.KernelLog. It reads
// the previous run's position from run-state: call it before New. A failed
// open is reported when the monitor runs; Close it if no monitor runs.
func OpenKernelLog(cfg Config) *KernelLog {
	cfg.defaults()
	k := planKernelLog(cfg)
	if k != nil {
		k.open(cfg.Logger)
	}
	return k
}

// planKernelLog decides where the kernel log will be read from: after the
// previous run's last record in this boot, else from the end.
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

// kmsgSeqRefresh is how often the kernel log position is saved: a run
// killed has at most this long of records replayed at the next start.
const kmsgSeqRefresh = 10 * time.Second

// runState is this run's run-state, written by beginRun, rewritten when the
// kernel log position moves or a GPU answers late.
type runState struct {
	mu    sync.Mutex
	begun bool // beginRun has read the previous run's state and written ours
	cur   snapshot.RunState
	prev  []sink.Board // the previous run's boards (nil: none recorded)
	// write rewrites run-state (snapshot.WriteRunState); tests stall it.
	write      func(dir string, s snapshot.RunState) error
	saveFailed bool // a failure to save the kernel log position was logged
}

// save writes this run's state with change applied; rs.mu is held.
func (rs *runState) save(dir string, change func(*snapshot.RunState)) error {
	next := rs.cur
	change(&next)
	if err := rs.write(dir, next); err != nil {
		return err
	}
	rs.cur = next
	return nil
}

// kmsgSeq is the position to save: the last /dev/kmsg record handed on.
func (m *Monitor) kmsgSeq() reading.Opt[uint64] {
	if m.klog == nil || m.klog.r == nil {
		return reading.Opt[uint64]{}
	}
	seq, ok := m.klog.r.LastSeq()
	return reading.Opt[uint64]{V: seq, OK: ok}
}

// beginRun records this run in run-state and returns how the previous ended.
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

// lateBoard runs once a GPU stuck at start has answered: its board is
// compared with the previous run's (INVENTORY) and written to run-state;
// before beginRun, which does both for every board known by then, nothing.
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
	if err := rs.save(m.cfg.LogDir, func(s *snapshot.RunState) { s.GPUs = m.boards() }); err != nil {
		m.log.Warn("cannot record the GPU that answered late in run-state; the next start will not compare it", "error", err)
	}
}

// saveKmsgSeq rewrites run-state when the kernel log position moved.
func (m *Monitor) saveKmsgSeq() {
	rs := &m.runState
	rs.mu.Lock()
	defer rs.mu.Unlock()
	seq := m.kmsgSeq()
	if !rs.begun || seq == rs.cur.KmsgSeq {
		return
	}
	if err := rs.save(m.cfg.LogDir, func(s *snapshot.RunState) { s.KmsgSeq = seq }); err != nil && !rs.saveFailed {
		rs.saveFailed = true
		m.log.Warn("cannot save the kernel log position; a restart may replay or miss records logged meanwhile (tried again later)", "error", err)
	}
}
