package snapshot

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/internal/cooldown"
	"github.com/gpu-telemetry/gpu-telemetry/sink"
)

// Defaults for Config.
const (
	// DefaultDir is the seed's log directory.
	DefaultDir = "/var/log/gpu-telemetry"
	// DefaultCrashCooldown is the seed's CRASH_COOLDOWN_SEC: one crash floods
	// 30 to 50 Xid events within seconds, and one snapshot per crash is enough.
	DefaultCrashCooldown = 60 * time.Second
	// DefaultSpikeCooldown is the seed's SPIKE_COOLDOWN_SEC.
	DefaultSpikeCooldown = 10 * time.Second
	// DefaultModulesPath is read instead of running lsmod (which only formats it).
	DefaultModulesPath = "/proc/modules"
	// loggedSuppressions: the first suppressions of a burst are logged so the
	// burst is visible, then the log stays quiet until the cooldown expires
	// (the seed's choice).
	loggedSuppressions = 3
	// closeGrace is how long Close waits, after cancelling the diagnostics,
	// for the writers to put what they have on disk.
	closeGrace = time.Second
)

// Config configures a Manager. Zero fields take the defaults given.
//
// Flush is called on a snapshot goroutine, not on the goroutine that called
// Crash or Spike (an fsync can take long on a busy disk, and Crash may come
// from the event goroutine while the poll loop writes the CSV anyway), so it
// must be safe to call concurrently with the caller's CSV writes.
type Config struct {
	Dir                string              // log directory; files go to Dir/crashes and Dir/spikes; "" means DefaultDir
	Runner             Runner              // runs the diagnostics; nil means an ExecRunner with CommandTimeout and Logger
	Now                func() time.Time    // wall clock for cooldowns, names and headers; nil means time.Now
	Logger             *slog.Logger        // nil discards
	CrashCooldown      time.Duration       // per GPU; 0 means DefaultCrashCooldown
	SpikeCooldown      time.Duration       // for all GPUs together, as in the seed; 0 means DefaultSpikeCooldown
	FollowUps          []time.Duration     // offsets of the follow-ups; nil means DefaultFollowUps, empty (non-nil) none
	CommandTimeout     time.Duration       // per diagnostic; 0 means DefaultCommandTimeout
	DiagnosticsTimeout time.Duration       // all diagnostics of one capture; 0 means twice CommandTimeout
	Flush              func(gpu int) error // flushes and fsyncs the GPU's CSV; called before each snapshot, from a snapshot goroutine
	ModulesPath        string              // "" means DefaultModulesPath
	HostRoot           string              // where /proc and /sys are read from (tests give a fake one); "" means "/"
	// KernelWall maps a kernel log printk timestamp to wall-clock time
	// through the measured offset of the kernel log's clock; dmesg lines in
	// snapshots get that time next to their own. nil: they are left as is.
	KernelWall func(printk time.Duration) time.Time
	// Written, if set, is told each file written (kind "crash", "spike" or
	// "follow-up"; gpu -1 for no monitored GPU), from the writing goroutine.
	Written func(kind string, gpu int, path string)
}

// Decision says what Crash or Spike did with a request.
type Decision struct {
	Accepted     bool          // a snapshot will be written
	Closed       bool          // refused because the Manager is closed (counted in Stats.RefusedClosed)
	Burst        uint64        // suppressed: how many have been suppressed in this cooldown window, this one included
	Suppressed   uint64        // suppressed so far in total: for this GPU (Crash) or for all GPUs (Spike)
	CooldownLeft time.Duration // suppressed: time until the next snapshot can be taken
	// Crash only:
	Escalation    bool      // accepted inside the cooldown: the event is a worse stage of the incident
	Headline      string    // the incident's headline, the event counted in (without the GPU)
	IncidentStart time.Time // when the incident began (its first event)
	Incident      string    // the incident's id: the base name of the crash snapshot that began it
	Snapshot      string    // the crash snapshot that holds the event's evidence: its own when accepted (the path it is being written to: see Decide), else the incident's newest
}

