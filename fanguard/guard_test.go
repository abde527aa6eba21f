package fanguard

import (
	"bytes"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/internal/counters"
	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

// refusal and lost are errors as the sampler classifies them.
type refusal string

func (r refusal) Error() string { return string(r) }
func (refusal) Refused() bool   { return true }

type lost struct{}

func (lost) Error() string { return "gpu lost" }
func (lost) Lost() bool    { return true }

// fakeDriver logs every call; fail answers a call by its name, block
// holds it until closed.
type fakeDriver struct {
	mu    sync.Mutex
	calls []string
	lim   Limits
	fail  map[string]error
	block map[string]chan struct{}
}

func (f *fakeDriver) do(name string) error {
	f.mu.Lock()
	f.calls = append(f.calls, name)
	err, ch := f.fail[strings.Fields(name)[0]], f.block[strings.Fields(name)[0]]
	for k, e := range f.fail { // a key naming the call's arguments too: "set 1" fails fan 1's sets only
		if strings.Contains(k, " ") && strings.HasPrefix(name, k) {
			err = e
		}
	}
	f.mu.Unlock()
	if ch != nil {
		<-ch
	}
	return err
}

func (f *fakeDriver) Limits() (Limits, error)   { return f.lim, f.do("limits") }
func (f *fakeDriver) SetSpeed(fan, p int) error { return f.do(fmt.Sprintf("set %d %d", fan, p)) }
func (f *fakeDriver) SetDefault(fan int) error  { return f.do(fmt.Sprintf("default %d", fan)) }

func (f *fakeDriver) log() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

// rig is a guard on a fake driver, in a synctest bubble: its clock is the
// bubble's.
type rig struct {
	t      *testing.T
	g      *Guard
	drv    *fakeDriver
	reg    *counters.Registry
	logs   *bytes.Buffer
	events []Event
	held   [][]int
	base   time.Time
	done   chan struct{}
	mu     sync.Mutex
}

func newRig(t *testing.T, cfg Config) *rig {
	r := &rig{t: t, drv: &fakeDriver{lim: Limits{Min: 30, Max: 100}, fail: map[string]error{}, block: map[string]chan struct{}{}},
		reg: counters.New(), logs: &bytes.Buffer{}, base: time.Now(), done: make(chan struct{})}
	r.g = New(Options{Config: cfg, GPU: 3, Driver: r.drv, Counters: r.reg,
		Log:  slog.New(slog.NewTextHandler(r.logs, nil)),
		Mono: func() time.Duration { return time.Since(r.base) },
		Event: func(e Event) {
			r.mu.Lock()
			r.events = append(r.events, e)
			r.mu.Unlock()
		},
		Held: func(fans []int) error {
			r.drv.do(fmt.Sprintf("held %v", fans))
			return nil
		}})
	go r.g.Run(r.done)
	t.Cleanup(func() { close(r.done) })
	return r
}

// sample has the guard observe an answered sample at temp C with two fans
// whose firmware targets are 53 %, and returns its flags.
func (r *rig) sample(temp int, flags ...reading.Flag) string {
	s := reading.Sample{GPU: 3, Status: reading.StatusAnswered, NumFans: 2}
	if temp >= 0 {
		s.Set(reading.TempC, uint64(temp))
	}
	for i := range 2 {
		fanTarget.Set(&s, i, 53)
	}
	for _, f := range flags {
		s.Flags.Add(f)
	}
	r.g.Observe(&s, time.Since(r.base))
	synctest.Wait()
	return s.Flags.String()
}

func (r *rig) wantCalls(want ...string) {
	r.t.Helper()
	if got := r.drv.log(); !slices.Equal(got, want) {
		r.t.Fatalf("driver calls:\n got %q\nwant %q", got, want)
	}
}

func (r *rig) kinds() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, e := range r.events {
		out = append(out, fmt.Sprintf("%s:%d", e.Kind, e.Fan))
	}
	return out
}

func TestGuardTakesAndHandsBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, DefaultConfig())
		r.g.Start(2, nil)
		synctest.Wait()
		synctest.Wait()
		r.wantCalls("limits")
		if f := r.sample(65); f != "" {
			t.Fatalf("65 C: flags %q", f)
		}
		r.wantCalls("limits")
		if f := r.sample(73); f != "" {
			t.Errorf("the row that decided to take the fans: flags %q, want none (not taken yet)", f)
		}
		if f := r.sample(73); f != "FAN_GUARD(72%)" {
			t.Errorf("the next row: flags %q, want FAN_GUARD(72%%)", f)
		}
		// Recorded as held before the first change.
		r.wantCalls("limits", "held [0 1]", "set 0 72", "set 1 72")
		if v := r.g.View().String(); v != "holding fans 0,1 at 72 % (firmware wanted 53 %), 73 °C" {
			t.Errorf("view: %q", v)
		}
		time.Sleep(time.Second)
		r.sample(80)
		r.wantCalls("limits", "held [0 1]", "set 0 72", "set 1 72", "set 0 88", "set 1 88")
		// Below the release temperature for 60 s: handed back.
		for range 61 {
			time.Sleep(time.Second)
			r.sample(60)
		}
		got := r.drv.log()
		if want := []string{"default 0", "default 1", "held []"}; !slices.Equal(got[len(got)-3:], want) {
			t.Errorf("after 60 s at 60 C: calls end %q, want %q", got[len(got)-3:], want)
		}
		if v := r.g.View(); v.Holding() || v.State != "watching" {
			t.Errorf("after the hand-back: %+v", v)
		}
		if k := r.kinds(); !slices.Equal(k[:4], []string{"engaged:0", "engaged:1", "set:0", "set:1"}) || !slices.Equal(k[len(k)-2:], []string{"released:0", "released:1"}) {
			t.Errorf("events: %q", k)
		}
		if n := r.reg.Load(fanGuardChanges); n < 4 {
			t.Errorf("fan_guard_changes = %d", n)
		}
	})
}

func TestGuardEngagesOnInversion(t *testing.T) {
	inv, _ := reading.FlagKindNamed(inversionFlag) // registered by anomaly (inversion_test.go)
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, DefaultConfig())
		r.g.inv = inv
		r.g.Start(2, nil)
		synctest.Wait()
		r.sample(62, reading.Flag{Kind: inv, A: 62, B: 40})
		r.wantCalls("limits", "held [0 1]", "set 0 53", "set 1 53")
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.events[0].Reason != "fan inversion" || r.events[0].Firmware != reading.Some(uint32(53)) {
			t.Errorf("event %+v", r.events[0])
		}
	})
}

func TestGuardHandsBackAtShutdown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, DefaultConfig())
		r.g.Start(2, nil)
		synctest.Wait()
		r.sample(75)
		if !r.g.HandBack(time.Second) {
			t.Fatal("HandBack reported fans still held")
		}
		r.wantCalls("limits", "held [0 1]", "set 0 76", "set 1 76", "default 0", "default 1", "held []")
		r.sample(90) // after shutdown: nothing
		r.wantCalls("limits", "held [0 1]", "set 0 76", "set 1 76", "default 0", "default 1", "held []")
	})
}

func TestGuardRestoresWhatThePreviousRunHeld(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, DefaultConfig())
		r.g.Start(2, []int{0, 1})
		synctest.Wait()
		r.wantCalls("default 0", "default 1", "held []", "limits")
		if !strings.Contains(r.logs.String(), "previous run held these fans") {
			t.Errorf("log: %s", r.logs)
		}
	})
}

func TestGuardFanless(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, DefaultConfig())
		r.g.Start(0, nil)
		s := reading.Sample{Status: reading.StatusAnswered}
		s.Set(reading.TempC, 95)
		r.g.Observe(&s, 0)
		synctest.Wait()
		r.wantCalls()
		if n := strings.Count(r.logs.String(), "no fans"); n != 1 {
			t.Errorf("%d lines say the GPU has no fans, want 1:\n%s", n, r.logs)
		}
		if v := r.g.View().String(); v != "no fans" {
			t.Errorf("view %q", v)
		}
	})
}

