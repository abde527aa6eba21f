package snapshot

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/internal/cooldown"
	"github.com/gpu-telemetry/gpu-telemetry/internal/counters"
	"github.com/gpu-telemetry/gpu-telemetry/sink"
)

// Defaults for Config, after the Python logger this daemon replaces,
// gpu-telemetry-deep.py, where it had the constant.
const (
	// DefaultDir is gpu-telemetry-deep.py's DEFAULT_LOG_DIR.
	DefaultDir = "/var/log/gpu-telemetry"
	// DefaultCrashCooldown is gpu-telemetry-deep.py's CRASH_COOLDOWN_SEC:
	// one crash floods 30 to 50 Xid events within seconds, and one
	// snapshot per crash is enough.
	DefaultCrashCooldown = 60 * time.Second
	// DefaultSpikeCooldown is gpu-telemetry-deep.py's SPIKE_COOLDOWN_SEC.
	DefaultSpikeCooldown = 10 * time.Second
	// loggedSuppressions: gpu-telemetry-deep.py logged the first 3
	// suppressed crash snapshots of a burst, then stayed quiet.
	loggedSuppressions = 3
	// closeGrace is how long Close waits, after cancelling the diagnostics,
	// for the writers.
	closeGrace = time.Second
)

// Config configures a Manager. Zero fields take the defaults given.
// Flush is called on a snapshot goroutine (an fsync can take long on a busy
// disk), so it must be safe to call concurrently with the caller's CSV writes.
type Config struct {
	Dir                string                                  // log directory; files go to Dir/crashes and Dir/spikes; "" means DefaultDir
	Runner             Runner                                  // runs the diagnostics; nil means an ExecRunner with Logger
	Now                func() time.Time                        // wall clock for cooldowns, names and headers; nil means time.Now
	Logger             *slog.Logger                            // nil discards
	CrashCooldown      time.Duration                           // per GPU; 0 means DefaultCrashCooldown
	SpikeCooldown      time.Duration                           // for all GPUs together, as gpu-telemetry-deep.py had it; 0 means DefaultSpikeCooldown
	FollowUps          []time.Duration                         // offsets of the follow-ups; nil means DefaultFollowUps, empty (non-nil) none
	CommandTimeout     time.Duration                           // per diagnostic; 0 means DefaultCommandTimeout
	DiagnosticsTimeout time.Duration                           // all diagnostics of one capture; 0 means twice CommandTimeout
	Flush              func(gpu int) error                     // flushes and fsyncs the GPU's CSV; called before each snapshot, from a snapshot goroutine
	HostRoot           string                                  // where /proc and /sys are read from (tests give a fake one); "" means "/"
	KernelWall         func(printk time.Duration) time.Time    // places dmesg lines on the wall clock (placeKernelLines); nil leaves them
	Written            func(kind string, gpu int, path string) // told each file written ("crash", "spike", "follow-up"; gpu -1: none monitored), from the writer
	Counters           *counters.Registry                      // the registry the writer counts in (counters.go); required
}

// Decision is what Decide or DecideSpike made of a request, with nothing
// left to finish. An accepted one goes back, in its request, to Crash or Spike.
type Decision struct {
	Accepted     bool          // a snapshot is to be taken: hand its request to Crash or Spike
	Closed       bool          // refused because the Manager is closed (counted in snapshots_refused_at_shutdown)
	Burst        uint64        // suppressed: how many have been suppressed in this cooldown window, this one included
	Suppressed   uint64        // suppressed so far in total: for this GPU (crash) or for all GPUs (spike)
	CooldownLeft time.Duration // suppressed: time until the next snapshot can be taken
	// Crash only:
	Escalation    bool      // accepted inside the cooldown: the event is a worse stage of the incident
	Headline      string    // the incident's headline, the event counted in (without the GPU)
	IncidentStart time.Time // when the incident began (its first event)
	Incident      string    // the incident's id: the base name of the crash snapshot that began it
	Snapshot      string    // the crash snapshot that holds the event's evidence: its own when accepted (see Decide), else the incident's newest

	gpu        int
	at         time.Time // when it was decided: the header's time when the request has none
	base       string    // crash: the file's base name
	inc        *incident // crash: the incident it is counted in
	idx        int       // crash: the event's place in inc.events (-1: past maxIncidentEvents)
	prevNewest string    // crash: the incident's newest snapshot before this one
}

