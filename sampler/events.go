package sampler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

// EventDef is an NVML event type the sampler registers: its name in logs,
// the kind of event it makes and, for a hardware health event, whether it
// is critical (an incident and a crash snapshot).
type EventDef struct {
	Type     uint64
	Name     string
	Kind     reading.EventKind
	Critical bool
}

// watched is every event type registered on a GPU that supports it: Xid
// critical errors, GPU recovery actions, P-state and clock changes, and
// the hardware health events (the polled health counters are their
// backstop). The order decides an event's kind should one carry several
// types (NVML sends one): an Xid first.
var watched = []EventDef{
	{uint64(nvml.EventTypeXidCriticalError), "Xid", reading.EventXid, false},
	{uint64(nvml.EventTypeGpuRecoveryAction), "GpuRecoveryAction", reading.EventRecovery, false},
	{uint64(nvml.EventTypePState), "PState", reading.EventPState, false},
	{uint64(nvml.EventTypeClock), "Clock", reading.EventClock, false},
	{uint64(nvml.EventTypeSingleBitEccError), "SingleBitEccError", reading.EventHealth, false},
	{uint64(nvml.EventTypeDoubleBitEccError), "DoubleBitEccError", reading.EventHealth, true},
	{uint64(nvml.EventTypeDramRetirementEvent), "DramRetirementEvent", reading.EventHealth, false},
	{uint64(nvml.EventTypeDramRetirementFailure), "DramRetirementFailure", reading.EventHealth, true},
	{uint64(nvml.EventTypeGpuUnavailableError), "GpuUnavailableError", reading.EventHealth, true},
}

// WatchedEvents is the mask of every watched type.
var WatchedEvents = func() (m uint64) {
	for _, w := range watched {
		m |= w.Type
	}
	return m
}()

var (
	// ErrEventsClosed is returned by EventStream.Next once the stream has
	// ended: nothing of it is inside an NVML call any more.
	ErrEventsClosed = errors.New("event stream closed")
	// errNoEventSets and errNoneRegistered (the GPU's supported types, once
	// read, hold none of WatchedEvents) are permanent; a failed query is
	// retried like any failed open.
	errNoEventSets    = errors.New("the driver lacks NVML event sets")
	errNoneRegistered = errors.New("no GPU supports the watched NVML events")
	// errNoOpEvents: the driver predates GPU operational events (R615).
	errNoOpEvents = errors.New("the driver lacks nvmlEventSetRegisterGpuOperationalEvents_v1 and nvmlEventSetWait_v3 (R615+)")
)

// opEventer is an event stream that may hold a GPU's operational events
// too (the native one): nil when subscribed, else why not.
type opEventer interface{ opEvents() error }

// EventStream delivers the NVML events of one event set.
type EventStream interface {
	// Next blocks until an event arrives. A failed wait is returned as an
	// error and the stream then ends by itself. ErrEventsClosed means the
	// stream has ended and its set is freed: no NVML call of it is still
	// running, known without a timeout. A stream stuck in NVML never ends.
	Next() (reading.Event, error)
	// Close asks the stream to end (within about a second, unless NVML
	// holds its wait). Safe from any goroutine, more than once.
	Close()
	// Masks returns the event types registered per GPU, in Host.GPUs order.
	Masks() []uint64
}

// Event-stream timing.
const (
	// lateGPUPoll: how often GPUs not yet registered (stuck at start, or
	// in a sample) are checked, only while some are.
	lateGPUPoll = 2 * time.Second
	// stuckSample: a sample this long in the driver is stuck (a sample
	// takes tens of microseconds; the default hang deadline is 1 s). Its
	// GPU's set is not opened meanwhile: that would park one more thread
	// in the hung driver.
	stuckSample = time.Second
	// The back-off between reopenings of a failed set; a stream that ran
	// eventRetryReset resets it.
	eventRetryMin   = time.Second
	eventRetryMax   = time.Minute
	eventRetryReset = time.Minute
)

// registering counts the event-set registrations (supported types, set
// creation, device registration) in progress in this process: none is
// bounded, and nvmlShutdown must not run under one (EventsIdle).
var registering atomic.Int64

