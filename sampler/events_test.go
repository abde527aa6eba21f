package sampler

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpu-telemetry/gpu-telemetry/internal/counters"
	"github.com/gpu-telemetry/gpu-telemetry/internal/kclock"
	"github.com/gpu-telemetry/gpu-telemetry/reading"
	"github.com/gpu-telemetry/gpu-telemetry/sampler/fakenvml"
)

// fakeStream is an EventStream the test drives: it sends events or errors
// and decides when the stream has ended (as evthread.c's thread does by
// closing its socket).
type fakeStream struct {
	masks  []uint64
	recs   chan fakeRec
	ended  chan struct{}
	endOne sync.Once
	closes chan struct{} // closed at the first Close
	clOnce sync.Once
	// partial: the registration left types out (partialer).
	partial error
}

type fakeRec struct {
	ev  reading.Event
	err error
}

func newFakeStream(masks []uint64) *fakeStream {
	return &fakeStream{masks: masks, recs: make(chan fakeRec, 8), ended: make(chan struct{}), closes: make(chan struct{})}
}

func (s *fakeStream) Next() (reading.Event, error) {
	select {
	case r := <-s.recs:
		return r.ev, r.err
	case <-s.ended:
		return reading.Event{}, ErrEventsClosed
	}
}

func (s *fakeStream) unregistered() error { return s.partial }

func (s *fakeStream) Close()          { s.clOnce.Do(func() { close(s.closes) }) }
func (s *fakeStream) Masks() []uint64 { return s.masks }
func (s *fakeStream) end()            { s.endOne.Do(func() { close(s.ended) }) }

func (s *fakeStream) isClosed() bool {
	select {
	case <-s.closes:
		return true
	default:
		return false
	}
}

// eventHost is a host with n GPUs; late[i] GPUs have not answered yet (their
// static facts are still being read) until answer(i).
type eventHost struct {
	h       *Host
	mu      sync.Mutex
	streams []*fakeStream
	got     []reading.Event
	states  []string
	log     *slog.Logger // nil: discarded
}

// stuckEventHost is an event host of two GPUs whose GPU 0 (returned) has
// been stuck in a sample for stuckSample.
func stuckEventHost(t *testing.T) (*eventHost, *GPU) {
	t.Helper()
	e := newEventHost(t, false, false)
	g := e.h.GPUs[0]
	g.started(time.Now())
	g.begin(FnFanSpeed)
	time.Sleep(stuckSample)
	return e, g
}

func newEventHost(t *testing.T, late ...bool) *eventHost {
	t.Helper()
	syms := LookupSymbols(func(string) error { return nil })
	e := &eventHost{h: &Host{Syms: syms, reg: counters.New()}}
	for i, l := range late {
		g := NewGPU(reading.GPU{Index: i}, fakenvml.NewDev(), &e.h.Syms, Config{}, kclock.Clock{}, e.h.reg, nil)
		if l {
			g.staticDone = make(chan struct{})
		}
		e.h.GPUs = append(e.h.GPUs, g)
	}
	e.h.openEvents = e.open
	return e
}

// open is the host's openEvents: a new fake stream, kept.
func (e *eventHost) open(masks []uint64) (EventStream, error) {
	s := newFakeStream(masks)
	e.mu.Lock()
	e.streams = append(e.streams, s)
	e.mu.Unlock()
	return s, nil
}

func (e *eventHost) answer(i int) { close(e.h.GPUs[i].staticDone) }

func (e *eventHost) opened() []*fakeStream {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]*fakeStream(nil), e.streams...)
}

func (e *eventHost) events() []reading.Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]reading.Event(nil), e.got...)
}

func (e *eventHost) reported() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.states...)
}