func TestGuardRefused(t *testing.T) {
	for _, tc := range []struct {
		name, call string
		want       []string
	}{
		{"limits not supported", "limits", []string{"limits"}},
		{"no permission to set", "set", []string{"limits", "held [0 1]", "set 0 76", "held []"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := newRig(t, DefaultConfig())
				r.drv.fail[tc.call] = refusal("no permission")
				r.g.Start(2, nil)
				synctest.Wait()
				for range 5 {
					time.Sleep(time.Second)
					if f := r.sample(75); f != "" {
						t.Errorf("refused: flags %q", f)
					}
				}
				r.wantCalls(tc.want...)
				if n := strings.Count(r.logs.String(), "refuses fan control"); n != 1 || r.reg.Load(fanGuardRefused) != 1 {
					t.Errorf("%d WARN lines, counter %d; want 1 and 1:\n%s", n, r.reg.Load(fanGuardRefused), r.logs)
				}
				if k := r.kinds(); !slices.Equal(k, []string{"refused:-1"}) {
					t.Errorf("events %q", k)
				}
				if v := r.g.View().String(); v != "refused (no permission)" {
					t.Errorf("view %q", v)
				}
			})
		})
	}
}

// A setter stuck in the driver never holds the sample path; once past its
// deadline it is a hang, counted and logged once, and the GPU's fans are
// not touched again, at shutdown either.
func TestGuardSetterHangs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, DefaultConfig())
		stuck := make(chan struct{})
		r.drv.block["set"] = stuck
		r.g.Start(2, nil)
		synctest.Wait()
		r.sample(75) // returns although the setter is stuck
		if !r.g.InNVML() {
			t.Fatal("the setter is not in flight")
		}
		for range 3 {
			time.Sleep(time.Second)
			r.sample(80)
		}
		if r.reg.Load(fanGuardHangs) != 1 || strings.Count(r.logs.String(), "stuck in the driver") != 1 {
			t.Fatalf("hangs %d, log:\n%s", r.reg.Load(fanGuardHangs), r.logs)
		}
		if r.g.HandBack(time.Second) {
			t.Error("HandBack says nothing is held while a setter is stuck")
		}
		close(stuck)
		synctest.Wait()
		r.sample(90)
		r.wantCalls("limits", "held [0 1]", "set 0 76")
		if v := r.g.View(); v.State != "hung" {
			t.Errorf("view %+v", v)
		}
	})
}

func TestGuardLeavesALostGPU(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, DefaultConfig())
		r.g.Start(2, nil)
		synctest.Wait()
		r.sample(75)
		s := reading.Sample{Status: reading.StatusLost, NumFans: 2}
		r.g.Observe(&s, time.Since(r.base))
		r.g.HandBack(time.Second)
		r.wantCalls("limits", "held [0 1]", "set 0 76", "set 1 76")
	})
}

// A failed setter is counted, its first logged, and tried again after
// MinChange.
func TestGuardRetriesAFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, DefaultConfig())
		r.drv.fail["set"] = fmt.Errorf("unknown error")
		r.g.Start(2, nil)
		synctest.Wait()
		r.sample(75)
		r.sample(75) // within MinChange: not tried again
		time.Sleep(time.Second)
		r.drv.mu.Lock()
		delete(r.drv.fail, "set")
		r.drv.mu.Unlock()
		r.sample(75)
		r.wantCalls("limits", "held [0 1]", "set 0 76", "held [0 1]", "set 0 76", "set 1 76")
		if r.reg.Load(fanGuardFailures) != 1 {
			t.Errorf("failures %d", r.reg.Load(fanGuardFailures))
		}
	})
}

// A take-over cut short by a failure on the second fan takes only that
// fan when tried again, and never records the first twice.
func TestGuardFinishesAPartialTakeOver(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, DefaultConfig())
		r.drv.fail["set 1"] = fmt.Errorf("unknown error")
		r.g.Start(2, nil)
		synctest.Wait()
		r.sample(75)
		if f := r.sample(75); f != "FAN_GUARD(76%)" {
			t.Errorf("fan 0 held: flags %q", f)
		}
		time.Sleep(time.Second)
		r.drv.mu.Lock()
		delete(r.drv.fail, "set 1")
		r.drv.mu.Unlock()
		r.sample(75)
		r.wantCalls("limits", "held [0 1]", "set 0 76", "set 1 76", "set 1 76")
		if v := r.g.View(); !slices.Equal(v.Fans, []int{0, 1}) {
			t.Errorf("view %+v", v)
		}
	})
}