// Stats are the Manager's counters since New.
type Stats struct {
	Incidents              uint64         // incidents begun: a GPU's critical events from the first until its cooldown ends
	Escalations            uint64         // crash snapshots taken inside an incident's cooldown for a worse stage
	CrashesWritten         uint64         // crash snapshots whose stage-1 file is on disk (escalations included)
	CrashesCompleted       uint64         // crash snapshots whose file was replaced by the full version
	CrashesSuppressed      uint64         // crash requests suppressed by the cooldown
	CrashesSuppressedByGPU map[int]uint64 // the same per GPU index: each GPU's count, which its crash snapshots' headers show
	SpikesWritten          uint64
	SpikesSuppressed       uint64
	FollowUpsWritten       uint64
	FollowUpsCanceled      uint64 // pending follow-ups cancelled by a newer incident or Close
	RefusedClosed          uint64 // crash and spike requests refused because they came after Close
	Failures               uint64 // files that could not be written, any kind or stage
}

// Manager rate-limits and writes snapshots. Its methods are safe for
// concurrent use.
type Manager struct {
	cfg      Config
	log      *slog.Logger
	files    sink.Atomic // the one atomic-write helper; tests inject failures through its Ops
	crashDir string
	spikeDir string

	// work is cancelled when Close gives up waiting: it kills running commands.
	work     context.Context
	stopWork context.CancelFunc
	// follow is cancelled as Close starts: no follow-up starts after that.
	follow     context.Context
	stopFollow context.CancelCauseFunc

	wg sync.WaitGroup // one per accepted request, until its last file is written

	mu        sync.Mutex
	closed    bool
	gpus      map[int]*gpuState
	spikeCool cooldown.Cooldown // one across all GPUs
	stats     Stats
}

// gpuState is one GPU's crash cooldown and its current incident.
type gpuState struct {
	cool       cooldown.Cooldown
	inc        *incident // the current or last incident; nil before the first
	lastBase   string    // the base name of its last crash snapshot
	sameBase   int       // how many snapshots took lastBase
	suppressed uint64    // suppressed in total
	stopFollow context.CancelCauseFunc
}