// run runs FollowEvents until ctx ends, keeping the events and, with
// keepStates, the states it reports; without, it passes no state callback
// (nil, as a caller that does not want them does). The channel is closed when
// FollowEvents has returned.
func (e *eventHost) run(ctx context.Context, keepStates bool) <-chan struct{} {
	var state func(string)
	if keepStates {
		state = func(s string) {
			e.mu.Lock()
			e.states = append(e.states, s)
			e.mu.Unlock()
		}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		e.h.FollowEvents(ctx, cmp.Or(e.log, slog.New(slog.DiscardHandler)), func(ev reading.Event) {
			e.mu.Lock()
			e.got = append(e.got, ev)
			e.mu.Unlock()
		}, state)
	}()
	return done
}

// follow runs FollowEvents, with no state callback, until the returned stop
// is called.
func (e *eventHost) follow() (stop func()) { return e.start(false) }

// followStates is follow keeping the states FollowEvents reports.
func (e *eventHost) followStates() (stop func()) { return e.start(true) }

func (e *eventHost) start(keepStates bool) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := e.run(ctx, keepStates)
	return func() {
		cancel()
		for _, s := range e.opened() {
			s.end()
		}
		<-done
	}
}

// delivered lets FollowEvents pass on what the test sent and checks that n
// events have reached its callback in all.
func (e *eventHost) delivered(t *testing.T, n int) []reading.Event {
	t.Helper()
	synctest.Wait()
	got := e.events()
	if len(got) != n {
		t.Fatalf("%d events delivered, want %d: %+v", len(got), n, got)
	}
	return got
}

func xid(gpu int) reading.Event {
	return reading.Event{GPU: gpu, Kind: reading.EventXid, Source: reading.SourceNVML, Data: 62}
}

// Every GPU is stuck at start: no set is opened (nothing could be
// registered), and the first GPU that answers is registered.
func TestFollowEventsWhenEveryGPUIsLate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEventHost(t, true, true)
		stop := e.follow()
		defer stop()
		time.Sleep(10 * time.Second)
		synctest.Wait()
		if n := len(e.opened()); n != 0 {
			t.Fatalf("%d event sets opened before any GPU answered", n)
		}
		e.answer(1)
		time.Sleep(lateGPUPoll)
		synctest.Wait()
		s := e.opened()
		if len(s) != 1 || s[0].masks[0] != 0 || s[0].masks[1] != fakeWatched() {
			t.Fatalf("after GPU 1 answered: %d sets, masks %v", len(s), s[0].masks)
		}
		s[0].recs <- fakeRec{ev: xid(1)}
		if got := e.delivered(t, 1); got[0].GPU != 1 {
			t.Fatalf("event delivered for GPU %d, want 1", got[0].GPU)
		}
		// GPU 0 answers later: it gets a set of its own, and GPU 1's set is
		// left alone (closing it would lose GPU 1's events meanwhile).
		e.answer(0)
		time.Sleep(lateGPUPoll)
		synctest.Wait()
		s = e.opened()
		if len(s) != 2 || s[1].masks[0] != fakeWatched() || s[1].masks[1] != 0 {
			t.Fatalf("after GPU 0 answered: %d sets", len(s))
		}
		if s[0].isClosed() {
			t.Fatalf("GPU 1's set was closed when GPU 0 answered")
		}
		s[1].recs <- fakeRec{ev: xid(0)}
		s[0].recs <- fakeRec{ev: xid(1)}
		e.delivered(t, 3)
	})
}

// The driver lacks event sets: FollowEvents stops at once, for good.
func TestFollowEventsWithoutEventSets(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEventHost(t, false, true)
		e.h.openEvents = func([]uint64) (EventStream, error) { return nil, errNoEventSets }
		<-e.run(context.Background(), true)
		if states := e.reported(); len(states) == 0 || states[len(states)-1] != "unavailable: the driver lacks NVML event sets" {
			t.Fatalf("states %q", states)
		}
	})
}

