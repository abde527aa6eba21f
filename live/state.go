// Package live holds the daemon's published in-memory state: one view per GPU,
// updated once per sample at the end of the monitor's one-way pipeline
// (sample -> classify -> detect -> record -> publish) and by the poll loop when
// a GPU's sample misses its deadline, plus a host view assembled from counters
// when asked. Readers (the control socket, status, top, the metrics collector)
// copy views out and never wait on NVML: a GPU stuck in the driver is shown as
// hung by the poll loop, which is never stuck.
//
// Package live imports only the value packages (reading); monitor is the one
// producer and imports it, readers import it without importing monitor.
package live

import (
	"sync"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/action"
	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

// StateKind is what a GPU is doing as far as the daemon can tell.
type StateKind uint8

// The states of a GPU.
const (
	StateNotStarted StateKind = iota // no sample has come back yet
	StateAnswering                   // the last sample was answered
	StateHung                        // a sample is stuck inside an NVML call past the deadline
	StateLost                        // the driver reported the GPU lost
	StateFailing                     // the last sample failed (every call refused)
)

var stateNames = [...]string{StateNotStarted: "not started", StateAnswering: "ok", StateHung: "hung", StateLost: "lost", StateFailing: "failing"}

// String returns the state's name as status shows it ("ok", "hung", ...).
// An answering GPU reads "ok" there, a word the status document and its
// readers have kept since it was first written; the metrics say
// "answering".
func (k StateKind) String() string {
	if int(k) < len(stateNames) {
		return stateNames[k]
	}
	return "unknown"
}

// State is a GPU's state and since when it holds.
type State struct {
	Kind  StateKind
	Since time.Time // hung: when the stuck sample began; otherwise when the state was entered
	// SinceMono is, hung, when the stuck sample began on the publisher's
	// monotonic clock (Host.Mono's): the hang's age (HungFor) runs on it,
	// as the repair judge's does; Now less Since would turn negative or
	// huge at a step of the wall clock (chrony's makestep).
	SinceMono time.Duration
	// Function is the NVML function a hung GPU is stuck in.
	Function string
	// Err is why the last sample of a failing GPU failed.
	Err string
}

// LastCode is the last occurrence of a coded event (an Xid or a GPU recovery
// action). A zero Time means none was seen.
type LastCode struct {
	Code uint64
	Time time.Time
	Name string // the catalog's name for the code
}

// XidCount is how many times one Xid code was seen on a GPU.
type XidCount struct {
	Code  uint64
	Count uint64
}

// LastOp is a GPU's last operational event.
type LastOp struct {
	Time       time.Time // when it was received
	Severity   string    // reading.OpEvent.Severity
	Category   uint32
	Attributes string // reading.OpEvent.Attributes
	Critical   string // reading.OpEvent.Critical: "fatal", "uncontained", both, or ""
	// LegacyXid is the Xid of its legacy-Xid context; HasXid false: none.
	LegacyXid uint64
	HasXid    bool
}

// LastCPER is a GPU's (or the host's BERT) last CPER record.
type LastCPER struct {
	Time     time.Time // when it was read
	ID       uint64    // the record id
	Severity string    // as the cper package names it
	Recorded time.Time // the record's own time stamp; zero when it has none
}

// NamedCount is how many of one named kind were seen.
type NamedCount struct {
	Name  string
	Count uint64
}

// MaxCPERSeverities is how many CPER severities a GPU view counts one by
// one: UEFI defines four; a fifth (a number) and beyond count together.
const MaxCPERSeverities = 5

// MaxXidCodes is how many distinct Xid codes a GPU view counts one by one;
// further codes are counted together in GPU.XidsOther.
const MaxXidCodes = 16

// NumThrottleReasons is the number of named clocks event reasons
// (reading.ThrottleReasons); GPU.ThrottleTime is indexed like that table.
const NumThrottleReasons = len(reading.ThrottleReasons)

// GPU is one GPU's published view. It is a plain value: copying it is the
// way to read it.
type GPU struct {
	Info  reading.GPU
	State State
	// Sample is the latest answered sample; a zero Sample.Time means none yet.
	// When the GPU is hung, lost or failing it is the last good one, and
	// State says the values are stale.
	Sample reading.Sample

	Samples   uint64 // answered samples
	Failures  uint64 // failed or lost samples
	HungRows  uint64 // NVML_HUNG rows written
	Incidents uint64 // critical events (hang, failure, loss, Xid, recovery action)

	// FlagCount counts the rows that carried each flag kind, indexed by
	// reading.FlagKind; FlagLast is when each kind was last seen.
	FlagCount [reading.NumFlagKinds]uint64
	FlagLast  [reading.NumFlagKinds]time.Time

	LastXid      LastCode
	Xids         [MaxXidCodes]XidCount // in the order first seen; Count 0 ends the list
	XidsOther    uint64                // Xids whose code did not fit in Xids
	LastRecovery LastCode

	// OpEvents counts the GPU's operational events by severity, indexed
	// like reading.OpSeverities, the last for one nvml.h does not name;
	// OpCritical those fatal or uncontained (each raised an incident);
	// LastOp is the newest.
	OpEvents   [len(reading.OpSeverities) + 1]uint64
	OpCritical uint64
	LastOp     LastOp
	// CPER counts the GPU's CPER records by severity, in the order first
	// seen (Count 0 ends the list; beyond MaxCPERSeverities they count in
	// the last); LastCPER is the newest.
	CPER     [MaxCPERSeverities]NamedCount
	LastCPER LastCPER

	LastIncident       time.Time
	LastIncidentReason string
	// NewestSnapshot is the path of the newest crash snapshot file of this GPU.
	NewestSnapshot string

	// Processes is the slow tier's latest process read (about once a
	// second; never nil once the monitor runs). It is immutable and shared:
	// Processes.Good() is the last successful list when the current read is
	// hung or refused.
	Processes *reading.Procs

	// ThrottleTime is the time spent with each clocks event reason active,
	// indexed like reading.ThrottleReasons. Each answered sample adds the time
	// since the previous answered one (at most two intervals: a gap is not
	// attributed to anything).
	ThrottleTime [NumThrottleReasons]time.Duration

	// HealthLevel is the verdict of the latest health reading ("ok",
	// "warning", "critical"; "" before the first one) and HealthReasons
	// its reasons (shared, immutable); the outputs give Verdict, which
	// also weighs the state. Links is the latest per-link NVLink
	// reading (shared, immutable; nil: none).
	HealthLevel   string
	HealthReasons []string
	Links         *reading.NVLinks
	// RemapHist is the row remapper histogram as last read (shared,
	// immutable); nil: never read (not supported, or no remapping).
	RemapHist *reading.RemapHistogram
	// FanGuard is the fan guard's state (shared, immutable); nil: off.
	FanGuard *FanGuard

	// Action is the GPU's current repair action with its reasons, derived
	// by the monitor (anomaly.Repair) after each sample and event;
	// ActionSince is when it last changed. Ack is the last acknowledgement
	// of the board (zero Time: none).
	Action      action.Current
	ActionSince time.Time
	Ack         Ack
}

// Ack is an operator's acknowledgement of a GPU's action (`gpu-telemetry
// ack`): it clears the action that held then, until a new event.
type Ack struct {
	Time   time.Time
	Action action.Action // the action acknowledged
	Note   string
	By     string // who: the peer's user name (or uid)
}

// Observe takes an answered, failed or lost sample (never a hung row) into
// the view: state, latest values, flag counters and throttle time. interval
// is the sampling interval. It does not allocate.
func (g *GPU) Observe(s *reading.Sample, interval time.Duration) {
	for i := 0; i < s.Flags.Len(); i++ {
		k := s.Flags.At(i).Kind
		if int(k) < reading.NumFlagKinds {
			g.FlagCount[k]++
			g.FlagLast[k] = s.Time
		}
	}
	switch s.Status {
	case reading.StatusAnswered:
		g.accumulateThrottle(s, interval)
		g.Sample = *s
		g.Samples++
		g.setState(State{Kind: StateAnswering, Since: s.Time})
	case reading.StatusLost:
		g.Failures++
		g.setState(State{Kind: StateLost, Since: s.Time})
	case reading.StatusFailed:
		g.Failures++
		g.setState(State{Kind: StateFailing, Since: s.Time, Err: s.Err})
	}
}

// accumulateThrottle adds the time since the previous answered sample to
// every reason active in s.
func (g *GPU) accumulateThrottle(s *reading.Sample, interval time.Duration) {
	mask, ok := s.Values[reading.Throttle].Get()
	if !ok || g.Sample.Time.IsZero() || g.State.Kind != StateAnswering {
		return
	}
	dt := s.Time.Sub(g.Sample.Time)
	if dt <= 0 {
		return
	}
	dt = min(dt, 2*interval)
	for i, r := range reading.ThrottleReasons {
		if mask&r.Bit != 0 {
			g.ThrottleTime[i] += dt
		}
	}
}

// setState changes the state, keeping Since when the kind (and, for a
// failing GPU, the error) is unchanged.
func (g *GPU) setState(st State) {
	if g.State.Kind == st.Kind && g.State.Err == st.Err && g.State.Function == st.Function {
		return
	}
	g.State = st
}

// HungFor is how long a hung GPU's stuck call has lasted at mono (Host.Mono:
// the publisher's monotonic clock); 0 when it is not hung.
func (s State) HungFor(mono time.Duration) time.Duration {
	if s.Kind != StateHung {
		return 0
	}
	return max(mono-s.SinceMono, 0) // 0: a view read as the hang was published
}

// Hung marks the GPU hung in fn since since, sinceMono on the publisher's
// monotonic clock (the poll loop's deadline check).
func (g *GPU) Hung(fn string, since time.Time, sinceMono time.Duration) {
	g.setState(State{Kind: StateHung, Since: since, SinceMono: sinceMono, Function: fn})
}

// Lost marks the GPU lost since t (it vanished from the driver's enumeration).
func (g *GPU) Lost(t time.Time) { g.setState(State{Kind: StateLost, Since: t}) }

// Xid records an Xid seen at t with the catalog's name. It becomes the last
// Xid unless that one is newer (t is a kernel record's own time when it was
// read after the fact); it is counted either way.
func (g *GPU) Xid(code uint64, t time.Time, name string) {
	if !t.Before(g.LastXid.Time) {
		g.LastXid = LastCode{Code: code, Time: t, Name: name}
	}
	for i := range g.Xids {
		switch {
		case g.Xids[i].Count == 0:
			g.Xids[i] = XidCount{Code: code, Count: 1}
			return
		case g.Xids[i].Code == code:
			g.Xids[i].Count++
			return
		}
	}
	g.XidsOther++
}

// Recovery records a GPU recovery action seen at t, unless the last one
// recorded is newer (see Xid).
func (g *GPU) Recovery(action uint64, t time.Time, name string) {
	if !t.Before(g.LastRecovery.Time) {
		g.LastRecovery = LastCode{Code: action, Time: t, Name: name}
	}
}

// OpEvent records an operational event received at t; xid is its legacy
// Xid when hasXid.
func (g *GPU) OpEvent(t time.Time, op *reading.OpEvent, xid uint64, hasXid bool) {
	i := len(reading.OpSeverities)
	for j, name := range reading.OpSeverities {
		if name == op.Severity {
			i = j
		}
	}
	g.OpEvents[i]++
	if op.Critical != "" {
		g.OpCritical++
	}
	g.LastOp = LastOp{Time: t, Severity: op.Severity, Category: op.Category, Attributes: op.Attributes,
		Critical: op.Critical, LegacyXid: xid, HasXid: hasXid}
}

// CPERRecord records a CPER record read at t.
func (g *GPU) CPERRecord(r LastCPER) {
	g.LastCPER = r
	countNamed(g.CPER[:], r.Severity)
}

// countNamed counts one of name in counts (in the order first seen; the
// last entry takes every name beyond the others, as "other").
func countNamed(counts []NamedCount, name string) {
	for i := range counts {
		switch {
		case i == len(counts)-1 && counts[i].Name != name:
			counts[i].Name = "other"
			counts[i].Count++
			return
		case counts[i].Count == 0:
			counts[i] = NamedCount{Name: name, Count: 1}
			return
		case counts[i].Name == name:
			counts[i].Count++
			return
		}
	}
}

// Incident counts a critical event and returns its number on this GPU.
func (g *GPU) Incident(t time.Time, reason string) uint64 {
	g.Incidents++
	g.LastIncident, g.LastIncidentReason = t, reason
	return g.Incidents
}

// Slot holds one GPU's view. Writers update it in place under its lock;
// readers copy it out under the same lock, so every copy is consistent and a
// reader holds the lock only for the copy. A lock rather than an
// atomic.Pointer to a fresh value keeps the 100 ms path free of allocations.
type Slot struct {
	mu sync.Mutex
	g  GPU
	// hist is the GPU's history ring (ring.go), preallocated here: it has
	// its own lock, and is not copied with the view.
	hist History
}

// NewSlot returns a slot for a GPU with the given static facts.
func NewSlot(info reading.GPU) *Slot {
	return &Slot{g: GPU{Info: info}}
}

// Update runs f on the view under the lock. f must be short and must not
// block: readers wait for it.
func (s *Slot) Update(f func(g *GPU)) {
	s.mu.Lock()
	f(&s.g)
	s.mu.Unlock()
}

// Record takes an answered sample into the GPU's history ring (the monitor
// calls it after Update with the same sample; History.Add).
func (s *Slot) Record(smp *reading.Sample) { s.hist.Add(smp) }

// History returns the GPU's recent readings over span up to the second of
// end (History.Doc); nil when span is not positive.
func (s *Slot) History(end time.Time, span time.Duration) *HistoryDoc {
	return s.hist.Doc(end, span)
}

// Load copies the view into dst.
func (s *Slot) Load(dst *GPU) {
	s.mu.Lock()
	*dst = s.g
	s.mu.Unlock()
}

// Get returns a copy of the view.
func (s *Slot) Get() GPU {
	var g GPU
	s.Load(&g)
	return g
}