// New returns a Manager for cfg with its defaults filled in. Directories are
// created when the first snapshot is written.
func New(cfg Config) *Manager {
	if cfg.Dir == "" {
		cfg.Dir = DefaultDir
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.CrashCooldown <= 0 {
		cfg.CrashCooldown = DefaultCrashCooldown
	}
	if cfg.SpikeCooldown <= 0 {
		cfg.SpikeCooldown = DefaultSpikeCooldown
	}
	if cfg.FollowUps == nil {
		cfg.FollowUps = DefaultFollowUps
	}
	// Own sorted copy without non-positive offsets: the caller's slice may change.
	cfg.FollowUps = slices.DeleteFunc(slices.Clone(cfg.FollowUps), func(d time.Duration) bool { return d <= 0 })
	slices.Sort(cfg.FollowUps)
	if cfg.CommandTimeout <= 0 {
		cfg.CommandTimeout = DefaultCommandTimeout
	}
	if cfg.DiagnosticsTimeout <= 0 {
		// The commands run concurrently, each bounded by CommandTimeout, so
		// this is only reached by a Runner that ignores its context.
		cfg.DiagnosticsTimeout = 2 * cfg.CommandTimeout
	}
	if cfg.Runner == nil {
		cfg.Runner = &ExecRunner{Timeout: cfg.CommandTimeout, Logger: cfg.Logger}
	}
	if cfg.Flush == nil {
		cfg.Flush = func(int) error { return nil }
	}
	if cfg.HostRoot == "" {
		cfg.HostRoot = "/"
	}
	if cfg.ModulesPath == "" {
		cfg.ModulesPath = DefaultModulesPath
	}
	m := &Manager{
		cfg:      cfg,
		log:      cfg.Logger,
		files:    sink.Atomic{Perm: fileMode},
		crashDir: filepath.Join(cfg.Dir, CrashDir),
		spikeDir: filepath.Join(cfg.Dir, SpikeDir),
		gpus:     make(map[int]*gpuState),
	}
	m.work, m.stopWork = context.WithCancel(context.Background())
	m.follow, m.stopFollow = context.WithCancelCause(context.Background())
	return m
}

// Crash asks for a crash snapshot of gpu for the critical event ev: Decide,
// then, when accepted, Build with build at once on the caller's goroutine.
// The files are written in the background: Crash never waits for the disk
// or for any command.
func (m *Manager) Crash(gpu int, ev Event, build func() CrashRequest) Decision {
	d, p := m.Decide(gpu, ev)
	p.Build(build)
	return d
}

// Decide decides on a crash snapshot of gpu for the critical event ev,
// quickly and without building or writing anything, so that the caller can
// write the event's line (which names the incident and the snapshot) before
// the snapshot's rows are gathered. The first event outside the GPU's
// CrashCooldown begins an incident and takes a snapshot. Inside the
// cooldown, an event of a worse stage, or one asking for more (Event.Stage,
// Event.Asks), than every event the incident has captured takes its own
// snapshot (an escalation: at most one per stage and ask level); the others
// are counted as suppressed. Every event is kept in the incident's list,
// which its snapshots and follow-ups show.
//
// When the snapshot is accepted, the Pending returned (nil otherwise) must
// be built (Pending.Build) or abandoned (Pending.Abandon) exactly once:
// Close waits for it. Decision.Snapshot is then the path the file is meant
// to have; it is written there unless the disk already holds that name
// (then "-2" is added) or the write fails, both logged.
func (m *Manager) Decide(gpu int, ev Event) (Decision, *Pending) {
	now := m.cfg.Now()
	if ev.Time.IsZero() {
		ev.Time = now
	}
	if !m.lockOpen() {
		return Decision{Closed: true}, nil
	}
	st := m.gpus[gpu]
	if st == nil {
		st = &gpuState{}
		m.gpus[gpu] = st
	}
	ok, burst, left := st.cool.Allow(now, m.cfg.CrashCooldown)
	if ok || st.inc == nil {
		st.inc = &incident{gpu: gpu, start: ev.Time}
		m.stats.Incidents++
		ok = true
	}
	inc := st.inc
	escalates, idx := inc.add(ev, ok)
	d := Decision{Headline: inc.headline(), IncidentStart: inc.start, Incident: inc.id, Snapshot: inc.newest}
	if !escalates {
		st.suppressed++
		m.stats.CrashesSuppressed++
		d.Burst, d.Suppressed, d.CooldownLeft = burst, st.suppressed, left
		m.mu.Unlock()
		if d.Burst <= loggedSuppressions {
			m.log.Warn("crash snapshot suppressed by cooldown", "gpu", gpu, "count", d.Burst,
				"suppressed_total", d.Suppressed, "cooldown_left", left, "event", ev.what())
		}
		return d, nil
	}
	p := &Pending{m: m, gpu: gpu, now: now, inc: inc, idx: idx, prevNewest: inc.newest}
	var older context.CancelCauseFunc
	if ok {
		// A new incident: its follow-ups replace the older one's.
		older = st.stopFollow
		p.fctx, p.stop = context.WithCancelCause(m.follow)
		st.stopFollow = p.stop
	} else {
		// An escalation: the incident's follow-ups, already scheduled,
		// list it with the rest.
		m.stats.Escalations++
		d.Escalation = true
	}
	// The name is taken here, in the order the events came: an escalation
	// in the same millisecond as the snapshot before it gets "-2".
	p.base = st.name(baseName("crash", now, gpu))
	inc.wrote(idx, p.base+".log") // corrected once written, should the disk hold that name already
	if inc.id == "" {
		inc.id = p.base
	}
	inc.newest = filepath.Join(m.crashDir, p.base+".log")
	d.Incident, d.Snapshot = inc.id, inc.newest
	p.suppressed = st.suppressed
	m.wg.Add(1)
	m.mu.Unlock()
	if older != nil {
		older(errSuperseded)
	}
	d.Accepted, d.Suppressed = true, p.suppressed
	p.headline = d.Headline
	return d, p
}

// Pending is a crash snapshot Decide accepted that is still to be built:
// its name and its place in the incident are taken, and Close waits for it
// until Build or Abandon.
type Pending struct {
	m          *Manager
	gpu        int
	now        time.Time // when it was decided: the header's time when the request has none
	base       string
	inc        *incident
	idx        int
	prevNewest string // the incident's newest snapshot before this one
	headline   string
	suppressed uint64
	fctx       context.Context         // the follow-ups' context: nil for an escalation
	stop       context.CancelCauseFunc // cancels the follow-ups; nil for an escalation
	done       atomic.Bool
}

// Build calls build (nil builds the zero request) on the caller's goroutine
// and writes the snapshot in the background. It does nothing on a nil
// Pending or one already built or abandoned. The Manager sets the header's
// GPUIndex, Suppressed and Headline, and Title and Time when they are empty.
func (p *Pending) Build(build func() CrashRequest) {
	if p == nil || !p.done.CompareAndSwap(false, true) {
		return
	}
	m := p.m
	abandon := func() {}
	if p.stop != nil {
		abandon = func() { p.stop(nil) }
	}
	req := buildCounted(&m.wg, build, abandon)
	req.Header.fill(p.gpu, p.suppressed, crashTitle, p.now)
	req.Header.Headline = gpuHeadline(p.gpu, p.headline)
	start := time.Now() // the follow-ups' offsets count from here, on the monotonic clock
	go m.crash(p.fctx, p.stop, p.gpu, &req, p.base, start, p.inc, p.idx)
}

// Abandon gives up a snapshot that will not be built (its caller dropped
// the work that was to build it, at shutdown or because its queue was
// full): Close stops waiting for it, its follow-ups are cancelled, the
// incident no longer names its file, and the loss is counted in
// Stats.Failures and logged with why and the file that will not exist. It
// does nothing on a nil Pending or one already built or abandoned.
func (p *Pending) Abandon(why string) {
	if p == nil || !p.done.CompareAndSwap(false, true) {
		return
	}
	m := p.m
	if p.stop != nil {
		p.stop(nil)
	}
	path := filepath.Join(m.crashDir, p.base+".log")
	m.mu.Lock()
	if p.idx >= 0 && p.inc.events[p.idx].file == p.base+".log" {
		p.inc.wrote(p.idx, "")
	}
	if p.inc.newest == path {
		p.inc.newest = p.prevNewest
	}
	m.stats.Failures++
	id := p.inc.id
	m.mu.Unlock()
	m.log.Warn("snapshot abandoned before it was built", "kind", "crash", "gpu", p.gpu, "path", path,
		"incident", id, "why", why)
	m.wg.Done()
}

// Incident is the id and newest snapshot of the GPU's current or last
// incident (see Decision); empty before its first. It names the incident of
// an event the caller did not ask a snapshot for because another report of
// it already did (the same Xid from the other source).
func (m *Manager) Incident(gpu int) (id, snapshot string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if st := m.gpus[gpu]; st != nil && st.inc != nil {
		return st.inc.id, st.inc.newest
	}
	return "", ""
}

// name returns base, or base-2, base-3 ... when the GPU's last snapshot had
// the same base name (two in one millisecond). Called with m.mu held.
func (st *gpuState) name(base string) string {
	if base != st.lastBase {
		st.lastBase, st.sameBase = base, 1
		return base
	}
	st.sameBase++
	return base + "-" + strconv.Itoa(st.sameBase)
}

// incidentEvents is the incident's events section for the file of the
// event at idx.
func (m *Manager) incidentEvents(inc *incident, idx int) Section {
	m.mu.Lock()
	defer m.mu.Unlock()
	return inc.eventsSection(idx)
}

// gpuHeadline is the headline with the GPU it is about: "GPU 0: ...".
func gpuHeadline(gpu int, h string) string {
	return "GPU " + strconv.Itoa(gpu) + ": " + h
}

// crash writes one snapshot: stage 1, stage 2, then, for the snapshot that
// began an incident (fctx not nil), the incident's follow-ups.
func (m *Manager) crash(fctx context.Context, stop context.CancelCauseFunc, gpu int, req *CrashRequest, base string, start time.Time, inc *incident, idx int) {
	defer m.wg.Done()
	if stop != nil {
		defer stop(nil)
	}
	// Before anything that could wake the GPU from runtime suspend.
	req.early = append(req.early, m.powerState(req.Header.BusID))
	m.flush(gpu)

	t0 := time.Now()
	req.events = m.incidentEvents(inc, idx)
	path := m.save("crash", gpu, 1, m.crashDir, base,
		renderCrash(req, nil, m.cfg.DiagnosticsTimeout), t0, &m.stats.CrashesWritten)
	if path == "" {
		return
	}
	m.mu.Lock()
	inc.wrote(idx, filepath.Base(path))
	if inc.newest == filepath.Join(m.crashDir, base+".log") {
		inc.newest = path
	}
	m.mu.Unlock()

	res := m.collect(m.work, m.crashJobs(req.Header.BusID))
	res[diagDmesg] = placeKernelLines(res[diagDmesg], m.cfg.KernelWall)
	// The events that came while the diagnostics ran are listed too.
	req.events = m.incidentEvents(inc, idx)
	if err := m.files.Replace(path, renderCrash(req, crashSections(res, m.kernelFilterFor(req.Header.BusID)), 0)); err != nil {
		m.failed("crash", gpu, 2, err)
	} else {
		m.written("crash", gpu, 2, path, t0, nil, &m.stats.CrashesCompleted)
	}
	if fctx != nil {
		m.followUps(fctx, gpu, path, &req.Header, start, inc)
	}
}

// Spike asks for a spike snapshot of gpu. At most one is taken per
// SpikeCooldown across all GPUs (as in the seed: when fans ramp, they ramp on
// several GPUs of a chassis at once); the others are counted. When accepted,
// build is called at once and the file is written in the background.
func (m *Manager) Spike(gpu int, build func() SpikeRequest) Decision {
	now := m.cfg.Now()
	if !m.lockOpen() {
		return Decision{Closed: true}
	}
	if ok, burst, left := m.spikeCool.Allow(now, m.cfg.SpikeCooldown); !ok {
		m.stats.SpikesSuppressed++
		d := Decision{Burst: burst, Suppressed: m.stats.SpikesSuppressed, CooldownLeft: left}
		m.mu.Unlock()
		m.log.Debug("spike snapshot suppressed by cooldown", "gpu", gpu, "count", d.Burst)
		return d
	}
	suppressed := m.stats.SpikesSuppressed
	m.wg.Add(1)
	m.mu.Unlock()

	req := buildCounted(&m.wg, build, nil)
	req.Header.fill(gpu, suppressed, spikeTitle, now)
	go m.spike(gpu, &req, now)
	return Decision{Accepted: true, Suppressed: suppressed}
}

// lockOpen takes m.mu when the Manager still accepts requests and reports
// true. After Close it counts the refusal in Stats.RefusedClosed, leaves
// m.mu unlocked and reports false.
func (m *Manager) lockOpen() bool {
	m.mu.Lock()
	if m.closed {
		m.stats.RefusedClosed++
		m.mu.Unlock()
		return false
	}
	return true
}

// buildCounted calls build (nil builds the zero request) for a writer the
// caller has already counted in wg. When build panics, abandon (if any)
// runs and the count is released before the panic goes on, so that Close
// does not wait for a writer that never ran.
func buildCounted[R any](wg *sync.WaitGroup, build func() R, abandon func()) R {
	built := false
	defer func() {
		if !built {
			if abandon != nil {
				abandon()
			}
			wg.Done()
		}
	}()
	var req R
	if build != nil {
		req = build()
	}
	built = true
	return req
}

// spike writes one spike snapshot.
func (m *Manager) spike(gpu int, req *SpikeRequest, at time.Time) {
	defer m.wg.Done()
	m.flush(gpu)
	m.save("spike", gpu, 0, m.spikeDir, baseName("spike", at, gpu), renderSpike(req), time.Now(), &m.stats.SpikesWritten)
}

// Stats returns a copy of the counters.
func (m *Manager) Stats() Stats {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.stats
	s.CrashesSuppressedByGPU = make(map[int]uint64, len(m.gpus))
	for gpu, st := range m.gpus {
		if st.suppressed > 0 {
			s.CrashesSuppressedByGPU[gpu] = st.suppressed
		}
	}
	return s
}

// Close refuses new requests, cancels the follow-ups not yet started, and
// waits for the snapshots being written until ctx is done. Then it kills the
// commands still running, lets the writers put what they have on disk (the
// stage-2 file says which commands were cut short), waits up to a second
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
	t := time.NewTimer(closeGrace)
	defer t.Stop()
	select {
	case <-done:
		return fmt.Errorf("close snapshots: diagnostics cut short: %w", ctx.Err())
	case <-t.C:
		return fmt.Errorf("close snapshots: writers still busy %s after cancelling: %w", closeGrace, ctx.Err())
	}
}