// A failed wait ends the stream; the next one is opened only once the failed
// one has ended, however long that takes, and after the back-off (a hand-off by a
// timing margin gave up on events for good).
func TestFollowEventsReopensOnlyAfterTheFailedStreamEnded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEventHost(t, false)
		stop := e.follow()
		defer stop()
		synctest.Wait()
		s := e.opened()
		if len(s) != 1 {
			t.Fatalf("%d sets opened", len(s))
		}
		s[0].recs <- fakeRec{err: errors.New("nvmlEventSetWait: Unknown Error")}
		// The failed set's thread is stuck in the driver for a minute.
		time.Sleep(time.Minute)
		synctest.Wait()
		if n := len(e.opened()); n != 1 {
			t.Fatalf("a new set was opened while the failed one had not ended (%d sets)", n)
		}
		s[0].end()
		synctest.Wait()
		if n := len(e.opened()); n != 1 {
			t.Fatalf("reopened without back-off")
		}
		if n := e.h.reg.Load(eventFailures); n != 1 {
			t.Errorf("EventFailures = %d after one failed stream, want 1", n)
		}
		time.Sleep(eventRetryMin)
		synctest.Wait()
		s = e.opened()
		if len(s) != 2 {
			t.Fatalf("not reopened after the back-off: %d sets", len(s))
		}
		// A second failure right away doubles the back-off.
		s[1].recs <- fakeRec{err: errors.New("nvmlEventSetWait: Unknown Error")}
		s[1].end()
		time.Sleep(2*eventRetryMin - time.Millisecond)
		synctest.Wait()
		if n := len(e.opened()); n != 2 {
			t.Fatalf("second reopen before 2 s: %d sets", n)
		}
		time.Sleep(time.Millisecond)
		synctest.Wait()
		s = e.opened()
		if len(s) != 3 {
			t.Fatalf("second reopen missing: %d sets", len(s))
		}
		s[2].recs <- fakeRec{ev: xid(0)}
		e.delivered(t, 1)
		if n := e.h.reg.Load(eventFailures); n != 2 {
			t.Errorf("EventFailures = %d after two failed streams, want 2", n)
		}
	})
}

// An event set that cannot be opened is counted each time and tried again
// with back-off until it opens.
func TestFollowEventsCountsSetsThatDoNotOpen(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEventHost(t, false)
		open := e.h.openEvents
		refuse := 2
		e.h.openEvents = func(masks []uint64) (EventStream, error) {
			if refuse > 0 {
				refuse--
				return nil, errors.New("nvmlEventSetCreate: Unknown Error")
			}
			return open(masks)
		}
		stop := e.follow()
		defer stop()
		synctest.Wait()
		if n := e.h.reg.Load(eventFailures); n != 1 || len(e.opened()) != 0 {
			t.Fatalf("after the first refusal: EventFailures = %d, %d sets", n, len(e.opened()))
		}
		time.Sleep(eventRetryMin + 2*eventRetryMin)
		synctest.Wait()
		s := e.opened()
		if n := e.h.reg.Load(eventFailures); n != 2 || len(s) != 1 {
			t.Fatalf("after the back-off: EventFailures = %d, %d sets, want 2 and 1", n, len(s))
		}
		s[0].recs <- fakeRec{ev: xid(0)}
		e.delivered(t, 1)
	})
}

// Shutdown ends the stream through Close and FollowEvents returns once it has
// (with no state callback: nil is allowed).
func TestFollowEventsStopsWithContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEventHost(t, false)
		ctx, cancel := context.WithCancel(context.Background())
		done := e.run(ctx, false)
		synctest.Wait()
		cancel()
		synctest.Wait()
		s := e.opened()
		if len(s) != 1 || !s[0].isClosed() {
			t.Fatalf("stream not closed at shutdown")
		}
		select {
		case <-done:
			t.Fatalf("returned before the stream ended")
		default:
		}
		s[0].end()
		<-done
	})
}

// setsAfter lets d pass and returns the sets that registered GPU gpu,
// failing unless there are n (why: what the test waits for).
func (e *eventHost) setsAfter(t *testing.T, d time.Duration, gpu, n int, why string) []*fakeStream {
	t.Helper()
	time.Sleep(d)
	synctest.Wait()
	s := e.forGPU(gpu)
	if len(s) != n {
		t.Fatalf("%s: GPU %d has %d sets, want %d (states %q)", why, gpu, len(s), n, e.reported())
	}
	return s
}