// Manager rate-limits and writes snapshots. Its methods are safe for
// concurrent use.
type Manager struct {
	cfg      Config
	log      *slog.Logger
	files    sink.Atomic // the one atomic-write helper; tests inject failures through its Ops
	crashDir string

	work       context.Context // cancelled when Close gives up waiting: it kills running commands
	stopWork   context.CancelFunc
	follow     context.Context // cancelled as Close starts: no follow-up starts after that
	stopFollow context.CancelCauseFunc

	wg     sync.WaitGroup     // one per request handed to Crash or Spike, until its last file
	reads  driverReads        // the driver files' reads of every snapshot (readFile)
	counts *counters.Registry // Config.Counters

	mu        sync.Mutex
	closed    bool
	gpus      map[int]*crashState
	spikeCool cooldown.Cooldown // one across all GPUs
}

// New returns a Manager for cfg with its defaults filled in. Directories are
// created when the first snapshot is written.
func New(cfg Config) *Manager {
	counts := counters.Need(cfg.Counters, "snapshot.Config.Counters")
	cfg.Dir = cmp.Or(cfg.Dir, DefaultDir)
	cfg.HostRoot = cmp.Or(cfg.HostRoot, "/")
	cfg.CrashCooldown = cmp.Or(max(cfg.CrashCooldown, 0), DefaultCrashCooldown)
	cfg.SpikeCooldown = cmp.Or(max(cfg.SpikeCooldown, 0), DefaultSpikeCooldown)
	cfg.CommandTimeout = cmp.Or(max(cfg.CommandTimeout, 0), DefaultCommandTimeout)
	// Reached only by a Runner that ignores its context.
	cfg.DiagnosticsTimeout = cmp.Or(max(cfg.DiagnosticsTimeout, 0), 2*cfg.CommandTimeout)
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	cfg.Logger = cmp.Or(cfg.Logger, slog.New(slog.DiscardHandler))
	if cfg.FollowUps == nil {
		cfg.FollowUps = DefaultFollowUps
	}
	// Own sorted copy without non-positive offsets: the caller's slice may change.
	cfg.FollowUps = slices.DeleteFunc(slices.Clone(cfg.FollowUps), func(d time.Duration) bool { return d <= 0 })
	slices.Sort(cfg.FollowUps)
	cfg.Runner = cmp.Or(cfg.Runner, Runner(&ExecRunner{Logger: cfg.Logger}))
	if cfg.Flush == nil {
		cfg.Flush = func(int) error { return nil }
	}
	m := &Manager{
		cfg:      cfg,
		log:      cfg.Logger,
		files:    sink.Atomic{Perm: fileMode},
		crashDir: filepath.Join(cfg.Dir, CrashDir),
		gpus:     make(map[int]*crashState),
		counts:   counts,
	}
	m.work, m.stopWork = context.WithCancel(context.Background())
	m.follow, m.stopFollow = context.WithCancelCause(context.Background())
	return m
}