// flush calls Config.Flush; a failure is logged and the snapshot still taken.
func (m *Manager) flush(gpu int) {
	if err := m.cfg.Flush(gpu); err != nil {
		m.log.Warn("flush csv before snapshot failed", "gpu", gpu, "error", err)
	}
}

// written counts a file written in *count (a field of m.stats) and logs it;
// err, if any, is a late failure (directory fsync) after the file was
// already in place.
func (m *Manager) written(kind string, gpu, stage int, path string, t0 time.Time, err error, count *uint64) {
	m.mu.Lock()
	*count++
	m.mu.Unlock()
	m.log.Info("snapshot written", "kind", kind, "gpu", gpu, "stage", stage, "path", path, "took", time.Since(t0))
	if m.cfg.Written != nil {
		m.cfg.Written(kind, gpu, path)
	}
	if err != nil {
		m.log.Warn("snapshot written but not made durable", "kind", kind, "gpu", gpu, "path", path, "error", err)
	}
}

// save writes data to a new file dir/base.log (createNew) and accounts for
// it: counted in *count (a field of m.stats) and logged as written (work
// started at t0), or counted and logged as a failure. It returns the path, ""
// when nothing was written.
func (m *Manager) save(kind string, gpu, stage int, dir, base string, data []byte, t0 time.Time, count *uint64) string {
	path, err := m.createNew(dir, base, data)
	if path == "" {
		m.failed(kind, gpu, stage, err)
		return ""
	}
	m.written(kind, gpu, stage, path, t0, err, count)
	return path
}

// failed counts and logs a file that could not be written.
func (m *Manager) failed(kind string, gpu, stage int, err error) {
	m.mu.Lock()
	m.stats.Failures++
	m.mu.Unlock()
	m.log.Warn("snapshot failed", "kind", kind, "gpu", gpu, "stage", stage, "error", err)
}

// fill sets what the Manager owns in a header (GPU index, suppression count)
// and the title and time the caller left empty.
func (h *Header) fill(gpu int, suppressed uint64, title string, now time.Time) {
	h.GPUIndex = gpu
	h.Suppressed = suppressed
	if h.Title == "" {
		h.Title = title
	}
	if h.Time.IsZero() {
		h.Time = now
	}
}