// forGPU returns the sets opened so far that registered GPU i.
func (e *eventHost) forGPU(i int) []*fakeStream {
	var out []*fakeStream
	for _, s := range e.opened() {
		if s.masks[i] != 0 {
			out = append(out, s)
		}
	}
	return out
}

// A GPU that hangs while its set is being opened again holds back no other
// GPU's events (the reopen registered every GPU of a shared set in one
// unbounded step, and GPU 0's Xids were lost for as long as GPU 1 hung);
// shutdown knows that the registration is still inside the driver, and
// FollowEvents returns without waiting for it.
func TestFollowEventsReopenIsNotHeldByAHungGPU(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEventHost(t, false, false)
		open := e.h.openEvents
		hung := make(chan struct{})
		var opens1 atomic.Int32
		e.h.openEvents = func(masks []uint64) (EventStream, error) {
			if masks[1] != 0 && opens1.Add(1) > 1 {
				<-hung // GPU 1 hangs in its registration
			}
			return open(masks)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := e.run(ctx, false)
		synctest.Wait()
		for _, s := range e.opened() {
			s.recs <- fakeRec{err: errors.New("nvmlEventSetWait: Unknown Error")}
			s.end()
		}
		s := e.setsAfter(t, eventRetryMin, 0, 2, "GPU 0's set reopened while GPU 1 hangs in its registration")
		s[1].recs <- fakeRec{ev: xid(0)}
		e.delivered(t, 1)
		if EventsIdle(0) {
			t.Fatalf("EventsIdle reported idle with a registration inside the driver")
		}
		cancel()
		synctest.Wait()
		if !s[1].isClosed() {
			t.Fatalf("GPU 0's set not closed at shutdown")
		}
		s[1].end()
		<-done // not waiting for GPU 1's registration
		close(hung)
		synctest.Wait()
		late := e.forGPU(1)
		if len(late) != 2 || !late[1].isClosed() {
			t.Fatalf("a set registered after shutdown was not closed (%d sets of GPU 1)", len(late))
		}
		late[1].end()
		synctest.Wait()
		if !EventsIdle(0) {
			t.Fatalf("EventsIdle not idle once the registration returned")
		}
		if n := len(e.events()); n != 1 {
			t.Fatalf("%d events delivered, want 1 (none after shutdown)", n)
		}
	})
}

// A GPU whose supported event types cannot be read (as right after a stuck
// GPU answers) is asked again at the next reopen, after the back-off, like
// any set that does not open: its events were left off for the whole run,
// and with every GPU failing so FollowEvents said "unavailable" and stopped.
func TestFollowEventsRetriesAFailedSupportedTypesQuery(t *testing.T) {
	for _, tc := range []struct {
		name string
		gpus int // GPU 0's query fails once; the others answer
	}{
		{"one of two GPUs", 2},
		{"the only GPU", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newEventHost(t, make([]bool, tc.gpus)...)
				d0 := e.h.GPUs[0].Device().(*fakenvml.Dev)
				d0.Set("GetSupportedEventTypes", nvml.ERROR_UNKNOWN)
				defer e.followStates()()
				synctest.Wait()
				if n := len(e.forGPU(0)); n != 0 || d0.Count("GetSupportedEventTypes") != 1 {
					t.Fatalf("after the failed query: %d sets of GPU 0, %d queries", n, d0.Count("GetSupportedEventTypes"))
				}
				if n := e.h.reg.Load(eventFailures); n != 1 {
					t.Errorf("EventFailures = %d after one failed query, want 1", n)
				}
				d0.Set("GetSupportedEventTypes", nvml.SUCCESS)
				s := e.setsAfter(t, eventRetryMin, 0, 1, "GPU 0 registered after the back-off")
				if s[0].masks[0] != fakeWatched() {
					t.Fatalf("GPU 0 registered for %#x, want %#x", s[0].masks[0], fakeWatched())
				}
				s[0].recs <- fakeRec{ev: xid(0)}
				if got := e.delivered(t, 1); got[0].GPU != 0 {
					t.Fatalf("event delivered for GPU %d, want 0", got[0].GPU)
				}
				if tc.gpus > 1 && len(e.forGPU(1)) != 1 {
					t.Fatalf("GPU 1: %d sets, want 1", len(e.forGPU(1)))
				}
				states := e.reported()
				want := "reopening after: nvmlDeviceGetSupportedEventTypes: " + retText(nvml.ERROR_UNKNOWN)
				if !slices.Contains(states, want) || states[len(states)-1] != "watching" {
					t.Fatalf("states %q, want %q then watching", states, want)
				}
			})
		})
	}
}