// Decide decides on a crash snapshot of gpu for the critical event ev
// (crashState.decide), counts it and returns at once: the caller writes the
// event's line, which names the incident and the snapshot, then gathers the
// request for Crash, or reports it with Lost. An accepted Decision.Snapshot
// is the path the file is meant to have; should the disk hold that name
// already, "-2" is added (logged).
func (m *Manager) Decide(gpu int, ev Event) Decision {
	now := m.cfg.Now()
	if ev.Time.IsZero() {
		ev.Time = now
	}
	m.mu.Lock()
	if m.closed {
		m.counts.Inc(refusedClosed)
		m.mu.Unlock()
		return Decision{Closed: true}
	}
	st := m.gpus[gpu]
	if st == nil {
		st = &crashState{}
		m.gpus[gpu] = st
	}
	prev := st.inc
	d := st.decide(gpu, ev, now, m.cfg.CrashCooldown, m.crashDir)
	switch {
	case !d.Accepted:
		m.counts.Inc(crashesSuppressed)
	case d.Escalation:
		// The incident's follow-ups, already scheduled, list it with the rest.
		m.counts.Inc(escalations)
	default:
		// A new incident: its follow-ups replace the older one's.
		m.counts.Inc(incidentsBegun)
		d.inc.follow, d.inc.stopFollow = context.WithCancelCause(m.follow)
		if prev != nil && prev.stopFollow != nil {
			prev.stopFollow(errSuperseded)
		}
	}
	m.mu.Unlock()
	if !d.Accepted && d.Burst <= loggedSuppressions {
		m.log.Warn("crash snapshot suppressed by cooldown", "gpu", gpu, "count", d.Burst,
			"suppressed_total", d.Suppressed, "cooldown_left", d.CooldownLeft, "event", ev.what())
	}
	return d
}

// Lost reports that the crash snapshot d accepted will not be handed to
// Crash (the work that was to gather it was dropped): the loss is counted
// in snapshot_failures and logged (dropped).
func (m *Manager) Lost(d Decision, why string) {
	if !d.Accepted || d.inc == nil {
		return
	}
	m.counts.Inc(snapshotFailures)
	m.log.Warn("snapshot abandoned before it was built", "kind", "crash", "gpu", d.gpu,
		"path", filepath.Join(m.crashDir, d.base+".log"), "incident", d.Incident, "why", why)
	m.dropped(d, why)
}

// dropped takes back what Decide gave d, which will not be built at all
// (Lost, a request refused at shutdown; the caller counted and logged
// that): unname, and the follow-ups of the incident it began are cancelled,
// counted and logged (nothing is left to take them).
func (m *Manager) dropped(d Decision, why string) {
	m.unname(d)
	if !d.Escalation {
		d.inc.stopFollow(nil)
		m.followUpsCanceled(d.gpu, filepath.Join(m.crashDir, d.base+".log"), len(m.cfg.FollowUps), "its crash snapshot was not written: "+why)
	}
}

// unname takes back the name Decide gave d, whose file will not be
// written: the incident no longer names the file, so later events and
// escalations do not point at a missing one.
func (m *Manager) unname(d Decision) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if d.idx >= 0 && d.inc.events[d.idx].file == d.base+".log" {
		d.inc.wrote(d.idx, "")
	}
	if d.inc.newest == filepath.Join(m.crashDir, d.base+".log") {
		d.inc.newest = d.prevNewest
	}
}