// A GPU whose static facts were not known at Start (it answered late) is
// not called until they are: its samples alone neither read its limits nor
// hand back a previous run's fans; once known, a fanless GPU gets one line
// and no call.
func TestGuardFanlessFoundLate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, DefaultConfig())
		r.g.Start(-1, nil)
		synctest.Wait()
		s := reading.Sample{Status: reading.StatusAnswered}
		s.Set(reading.TempC, 95)
		for range 3 {
			r.g.Observe(&s, time.Since(r.base))
		}
		synctest.Wait()
		r.wantCalls()
		r.g.FactsKnown(0, nil)
		r.g.Observe(&s, time.Since(r.base))
		synctest.Wait()
		r.wantCalls()
		if n := strings.Count(r.logs.String(), "no fans"); n != 1 || r.g.View().State != "no fans" {
			t.Errorf("%d lines, view %+v", n, r.g.View())
		}
	})
}

func TestGuardWaitsForTheFacts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, DefaultConfig())
		r.g.Start(-1, nil)
		synctest.Wait()
		for range 3 {
			time.Sleep(time.Second)
			r.sample(80)
		}
		r.wantCalls()
		r.g.FactsKnown(2, []int{1}) // the previous run held fan 1 of this GPU
		synctest.Wait()
		r.wantCalls("default 1", "held []", "limits")
	})
}

// A GPU whose facts arrive before its guard is started keeps the fans the
// previous run held of it: Start adds to them, it does not replace them.
func TestGuardFactsBeforeStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, DefaultConfig())
		r.g.FactsKnown(2, []int{1})
		r.g.Start(2, nil)
		synctest.Wait()
		r.wantCalls("default 1", "held []", "limits")
	})
}

// A fan the driver does not take back after a refusal stays in run-state,
// is logged and counted, and the view does not call the fans free.
func TestGuardRefusedKeepsAFanNotHandedBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, DefaultConfig())
		r.drv.fail["set 1"] = refusal("no permission")
		r.drv.fail["default 0"] = fmt.Errorf("unknown error")
		r.g.Start(2, nil)
		synctest.Wait()
		r.sample(75)
		r.wantCalls("limits", "held [0 1]", "set 0 76", "set 1 76", "default 0", "held [0]")
		if r.reg.Load(fanGuardFailures) != 1 || strings.Count(r.logs.String(), "did not take these fans back") != 1 {
			t.Errorf("failures %d, log:\n%s", r.reg.Load(fanGuardFailures), r.logs)
		}
		v := r.g.View()
		if !v.Holding() || !slices.Equal(v.Fans, []int{0}) || v.String() != "not handed back: fans 0 at 76 % (no permission)" {
			t.Errorf("view %+v %q", v, v.String())
		}
		if f := r.sample(75); f != "FAN_GUARD(76%)" {
			t.Errorf("flags %q", f)
		}
	})
}

// A stuck setter is recorded though no sample arrives (the GPU's samples
// are stuck in the same fault).
func TestGuardHangRecordedWithoutSamples(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, DefaultConfig())
		stuck := make(chan struct{})
		defer close(stuck)
		r.drv.block["set"] = stuck
		r.g.Start(2, nil)
		synctest.Wait()
		r.sample(75)
		time.Sleep(3 * time.Second)
		synctest.Wait()
		if r.reg.Load(fanGuardHangs) != 1 || !slices.Contains(r.kinds(), "hung:-1") || r.g.View().State != "hung" {
			t.Errorf("hangs %d, events %q, view %+v", r.reg.Load(fanGuardHangs), r.kinds(), r.g.View())
		}
	})
}