// A GPU whose supported event types were read and hold none of the watched
// ones is left out for good: with no other GPU, FollowEvents says so and
// stops, asking once.
func TestFollowEventsStopsWhenNoGPUSupportsTheWatchedTypes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEventHost(t, false)
		d0 := e.h.GPUs[0].Device().(*fakenvml.Dev)
		d0.EventTypes = uint64(nvml.EventTypePowerSourceChange)
		<-e.run(context.Background(), true)
		states := e.reported()
		if len(states) == 0 || states[len(states)-1] != "unavailable: "+errNoneRegistered.Error() {
			t.Fatalf("states %q", states)
		}
		if n, q := len(e.opened()), d0.Count("GetSupportedEventTypes"); n != 0 || q != 1 {
			t.Fatalf("%d sets opened, %d queries; want 0 and 1", n, q)
		}
	})
}

// A GPU whose sample is stuck in the driver is not registered (that would
// park one more thread in the hung driver) until its sample returns; the
// other GPU is registered at once.
func TestFollowEventsSkipsAGPUStuckInTheDriver(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, g := stuckEventHost(t)
		stop := e.follow()
		defer stop()
		synctest.Wait()
		if n, m := len(e.forGPU(0)), len(e.forGPU(1)); n != 0 || m != 1 {
			t.Fatalf("with GPU 0 stuck: %d sets registered GPU 0, %d GPU 1; want 0 and 1", n, m)
		}
		g.begin(FnNone) // the sample returns
		s := e.setsAfter(t, lateGPUPoll, 0, 1, "GPU 0 registered once it answered")
		s[0].recs <- fakeRec{ev: xid(0)}
		e.delivered(t, 1)
	})
}

// A GPU stuck at start has no set yet: the events are not "watching"
// while its Xids cannot arrive; once its set is open, they are.
func TestFollowEventsStateWaitsForAGPUStuckAtStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, g := stuckEventHost(t)
		defer e.followStates()()
		synctest.Wait()
		if len(e.forGPU(1)) != 1 {
			t.Fatalf("GPU 1 not registered while GPU 0 is stuck")
		}
		states := e.reported()
		if len(states) == 0 || states[len(states)-1] == "watching" {
			t.Errorf("states %q while GPU 0 is stuck at start; want not watching", states)
		}
		g.begin(FnNone) // the sample returns
		time.Sleep(lateGPUPoll)
		synctest.Wait()
		states = e.reported()
		if len(e.forGPU(0)) != 1 || states[len(states)-1] != "watching" {
			t.Errorf("once GPU 0 answered: states %q; want watching", states)
		}
	})
}