// Attach adds ev, found after the GPU's critical event (a CPER record), to
// the GPU's incident while its follow-ups are still to come, which list it;
// it takes no snapshot. It returns the incident's id and newest snapshot,
// "" when no incident is open.
func (m *Manager) Attach(gpu int, ev Event) (id, snapshot string) {
	if ev.Time.IsZero() {
		ev.Time = m.cfg.Now()
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	st := m.gpus[gpu]
	if m.closed || st == nil || st.inc == nil || st.inc.follow == nil || st.inc.follow.Err() != nil {
		return "", ""
	}
	if len(st.inc.events) >= maxIncidentEvents {
		st.inc.dropped++
	} else {
		st.inc.events = append(st.inc.events, ev)
	}
	return st.inc.id, st.inc.newest
}

// Incident is the id and newest snapshot of the GPU's current or last
// incident, for an event another report of which already asked for one.
func (m *Manager) Incident(gpu int) (id, snapshot string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if st := m.gpus[gpu]; st != nil && st.inc != nil {
		return st.inc.id, st.inc.newest
	}
	return "", ""
}

// DecideSpike decides on a spike snapshot of gpu: at most one per
// SpikeCooldown across all GPUs, as gpu-telemetry-deep.py did (fans ramp on
// several GPUs of a chassis at once).
func (m *Manager) DecideSpike(gpu int) Decision {
	now := m.cfg.Now()
	m.mu.Lock()
	if m.closed {
		m.counts.Inc(refusedClosed)
		m.mu.Unlock()
		return Decision{Closed: true}
	}
	ok, burst, left := m.spikeCool.Allow(now, m.cfg.SpikeCooldown)
	if ok {
		m.mu.Unlock()
		return Decision{Accepted: true, Suppressed: m.counts.Load(spikesSuppressed), gpu: gpu, at: now}
	}
	d := Decision{Burst: burst, Suppressed: m.counts.Add(spikesSuppressed, 1), CooldownLeft: left}
	m.mu.Unlock()
	// The first of a burst is said; the rest of it only counted.
	level := slog.LevelDebug
	if burst == 1 {
		level = slog.LevelInfo
	}
	m.log.Log(context.Background(), level, "spike snapshot suppressed by cooldown", "gpu", gpu, "count", burst,
		"suppressed_total", d.Suppressed, "cooldown_left", left)
	return d
}

// hand counts a request in the writers Close waits for, or, after Close,
// in snapshots_refused_at_shutdown, and then reports false.
func (m *Manager) hand() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		m.counts.Inc(refusedClosed)
		return false
	}
	m.wg.Add(1)
	return true
}

// Close refuses new requests, cancels the follow-ups not yet started, and
// waits for the writers until ctx is done; then it kills the commands still
// running (the stage-2 file says which were cut short), waits closeGrace
// more, and returns an error wrapping ctx's. Close may be called again.
func (m *Manager) Close(ctx context.Context) error {
	m.mu.Lock()
	m.closed = true
	m.mu.Unlock()
	m.stopFollow(errClosing)

	done := make(chan struct{})
	go func() {
		m.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		m.stopWork()
		return nil
	case <-ctx.Done():
	}
	m.stopWork()
	select {
	case <-done:
		return fmt.Errorf("close snapshots: diagnostics cut short: %w", ctx.Err())
	case <-time.After(closeGrace):
		return fmt.Errorf("close snapshots: writers still busy %s after cancelling: %w", closeGrace, ctx.Err())
	}
}

// flush calls Config.Flush; a failure is logged and the snapshot still taken.
func (m *Manager) flush(gpu int) {
	if err := m.cfg.Flush(gpu); err != nil {
		m.log.Warn("flush csv before snapshot failed", "gpu", gpu, "error", err)
	}
}

// save writes data to a new file dir/base.log (createNew), records it, and
// returns its path ("" when nothing was written).
func (m *Manager) save(kind string, gpu, stage int, dir, base string, data []byte, t0 time.Time, count *counters.Def) string {
	path, err := createNew(m.files, dir, base, ".log", data)
	m.record(kind, gpu, stage, path, t0, err, count)
	return path
}

// record counts a file written at path (work started at t0) in count and
// logs it; err is then a late failure, the directory's fsync. With path "",
// err kept the file from being written: a snapshot failure.
func (m *Manager) record(kind string, gpu, stage int, path string, t0 time.Time, err error, count *counters.Def) {
	if path == "" {
		m.counts.Inc(snapshotFailures)
		m.log.Warn("snapshot failed", "kind", kind, "gpu", gpu, "stage", stage, "error", err)
		return
	}
	m.counts.Inc(count)
	m.log.Info("snapshot written", "kind", kind, "gpu", gpu, "stage", stage, "path", path, "took", time.Since(t0))
	if m.cfg.Written != nil {
		m.cfg.Written(kind, gpu, path)
	}
	if err != nil {
		m.log.Warn("snapshot written but not made durable", "kind", kind, "gpu", gpu, "path", path, "error", err)
	}
}