// After HandBack returns at its deadline, the guard makes no further call:
// neither the take-over's next fan nor the hand-back's.
func TestGuardNoCallAfterHandBack(t *testing.T) {
	for _, tc := range []struct {
		name, block string
		want        []string
	}{
		{"take-over cut short", "set 0", []string{"limits", "held [0 1]", "set 0 76"}},
		{"hand-back cut short", "default 0", []string{"limits", "held [0 1]", "set 0 76", "set 1 76", "default 0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := newRig(t, DefaultConfig())
				r.g.Start(2, nil)
				synctest.Wait()
				ch := make(chan struct{})
				if tc.block == "default 0" {
					r.sample(75)
				}
				r.drv.block[strings.Fields(tc.block)[0]] = ch
				if tc.block == "set 0" {
					r.sample(75)
				}
				if r.g.HandBack(100 * time.Millisecond) {
					t.Error("HandBack says nothing is held")
				}
				close(ch)
				synctest.Wait()
				r.wantCalls(tc.want...)
			})
		})
	}
}

// A restore that fails is tried again, as its log says.
func TestGuardRetriesAFailedRestore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, DefaultConfig())
		r.drv.fail["default 1"] = fmt.Errorf("unknown error")
		r.g.Start(2, []int{0, 1})
		synctest.Wait()
		r.drv.mu.Lock()
		delete(r.drv.fail, "default 1")
		r.drv.mu.Unlock()
		time.Sleep(time.Second)
		r.sample(50)
		r.wantCalls("default 0", "default 1", "default 1", "held []", "limits")
	})
}

// A restore given once the guard watches (Restore, a UUID read late) that
// fails is tried again too.
func TestGuardRetriesAFailedRestoreWhileWatching(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, DefaultConfig())
		r.g.Start(2, nil)
		synctest.Wait()
		r.drv.mu.Lock()
		r.drv.fail["default 1"] = fmt.Errorf("unknown error")
		r.drv.mu.Unlock()
		r.g.Restore([]int{1})
		synctest.Wait()
		r.drv.mu.Lock()
		delete(r.drv.fail, "default 1")
		r.drv.mu.Unlock()
		time.Sleep(time.Second)
		r.sample(50)
		synctest.Wait()
		r.wantCalls("limits", "default 1", "default 1", "held []")
	})
}

// An inversion while the guard holds the fans: the speed commanded is not
// taking effect, logged once.
func TestGuardInversionWhileHolding(t *testing.T) {
	inv, _ := reading.FlagKindNamed(inversionFlag)
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, DefaultConfig())
		r.g.inv = inv
		r.g.Start(2, nil)
		synctest.Wait()
		r.sample(86)
		for range 3 {
			time.Sleep(time.Second)
			r.sample(86, reading.Flag{Kind: inv, A: 86, B: 53})
		}
		if n := strings.Count(r.logs.String(), "not taking effect"); n != 1 {
			t.Errorf("%d lines, want 1:\n%s", n, r.logs)
		}
	})
}

// The fans a previous run held of a GPU whose UUID became known after its
// other facts (Restore) are handed back when told, whatever the guard is
// doing: watching (after the limits were read), with no fans known
// (fanless), or holding fans itself (taken in the moment between the UUID
// being read and its claim: those are this run's, handed back with its
// own and still recorded as held, never set to the firmware under it).
func TestGuardRestoreAfterTheFacts(t *testing.T) {
	for _, tc := range []struct {
		name    string
		fans    int
		hot     bool
		restore []int
		want    []string
	}{
		{"watching", 2, false, []int{1}, []string{"limits", "default 1", "held []"}},
		{"fanless", 0, false, []int{0}, []string{"default 0", "held []", "limits"}},
		{"holding", 2, true, []int{1}, []string{"limits", "held [0 1]", "set 0 72", "set 1 72"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := newRig(t, DefaultConfig())
				r.g.Start(tc.fans, nil)
				synctest.Wait()
				if tc.hot {
					r.sample(73)
					r.sample(73)
				}
				r.g.Restore(tc.restore)
				synctest.Wait()
				r.wantCalls(tc.want...)
				if tc.hot {
					if v := r.g.View(); !v.Holding() {
						t.Errorf("view %+v, want holding", v)
					}
				}
			})
		})
	}
}