// The state is the events' as a whole, not the last GPU's to speak: while
// one GPU's set is being opened again, the events are not "watching",
// though another GPU's set opened after it; once every set is open again,
// they are.
func TestFollowEventsStateCoversEveryGPU(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEventHost(t, false, false)
		open := e.h.openEvents
		var refuse atomic.Bool
		refuse.Store(true)
		e.h.openEvents = func(masks []uint64) (EventStream, error) {
			if masks[0] != 0 && refuse.Load() {
				return nil, errors.New("nvmlEventSetCreate: Unknown Error")
			}
			return open(masks)
		}
		defer e.followStates()()
		time.Sleep(10 * time.Millisecond)
		synctest.Wait()
		if len(e.forGPU(1)) != 1 || len(e.forGPU(0)) != 0 {
			t.Fatalf("sets: GPU 0 %d, GPU 1 %d; want GPU 1's only", len(e.forGPU(0)), len(e.forGPU(1)))
		}
		states := e.reported()
		if last := states[len(states)-1]; last == "watching" {
			t.Errorf("state %q while GPU 0's set is being opened again (states %q)", last, states)
		}
		refuse.Store(false)
		time.Sleep(eventRetryMin)
		synctest.Wait()
		states = e.reported()
		if len(e.forGPU(0)) != 1 || states[len(states)-1] != "watching" {
			t.Errorf("once GPU 0's set is open: %d sets of it, states %q; want watching", len(e.forGPU(0)), states)
		}
	})
}

// fakeWatched is what a fake GPU registers: the watched types it supports
// (none of the health events).
func fakeWatched() uint64 { return WatchedEvents & fakenvml.NewDev().EventTypes }

// A GPU whose UUID could not be read when its set was opened has no
// operational events (subscribed by UUID): once its UUID is known
// (readIdentity) its set is opened again with it, at once, and that is not
// counted as a failure.
func TestFollowEventsReopensOnceTheUUIDIsKnown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEventHost(t, false)
		stop := e.follow()
		defer stop()
		synctest.Wait()
		s := e.opened()
		if len(s) != 1 {
			t.Fatalf("%d sets opened", len(s))
		}
		time.Sleep(time.Minute)
		synctest.Wait()
		if s[0].isClosed() {
			t.Fatalf("the set was closed while the UUID was still unknown")
		}
		g := e.h.GPUs[0]
		info := g.Info()
		info.UUID = "GPU-1111"
		g.publish(&info)
		synctest.Wait()
		if !s[0].isClosed() {
			t.Fatalf("the set opened without the UUID was not closed once it was known")
		}
		s[0].end()
		synctest.Wait()
		s = e.opened()
		if len(s) != 2 {
			t.Fatalf("not opened again at once with the UUID: %d sets", len(s))
		}
		if n := e.h.reg.Load(eventFailures); n != 0 {
			t.Errorf("EventFailures = %d, want 0 (a reopen for the UUID is no failure)", n)
		}
		s[1].recs <- fakeRec{ev: xid(0)}
		e.delivered(t, 1)
		time.Sleep(time.Minute)
		synctest.Wait()
		if s[1].isClosed() || len(e.opened()) != 2 {
			t.Errorf("the set opened with the UUID was closed again")
		}
	})
}

// endOnClose makes e's sets end as soon as they are closed (as the native
// thread does within its wait), up to max sets; a set opened after that
// fails to open, which ends a loop that a test counts.
func (e *eventHost) endOnClose(max int) {
	e.h.openEvents = func(masks []uint64) (EventStream, error) {
		if len(e.opened()) >= max {
			return nil, errors.New("too many sets opened")
		}
		st, _ := e.open(masks)
		s := st.(*fakeStream)
		go func() {
			select {
			case <-s.closes:
				s.end()
			case <-s.ended:
			}
		}()
		return s, nil
	}
}

