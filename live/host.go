package live

import (
	"sync/atomic"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/action"
	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

// Host is the host-level view, assembled from the daemon's counters about
// once a second off the 100 ms path and published on the Board.
type Host struct {
	Now      time.Time     // when the view was read (Board.ViewInto)
	Mono     time.Duration // Now on the publisher's monotonic clock, which a hang's age (State.HungFor) runs on: a step of the wall clock moves Now, not Mono
	Start    time.Time     // when the daemon started
	Version  string
	Identity reading.Identity // the host's name, machine id, boot id
	System   reading.System
	Interval time.Duration
	Deadline time.Duration

	// Cadence is the tick period figures; the counts of ticks run and
	// skipped are in Counters (ticks, tick_overruns).
	Cadence Cadence

	// RowsDroppedRecent is how much rows_dropped (in Counters, with
	// rows_written) grew in the last RecentWindow (as far as the daemon
	// has run).
	RowsDroppedRecent uint64
	DiskPaused        bool
	// Kmsg is the kernel-log reader's state: "following", "disabled",
	// "permission denied", "unavailable: <error>" or "stopped: <error>".
	Kmsg string
	// Events is the NVML event stream's state: "watching", "unavailable: <error>", ...
	Events string

	LastIncident Incident

	// Missing are the boards of the previous run not enumerated now whose
	// repair action is not none (a board a warm reboot did not bring
	// back), by their previous index; fixed at start.
	Missing []MissingBoard
	// GPUsMissing is how many GPUs are missing since this start: the
	// previous run's boards not enumerated now, or the shortfall from
	// --expect-gpus, whichever is more; fixed at start.
	GPUsMissing int
	// BERT is the host firmware's boot error record (ACPI BERT) this run
	// read; nil: none (or none new this boot). Shared, immutable.
	BERT *LastCPER

	// Fabric is which of the NVLink fabric's daemons run, as last looked
	// for (nil: no GPU reports a fabric).
	Fabric []reading.FabricService

	// Pacer is the NVML pacer's state now: how far it stretches the slow
	// columns because NVML is too slow for the interval, and its tick
	// times. Its counts (nvml_stretches, busy_skips) are in Counters.
	Pacer Pacer
	// LogLines is what the events.log and summary.log writers hold back now
	// while their files cannot be written. The lines delayed and lost are
	// in Counters (log_lines_delayed, log_lines_failed,
	// log_lines_lost_at_exit).
	LogLines LogLines

	// Counters is every counter of the daemon worth showing, losses first.
	// Each one of lost, dropped, skipped, failed or suppressed work has
	// Loss set; status, summary.log and the metrics walk this table. It is
	// the only place a count is: the fields above hold what is not one.
	Counters []Counter
}

// Counter returns the value of the counter named name; ok is false when the
// daemon has no such counter (absent, never 0).
func (h *Host) Counter(name string) (v uint64, ok bool) { return counterValue(h.Counters, name) }

// The counters the views (status text, top) and the monitor read by name.
// Each is a row of the daemon's counter table: monitor's tests check every
// name in ViewCounters against it, so a rename cannot leave a view reading
// nothing.
const (
	CounterTicks           = "ticks"
	CounterTickOverruns    = "tick_overruns"
	CounterBusySkips       = "busy_skips"
	CounterRowsWritten     = "rows_written"
	CounterRowsDropped     = "rows_dropped"
	CounterLogLinesDelayed = "log_lines_delayed"
)

// ViewCounters lists the counters read by name (the constants above).
var ViewCounters = []string{CounterTicks, CounterTickOverruns, CounterBusySkips, CounterRowsWritten,
	CounterRowsDropped, CounterLogLinesDelayed}

// counterValue is the value of the counter named name in cs; ok is false
// when cs has none.
func counterValue(cs []Counter, name string) (v uint64, ok bool) {
	for _, c := range cs {
		if c.Name == name {
			return c.Value, true
		}
	}
	return 0, false
}

// RecentWindow is the span of the "recent" figures (RowsDroppedRecent) and
// of the status check's warnings and criticals.
const RecentWindow = 10 * time.Minute

// Cadence describes the poll loop's tick periods over the last complete
// window (or the current one until a window completed).
type Cadence struct {
	Window time.Duration // the span the period figures cover
	Mean   time.Duration // mean period; 0 when no period was measured
	P99    time.Duration // 99th percentile period, to the histogram's resolution
	Max    time.Duration
}

// Pacer is the NVML pacer's state (sampler.PacerStats less its counts).
type Pacer struct {
	Level int // 0: every column at its normal rate; each step reads the slow columns less often
	// TickNVML is the median time from the first GPU's sample start to the
	// last one's end over the last second; LastLate how late the last GPU's
	// sample ended after the first one's. Absent until first measured.
	TickNVML, LastLate reading.Opt[time.Duration]
}

// LogLines is the line logs' (events.log, summary.log) lines held back
// now, summed over both.
type LogLines struct {
	Waiting int // lines held back now, to be written when the file takes them
}

// Incident is the last critical event on any GPU. A zero Time means none.
type Incident struct {
	Time   time.Time
	GPU    int // -1: a GPU that is not monitored
	Reason string
}

// Counter is one named counter.
type Counter struct {
	Name  string `json:"name"` // snake_case; the metric is gpu_telemetry_<Name>_total
	Help  string `json:"help"` // one line: what is counted
	Value uint64 `json:"value"`
	Loss  bool   `json:"loss"` // counts lost, dropped, skipped, failed or suppressed work
}

// View is one consistent reading of the whole daemon: the host and a copy of
// every GPU's view.
type View struct {
	Host Host
	GPUs []GPU
}

// Board is where the monitor publishes and readers read: each GPU's slot,
// which its pipeline updates, and the host view, which the poll loop
// publishes as an immutable value (PublishHost). A reader copies what is
// there and never calls back into the publisher.
type Board struct {
	slots []*Slot
	host  func() Host          // NewBoard's host view source; nil: published
	pub   atomic.Pointer[Host] // the host view published last (PublishHost)
	mono  func() time.Duration // the publisher's monotonic clock (Host.Mono), when published
	// events are the host's last events.log lines (events.go).
	events Events
}

// NewBoard returns a board over the GPUs' slots whose host view host
// assembles at each read: a stand-in for the publisher in readers' tests.
func NewBoard(slots []*Slot, host func() Host) *Board {
	return &Board{slots: slots, host: host}
}

// NewPublishedBoard returns a board over the GPUs' slots whose host view is
// the one published last (PublishHost); the zero Host until the first.
// mono is the publisher's monotonic clock, the one its GPUs' hangs began on
// (State.SinceMono).
func NewPublishedBoard(slots []*Slot, mono func() time.Duration) *Board {
	return &Board{slots: slots, mono: mono}
}

// PublishHost makes h the host view that readers get from now on, its Now
// and Mono the time each reads it. h is shared with every reader: neither the
// publisher nor a reader may change it, or what it points to (Counters),
// afterwards.
func (b *Board) PublishHost(h Host) { b.pub.Store(&h) }

// Event keeps an events.log line (its newline, if any, left off) among the
// host's last ones that a request may ask for (Events).
func (b *Board) Event(line string) {
	if n := len(line); n > 0 && line[n-1] == '\n' {
		line = line[:n-1]
	}
	b.events.Add(line)
}

// Events returns the host's last n events.log lines, newest first.
func (b *Board) Events(n int) []string { return b.events.Newest(n) }

// History returns GPU i's (the board's i-th slot's) recent readings over
// span up to the second of end; nil for a span not positive or no such
// GPU.
func (b *Board) History(i int, end time.Time, span time.Duration) *HistoryDoc {
	if i < 0 || i >= len(b.slots) {
		return nil
	}
	return b.slots[i].History(end, span)
}

// View copies the current state. It takes each slot's lock only for a copy
// and never waits on NVML.
func (b *Board) View() View {
	var v View
	b.ViewInto(&v)
	return v
}

// ViewInto copies the current state into v, reusing v.GPUs: a reader that
// asks again and again (a scrape, a status answer) keeps one View instead
// of making a GPU array of garbage each time.
func (b *Board) ViewInto(v *View) {
	if b.host != nil {
		v.Host = b.host()
	} else if h := b.pub.Load(); h != nil {
		v.Host = *h
		v.Host.Now, v.Host.Mono = time.Now(), b.mono()
	} else {
		v.Host = Host{Now: time.Now(), Mono: b.mono()}
	}
	if cap(v.GPUs) < len(b.slots) {
		v.GPUs = make([]GPU, len(b.slots))
	}
	v.GPUs = v.GPUs[:len(b.slots)]
	for i, s := range b.slots {
		s.Load(&v.GPUs[i])
	}
}

// MissingBoard is a board of the previous run that is not enumerated now,
// with its repair action.
type MissingBoard struct {
	Index  int // its index in the previous run
	UUID   string
	Action action.Current
}