// FollowEvents calls on for every NVML event of the host's GPUs until ctx is
// done. Each GPU has an event set of its own, registered once the GPU
// answers (static facts read, handle had), never while its sample is stuck
// in the driver, and reopened with back-off when it fails, only after the
// previous one has ended (the stream says when). Registration calls cannot
// be bounded, so a GPU that hangs holds back only its own set. It stops
// early, for good, only when the driver lacks event sets or every GPU has
// answered and none supports the watched types. on is called from one
// goroutine at a time; state, if not nil, is told what the sets do
// ("waiting for a GPU to answer", "watching" while every set opened is,
// "reopening after: ...", "unavailable: ..."). FollowEvents returns once
// every set it opened has ended; a registration still inside the driver is
// not waited for (EventsIdle counts it; the set it opens late is closed at
// once).
func (h *Host) FollowEvents(ctx context.Context, log *slog.Logger, on func(reading.Event), state func(string)) {
	if state == nil {
		state = func(string) {}
	}
	var onMu, stateMu sync.Mutex
	deliver := func(e reading.Event) {
		onMu.Lock()
		defer onMu.Unlock()
		on(e)
	}
	tell := func(s string) {
		stateMu.Lock()
		defer stateMu.Unlock()
		state(s)
	}
	// The events' state is the worst of the GPUs' sets' (worstState), so
	// one set watching again does not hide another's reopening; a GPU not
	// yet handed its set is waiting: its Xids cannot arrive.
	perGPU := slices.Repeat([]string{waitingState}, len(h.GPUs))
	tellGPU := func(i int) func(string) {
		return func(s string) {
			stateMu.Lock()
			defer stateMu.Unlock()
			perGPU[i] = s
			if agg := worstState(perGPU); agg != "" {
				state(agg)
			}
		}
	}
	var sets openSets
	defer sets.wait() // after cancel: the sets close
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	results := make(chan error, len(h.GPUs)) // one per GPU at most: never blocks
	handed := make([]bool, len(h.GPUs))      // given its set (registered, or found to support nothing)
	running := 0
	tick := time.NewTicker(lateGPUPoll)
	defer tick.Stop()
	for {
		var idx []int
		for i, g := range h.GPUs {
			if handed[i] || !g.FactsKnown() {
				continue
			}
			handed[i] = true
			idx = append(idx, g.Info().Index)
			running++
			go func() {
				err := h.followSet(ctx, log, i, &sets, deliver, tellGPU(i))
				if err != nil {
					tellGPU(i)("") // left out for good: not part of the state
				}
				results <- err
			}()
		}
		if len(idx) > 0 && running > len(idx) {
			log.Info("a GPU answered late; registering its NVML events", "gpus", fmt.Sprint(idx))
		}
		if running == 0 && !slices.Contains(handed, true) {
			tell(waitingState) // every GPU is stuck at start
		}
		select {
		case <-ctx.Done():
			return
		case err := <-results:
			running--
			switch {
			case errors.Is(err, errNoEventSets),
				errors.Is(err, errNoneRegistered) && running == 0 && !slices.Contains(handed, false):
				log.Warn("NVML events unavailable; Xids come from the kernel log only", "error", err)
				tell("unavailable: " + err.Error())
				return
			case errors.Is(err, errNoneRegistered) && running == 0:
				tell("waiting for a GPU that supports them")
			}
		case <-tick.C:
		}
		if !slices.Contains(handed, false) {
			tick.Stop() // nothing left to wait for: no timer waking the process
		}
	}
}

// waitingState is a GPU's while it has not answered since the start.
const waitingState = "waiting for a GPU to answer"

// worstState is the events' state from the GPUs' sets' ("": none yet, or
// left out): "watching" only when every set that has one is, else the
// first other state.
func worstState(perGPU []string) string {
	agg := ""
	for _, s := range perGPU {
		switch s {
		case "":
		case "watching":
			agg = s
		default:
			return s
		}
	}
	return agg
}

// openSets tracks the sets being drained, so that FollowEvents returns only
// once each has ended. A set registered after wait began is not tracked:
// its opener closes and drains it alone.
type openSets struct {
	mu     sync.Mutex
	closed bool
	wg     sync.WaitGroup
}

// enter tracks one more set; false once wait has begun.
func (o *openSets) enter() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed {
		return false
	}
	o.wg.Add(1)
	return true
}

// wait stops tracking and waits for the tracked sets to end.
func (o *openSets) wait() {
	o.mu.Lock()
	o.closed = true
	o.mu.Unlock()
	o.wg.Wait()
}