// A GPU that has its handle but whose executor does not start reads its
// static facts again every staticRetry; a UUID read that then fails keeps
// the UUID it had (a board's identity never goes back to unknown), and a
// set opened again is not closed as renamed: the UUID read again as "" made
// each set opened after a failure close at once as a rename, reopened
// without back-off or count (about 120 sets a minute).
func TestFollowEventsDoNotLoopWhenAUUIDReadFailsLater(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := fakenvml.NewDev()
		lib := &fakenvml.Lib{InitRet: nvml.SUCCESS, Devs: []*fakenvml.Dev{d}}
		fail := func(*native, int, time.Duration) (*nativeExec, error) {
			return nil, errors.New("no NVML handle for the GPU")
		}
		h, err := Open(lib, OpenOptions{Config: testConfig, Timeout: 5 * time.Second, startNative: fail, Counters: counters.New()})
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		g := h.GPUs[0]
		if g.Info().UUID != "GPU-1111" {
			t.Fatalf("UUID at start %q", g.Info().UUID)
		}
		d.Set("GetUUID", nvml.ERROR_UNKNOWN)
		d.Set("GetPciInfo", nvml.ERROR_UNKNOWN)
		e := &eventHost{h: h}
		e.endOnClose(50)
		ctx, cancel := context.WithCancel(context.Background())
		done := e.run(ctx, false)
		sampled := make(chan struct{})
		go func() { // the GPU's worker
			defer close(sampled)
			var s reading.Sample
			for ctx.Err() == nil {
				g.Sample(&s)
				time.Sleep(time.Second)
			}
		}()
		defer func() {
			cancel()
			<-sampled
			for _, s := range e.opened() {
				s.end()
			}
			<-done
		}()
		time.Sleep(15 * time.Second) // the static facts were read again
		synctest.Wait()
		if in := g.Info(); in.UUID != "GPU-1111" || in.BusID != "00000000:4B:00.0" {
			t.Errorf("after a failed read again: UUID %q, bus id %q; want them kept", in.UUID, in.BusID)
		}
		s := e.opened()
		if len(s) != 1 {
			t.Fatalf("%d sets before the failure, want 1", len(s))
		}
		s[0].recs <- fakeRec{err: errors.New("nvmlEventSetWait: Unknown Error")}
		s[0].end()
		time.Sleep(time.Minute)
		synctest.Wait()
		if n := len(e.opened()); n != 2 {
			t.Errorf("%d sets opened in a minute after one failure, want 2", n)
		}
	})
}

// A UUID that goes back to "" (published so) after the GPU was named does
// not make the next set close at once as a rename: a rename is a set opened
// without a UUID whose GPU has one now.
func TestFollowEventsRenameIsOnlyFromUnknownToKnown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEventHost(t, false)
		e.endOnClose(50)
		g := e.h.GPUs[0]
		defer e.follow()()
		synctest.Wait()
		info := g.Info()
		info.UUID = "GPU-1111"
		g.publish(&info)
		synctest.Wait()
		if n := len(e.opened()); n != 2 {
			t.Fatalf("%d sets once the UUID was known, want 2 (reopened for it)", n)
		}
		info.UUID = ""
		g.publish(&info)
		s := e.opened()
		s[1].recs <- fakeRec{err: errors.New("nvmlEventSetWait: Unknown Error")}
		s[1].end()
		time.Sleep(time.Minute)
		synctest.Wait()
		if n := len(e.opened()); n != 3 {
			t.Errorf("%d sets opened in a minute after one failure, want 3", n)
		}
	})
}

// The UUID a set is opened with is the one read before its registration:
// one published while the registration is in the driver still has the set
// opened again with it (it was read again after the registration and found
// known, so the set opened without it was never reopened).
func TestFollowEventsUUIDKnownDuringTheRegistration(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEventHost(t, false)
		g := e.h.GPUs[0]
		var uuids []string
		e.h.openEvents = func(masks []uint64) (EventStream, error) {
			uuids = append(uuids, g.Info().UUID)
			if len(uuids) == 1 {
				info := g.Info()
				info.UUID = "GPU-1111"
				g.publish(&info)
			}
			return e.open(masks)
		}
		defer e.follow()()
		synctest.Wait()
		s := e.opened()
		if len(s) != 1 || !s[0].isClosed() {
			t.Fatalf("the set opened without the UUID was not closed once it was known (%d sets)", len(s))
		}
		s[0].end()
		synctest.Wait()
		if !slices.Equal(uuids, []string{"", "GPU-1111"}) {
			t.Fatalf("sets opened with UUIDs %q, want \"\" then GPU-1111", uuids)
		}
		if n := e.h.reg.Load(eventFailures); n != 0 {
			t.Errorf("EventFailures = %d, want 0", n)
		}
	})
}