// followSet follows the event set of GPU i, opening it again with back-off
// when it fails or was registered only in part (partialer), until ctx is
// done (nil); at once, uncounted, when it was opened without the GPU's UUID
// and the UUID is known now (closeWhenNamed). It returns errNoEventSets or
// errNoneRegistered when the set cannot hold the GPU. The first failed open
// of a run of them is logged at Warn, the rest at Debug (a GPU that stays
// lost fails every minute for the rest of the run); each is counted.
func (h *Host) followSet(ctx context.Context, log *slog.Logger, i int, sets *openSets, on func(reading.Event), state func(string)) error {
	g := h.GPUs[i]
	retry := eventRetryMin
	logged, failing := false, false
	fail := func(msg string, err error) {
		h.reg.Inc(eventFailures)
		level := slog.LevelWarn
		if failing {
			level = slog.LevelDebug
		}
		failing = true
		log.Log(ctx, level, msg, "gpu", g.Info().Index, "error", err, "retry_in", retry)
		state("reopening after: " + err.Error())
	}
	for ctx.Err() == nil {
		if !h.waitAnswering(ctx, log, g) {
			return nil
		}
		// Read once, before the registration: the set is subscribed by it,
		// and reopened for it when it was unknown (closeWhenNamed).
		uuid := g.Info().UUID
		registering.Add(1)
		st, err := h.watch(i, uuid)
		registering.Add(-1)
		if errors.Is(err, errNoEventSets) || errors.Is(err, errNoneRegistered) {
			return err
		}
		msg := "cannot open NVML events; trying again"
		if err == nil {
			if !sets.enter() { // registered after FollowEvents ended: ctx is done
				h.drain(ctx, st, func(reading.Event) {})
				return nil
			}
			if !logged {
				logged = true
				log.Info("NVML events registered", "gpu", g.Info().Index, "types", EventTypeNames(st.Masks()[i]))
				h.logOpEvents(log, g.Info().Index, st)
			}
			// A set registered in part runs (its types' events arrive)
			// until the back-off has passed, then is opened again whole.
			var whole *time.Timer
			if p, ok := st.(partialer); ok && p.unregistered() != nil {
				fail("NVML events registered in part; opening them again", p.unregistered())
				whole = time.AfterFunc(retry, st.Close)
			} else {
				failing = false
				state("watching")
			}
			opened := time.Now()
			renamed := closeWhenNamed(g, st, uuid)
			err = h.drain(ctx, st, on)
			sets.wg.Done()
			again := whole != nil && !whole.Stop() // closed by it
			if ctx.Err() != nil {
				renamed()
				return nil
			}
			if renamed() && err == nil {
				// Not a failure: no count, no back-off.
				log.Info("the GPU's UUID is known now; opening its NVML events again to subscribe its operational events",
					"gpu", g.Info().Index, "uuid", g.Info().UUID)
				logged = false
				continue
			}
			if again && err == nil { // the back-off has passed while it ran
				retry = min(2*retry, eventRetryMax)
				continue
			}
			if err == nil {
				err = errors.New("the event thread stopped")
			}
			if whole == nil && time.Since(opened) >= eventRetryReset {
				retry = eventRetryMin
			}
			msg = "NVML event stream failed; opening it again"
		}
		fail(msg, err)
		if !sleepCtx(ctx, retry) {
			return nil
		}
		retry = min(2*retry, eventRetryMax)
	}
	return nil
}

// partialer is an event stream whose registration may have left types out
// for a reason other than the GPU not supporting them (the native one).
type partialer interface {
	// unregistered says why some types were left out; nil when none was.
	unregistered() error
}

// closeWhenNamed closes st, opened with uuid "" (read at start, the UUID
// failed), once g's UUID is known (GPU.readIdentity): the GPU's operational
// events are subscribed by UUID, so its set is opened again with it. Not
// where the driver lacks operational events. stop ends the watch and
// reports whether it closed st.
func closeWhenNamed(g *GPU, st EventStream, uuid string) (stop func() bool) {
	if o, ok := st.(opEventer); uuid != "" || ok && errors.Is(o.opEvents(), errNoOpEvents) {
		return func() bool { return false }
	}
	quit, done := make(chan struct{}), make(chan struct{})
	closed := false
	go func() {
		defer close(done)
		select {
		case <-g.named:
			// named closes once: a UUID published "" after it (readStatic
			// keeps one it had) must not close each set opened since.
			if closed = g.Info().UUID != ""; closed {
				st.Close()
			}
		case <-quit:
		}
	}()
	return func() bool {
		close(quit)
		<-done
		return closed
	}
}

// logOpEvents says, at a GPU's first registration, whether its operational
// events are subscribed too; a driver without them is said once a process.
func (h *Host) logOpEvents(log *slog.Logger, gpu int, st EventStream) {
	o, ok := st.(opEventer)
	if !ok {
		return
	}
	switch err := o.opEvents(); {
	case err == nil:
		log.Info("GPU operational events subscribed", "gpu", gpu)
	case errors.Is(err, errNoOpEvents):
		h.opLacks.Do(func() {
			log.Info("driver lacks GPU operational events; Xids come from the NVML Xid events and the kernel log", "error", err)
		})
	default:
		log.Info("GPU operational events refused; Xids come from the NVML Xid events and the kernel log", "gpu", gpu, "error", err)
	}
}

// waitAnswering waits while g's sample is stuck in the driver, logging the
// first wait of each stall; false if ctx ended first.
func (h *Host) waitAnswering(ctx context.Context, log *slog.Logger, g *GPU) bool {
	for told := false; ; told = true {
		fn, since, ok := g.InFlight()
		if !ok || time.Since(since) < stuckSample {
			return true
		}
		if !told {
			log.Warn("GPU stuck in the driver; its NVML events are registered once it answers",
				"gpu", g.Info().Index, "function", fn.String())
		}
		if !sleepCtx(ctx, lateGPUPoll) {
			return false
		}
	}
}

// drain delivers st's events until it has ended (ctx being done ends it)
// and returns its first error.
func (h *Host) drain(ctx context.Context, st EventStream, on func(reading.Event)) (failed error) {
	stop := context.AfterFunc(ctx, st.Close)
	defer stop()
	for {
		e, err := st.Next()
		switch {
		case err == nil:
			on(e)
		case errors.Is(err, ErrEventsClosed):
			return failed
		case failed == nil:
			failed = err
		}
	}
}

// watch opens an event set holding GPU i, for the WatchedEvents it
// supports, and its operational events when uuid (its UUID) is known. Call
// it counted in registering: the calls are not bounded.
func (h *Host) watch(i int, uuid string) (EventStream, error) {
	if h.openEvents == nil && (!h.Syms.Has(FnEventSetCreate) || !h.Syms.Has(FnRegisterEvents) || !h.Syms.Has(FnEventSetWait)) {
		return nil, errNoEventSets
	}
	g := h.GPUs[i]
	supported := WatchedEvents
	if h.Syms.Has(FnSupportedEvents) {
		s, ret := g.Device().GetSupportedEventTypes()
		if ret != nvml.SUCCESS { // not an answer about the GPU: asked again at the next reopen
			return nil, fmt.Errorf("nvmlDeviceGetSupportedEventTypes: %s", retText(ret))
		}
		supported = s
	}
	masks := make([]uint64, len(h.GPUs))
	masks[i] = supported & WatchedEvents
	if masks[i] == 0 {
		return nil, errNoneRegistered
	}
	if h.openEvents != nil {
		return h.openEvents(masks)
	}
	if _, native := h.lib.(*NVML); !native {
		return nil, fmt.Errorf("%w (not the real library)", errNoEventSets)
	}
	return h.watchNative(i, masks[i], uuid)
}

// sleepCtx waits d; false if ctx ended first.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}

// makeEvent classifies one NVML event for the GPU with index idx. NVML
// gives an Xid's code and no text: reading.Event.Xid stays zero, as the
// catalog's explanation of an NVML report expects.
func makeEvent(gpus []*GPU, idx int, typ, data uint64) reading.Event {
	ev := reading.Event{Time: time.Now(), GPU: -1, Source: reading.SourceNVML, NVMLType: typ, Data: data}
	for _, g := range gpus {
		if info := g.Info(); info.Index == idx {
			ev.GPU, ev.BusID = info.Index, info.BusID
			break
		}
	}
	ev.Kind = reading.EventOther
	if i := slices.IndexFunc(watched, func(w EventDef) bool { return typ&w.Type != 0 }); i >= 0 {
		ev.Kind = watched[i].Kind
	}
	return ev
}

// HealthEvent returns the definition of health event type typ.
func HealthEvent(typ uint64) (EventDef, bool) {
	for _, w := range watched {
		if typ&w.Type != 0 && w.Kind == reading.EventHealth {
			return w, true
		}
	}
	return EventDef{}, false
}

// EventTypeNames returns the names of the watched types in mask.
func EventTypeNames(mask uint64) string {
	var names []string
	for _, w := range watched {
		if mask&w.Type != 0 {
			names = append(names, w.Name)
		}
	}
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, "|")
}