// A set registered in part (a type refused otherwise than as not
// supported) is a failed open of those types: counted, said in the state,
// and opened again whole after the back-off; the types it holds deliver
// their events meanwhile. The registration's refusal was thrown away and
// the set ran without the types for good.
func TestFollowEventsReopensASetRegisteredInPart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEventHost(t, false)
		e.endOnClose(50)
		open := e.h.openEvents
		e.h.openEvents = func(masks []uint64) (EventStream, error) {
			st, err := open(masks)
			if err == nil && len(e.opened()) == 1 {
				st.(*fakeStream).partial = errors.New("register the GPU's NVML events: Unknown Error")
			}
			return st, err
		}
		defer e.followStates()()
		synctest.Wait()
		s := e.opened()
		if n := e.h.reg.Load(eventFailures); len(s) != 1 || n != 1 {
			t.Fatalf("a set registered in part: %d sets, EventFailures = %d; want 1 and 1", len(s), n)
		}
		if states := e.reported(); states[len(states)-1] != "reopening after: register the GPU's NVML events: Unknown Error" {
			t.Errorf("states %q, want reopening last", states)
		}
		s[0].recs <- fakeRec{ev: xid(0)}
		e.delivered(t, 1)
		time.Sleep(eventRetryMin - time.Millisecond)
		synctest.Wait()
		if s[0].isClosed() {
			t.Fatalf("the set registered in part was closed before the back-off")
		}
		time.Sleep(time.Millisecond)
		synctest.Wait()
		s = e.opened()
		if len(s) != 2 || !s[0].isClosed() {
			t.Fatalf("after the back-off: %d sets, the first closed %v; want it opened again whole", len(s), s[0].isClosed())
		}
		if states := e.reported(); states[len(states)-1] != "watching" {
			t.Errorf("states %q, want watching once whole", states)
		}
		time.Sleep(time.Minute)
		synctest.Wait()
		if n := e.h.reg.Load(eventFailures); len(e.opened()) != 2 || n != 1 {
			t.Errorf("a minute later: %d sets, EventFailures = %d; want 2 and 1", len(e.opened()), n)
		}
	})
}

// A GPU whose set keeps failing to open (a GPU that stays lost) is counted
// at every try, logged at Warn at the first of the run and at Debug after
// (it was a Warn every minute for the rest of the run); a set that opens
// ends the run, and the next failure is a Warn again.
func TestFollowEventsWarnsOnceARunOfFailedOpens(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEventHost(t, false)
		var logs bytes.Buffer
		e.log = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
		open := e.h.openEvents
		var refuse atomic.Bool
		refuse.Store(true)
		e.h.openEvents = func(masks []uint64) (EventStream, error) {
			if refuse.Load() {
				return nil, errors.New("register the GPU's NVML events: GPU is lost")
			}
			return open(masks)
		}
		defer e.follow()()
		time.Sleep(5 * time.Minute)
		synctest.Wait()
		n := e.h.reg.Load(eventFailures)
		out := logs.String()
		if warn, debug := strings.Count(out, "level=WARN msg=\"cannot open NVML events"), strings.Count(out, "level=DEBUG msg=\"cannot open NVML events"); n < 5 || warn != 1 || uint64(debug) != n-1 {
			t.Fatalf("%d failures, %d Warn and %d Debug lines; want 1 Warn and the rest Debug:\n%s", n, warn, debug, out)
		}
		refuse.Store(false)
		time.Sleep(eventRetryMax)
		synctest.Wait()
		s := e.opened()
		if len(s) != 1 {
			t.Fatalf("%d sets once the GPU answers", len(s))
		}
		s[0].recs <- fakeRec{err: errors.New("nvmlEventSetWait: Unknown Error")}
		s[0].end()
		synctest.Wait()
		if warn := strings.Count(logs.String(), "level=WARN msg=\"NVML event stream failed"); warn != 1 {
			t.Errorf("the failure after a set opened: %d Warn lines, want 1:\n%s", warn, logs.String())
		}
	})
}
