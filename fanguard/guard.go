package fanguard

import (
	"cmp"
	"errors"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/internal/counters"
	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

// Driver is one GPU's fan setters: the sampler's, the one package that
// talks to NVML. A call may block inside the driver for as long as a GPU
// fault lasts; Guard never makes one on the sample path.
//
// An error with a method Refused() bool that returns true means the driver
// refuses fan control on this GPU (no permission, not supported, a driver
// without the function); one with Lost() bool returning true, that the GPU
// is gone. Any other error is a failure of that call.
type Driver interface {
	Limits() (Limits, error)
	SetSpeed(fan, pct int) error
	SetDefault(fan int) error
}

// The kinds of FAN_GUARD events (the kind= field of its events.log lines).
const (
	EventEngaged  = "engaged"  // took a fan from the firmware
	EventSet      = "set"      // changed a held fan's speed
	EventReleased = "released" // handed a fan back to the firmware
	EventRefused  = "refused"  // the driver refused fan control: the GPU is left alone
	EventHung     = "hung"     // a setter stuck in the driver: the GPU is never touched again
)

// Event is one thing the guard did to a GPU's fans.
type Event struct {
	Kind     string
	Fan      int                 // -1: the GPU as a whole
	Speed    reading.Opt[uint32] // the speed commanded
	Firmware reading.Opt[uint32] // the firmware's target when the guard took over
	TempC    reading.Opt[uint32] // the die's temperature in the sample that decided it
	Reason   string
}

// Options build a Guard.
type Options struct {
	Config   Config
	GPU      int // its index, for the log
	Driver   Driver
	Log      *slog.Logger
	Counters *counters.Registry // required
	// Mono is a monotonic clock (the monitor's): call deadlines are
	// measured on it.
	Mono func() time.Duration
	// Event is told every change to the fans, from the guard's goroutine
	// (events.log); nil: none.
	Event func(Event)
	// Held records which fans the guard holds (nil: none) where the next
	// start finds them after a SIGKILL (run-state): before the first
	// change of a take-over and after a hand-back. nil: not recorded.
	Held func(fans []int) error
}

var (
	fanGuardRefused = counters.Declare(counters.Def{Name: "fan_guard_refusals", OwnLog: true,
		Help: "GPUs whose driver refused the fan guard (no permission, not supported, function missing): their fans are left to the firmware, logged once per GPU"})
	fanGuardHangs = counters.Declare(counters.Def{Name: "fan_guard_hangs", Loss: true, OwnLog: true,
		Help: "fan setter calls stuck in the driver past their deadline: that GPU's fans are not touched again (not waited on; logged per GPU)"})
	fanGuardFailures = counters.Declare(counters.Def{Name: "fan_guard_failures", Loss: true, OwnLog: true,
		Help: "fan setter calls that failed (tried again once a back-off has passed; a fan the driver would not take back is left in run-state; the first logged)"})
	fanGuardChanges = counters.Declare(counters.Def{Name: "fan_guard_changes",
		Help: "fan speeds the fan guard commanded (take-overs and changes, one per fan)"})
)

// phase is where a guard stands.
type phase uint8

const (
	phaseStarting phase = iota // Start not called yet, or the limits not read
	phaseReady                 // watching or holding
	phaseFanless               // no fans: nothing to do
	phaseRefused               // the driver refused: the fans are the firmware's
	phaseHung                  // a call stuck: never touched again
	phaseLost                  // the GPU is lost: never touched again
	phaseStopped               // handed back at shutdown
)

var phaseNames = [...]string{phaseStarting: "starting", phaseReady: "watching", phaseFanless: "no fans",
	phaseRefused: "refused", phaseHung: "hung", phaseLost: "GPU lost", phaseStopped: "stopped"}

// Guard is one GPU's fan guard: Observe decides on the GPU's worker
// goroutine (never calling the driver); Run makes the calls on a goroutine
// of its own, one at a time, each under Config.CallDeadline; HandBack
// returns the fans at shutdown.
type Guard struct {
	o    Options
	log  *slog.Logger
	reg  *counters.Registry
	kick chan struct{}
	inv  reading.FlagKind // the fan inversion detector's flag (0: none registered)

	pol *Policy // Observe only

	toldInv bool // Observe only: an inversion while holding was logged

	mu        sync.Mutex
	ph        phase
	why       string
	started   bool
	fans      int     // the GPU's fan count once its static facts are known; -1 before: no driver call until then
	restore   []int   // fans a previous run held: handed back first
	want      wanted  // what the policy decided
	have      applied // what the driver was told
	stranded  []int   // fans the driver refused to take back after a refusal: still at strandSpd, kept in run-state
	strandSpd int
	busy      bool // step is working (between calls too): HandBack waits for it
	inCall    bool
	callSeq   uint64 // which call is in flight, for its deadline timer
	callFn    string
	callAt    time.Duration
	retryAt   time.Duration // after a failed call, not before this
	closing   bool          // HandBack or Abandon began: no driver call but HandBack's own
	releasing bool          // HandBack's own hand-back calls are allowed
	toldFail  bool
}

// wanted is the policy's decision in force.
type wanted struct {
	hold    bool
	fans    int
	speed   [reading.MaxFans]int
	target0 [reading.MaxFans]reading.Opt[uint32]
	temp    reading.Opt[uint32]
	why     string
}

// applied is what the driver was told.
type applied struct {
	fans    int // fans held (0: none)
	speed   [reading.MaxFans]int
	target0 [reading.MaxFans]reading.Opt[uint32]
	temp    reading.Opt[uint32] // of the sample that decided the last change
}

// New returns a guard for one GPU; nothing is called until Start and Run.
func New(o Options) *Guard {
	o.Log = cmp.Or(o.Log, slog.New(slog.DiscardHandler))
	if o.Mono == nil {
		base := time.Now()
		o.Mono = func() time.Duration { return time.Since(base) }
	}
	g := &Guard{o: o, log: o.Log.With("gpu", o.GPU), reg: counters.Need(o.Counters, "fanguard.Options.Counters"), kick: make(chan struct{}, 1), fans: -1}
	g.inv, _ = reading.FlagKindNamed(inversionFlag)
	return g
}

// inversionFlag is the fan inversion detector's flag (anomaly/faninversion.go):
// a hot GPU whose fans stay slow, the firmware controller of issue 1045.
const inversionFlag = "temp_fan_inv"

// fanTarget and fanSpeed are the per-fan readings of the firmware's target
// speed and of the speed measured.
var fanTarget, fanSpeed = fanDef("Target"), fanDef("Speed")

func fanDef(name string) *reading.FanDef {
	for i := range reading.FanTable {
		if reading.FanTable[i].Name == name {
			return &reading.FanTable[i]
		}
	}
	panic("fanguard: reading.FanTable has no " + name)
}

// bits lists the bits set in m.
func bits(m uint32) []int {
	var out []int
	for i := range 32 {
		if m&(1<<i) != 0 {
			out = append(out, i)
		}
	}
	return out
}

// Start lets the guard act: first it hands back the fans a previous run
// held and did not return (restore, from run-state), then it reads the
// fans' limits; fans is the GPU's fan count (0: fanless, one line says so;
// negative: its static facts are not known yet, and nothing is called
// until FactsKnown).
func (g *Guard) Start(fans int, restore []int) {
	g.mu.Lock()
	g.started, g.restore = true, restore
	g.mu.Unlock()
	if fans >= 0 {
		g.FactsKnown(fans, nil)
	}
	g.poke()
}

// FactsKnown tells the guard its GPU's static facts are read (its handle
// open, its fan count known; a GPU that answered late): fans is the count,
// restore the fans a previous run held of it (its UUID known only now).
// Only the first call counts. A GPU whose facts are not known is never
// called: a call would block on the fault that delays them, or find no
// handle.
func (g *Guard) FactsKnown(fans int, restore []int) {
	g.mu.Lock()
	if g.fans >= 0 {
		g.mu.Unlock()
		return
	}
	g.fans, g.restore = fans, append(g.restore, restore...)
	fanless := fans == 0 && len(g.restore) == 0
	if fanless {
		g.ph = phaseFanless
	}
	g.mu.Unlock()
	if fanless {
		g.log.Info("fan guard: this GPU has no fans; nothing to guard")
	}
	g.poke()
}

func (g *Guard) poke() {
	select {
	case g.kick <- struct{}{}:
	default:
	}
}

// Run makes the driver calls until done is closed. A call stuck in the
// driver keeps Run with it: never wait for Run without a deadline.
func (g *Guard) Run(done <-chan struct{}) {
	for {
		select {
		case <-done:
			return
		case <-g.kick:
		}
		for g.step() {
		}
	}
}

// Observe takes one sample of the GPU, on its worker goroutine, after the
// detectors: it decides, hands the decision to Run without waiting, and
// flags the row while the guard holds the fans. now is the monotonic
// reading of the sample. It never calls the driver.
func (g *Guard) Observe(s *reading.Sample, now time.Duration) {
	g.mu.Lock()
	ph, started, closing, have := g.ph, g.started && g.fans >= 0, g.closing, g.have
	strandSpd := 0
	if len(g.stranded) > 0 {
		strandSpd = g.strandSpd
	}
	g.mu.Unlock()
	defer func() {
		switch {
		case have.fans > 0:
			s.Flags.Add(reading.Flag{Kind: reading.FlagFanGuard, // a row taken while the guard holds the fans
				A: int64(slices.Max(have.speed[:have.fans]))})
		case strandSpd > 0: // fans the driver would not take back: still at the speed commanded
			s.Flags.Add(reading.Flag{Kind: reading.FlagFanGuard, A: int64(strandSpd)})
		}
	}()
	if s.Status == reading.StatusLost {
		g.setPhase(phaseLost, "GPU lost", phaseReady, phaseStarting)
		return
	}
	if s.Status != reading.StatusAnswered || !started || closing {
		return
	}
	if ph == phaseStarting {
		g.poke() // the limits not read yet (the GPU's handle came late, a failed call): tried again
		return
	}
	if ph != phaseReady { // g.pol is set before the phase becomes ready, under mu
		return
	}
	in := Input{Now: now, TempC: s.U32(reading.TempC), Inversion: g.inv != 0 && s.Flags.Has(g.inv), Fans: min(s.NumFans, reading.MaxFans)}
	for i := range in.Fans {
		if v, ok := fanTarget.Get(s, i); ok {
			in.Targets[i] = reading.Some(v)
		}
		if v, ok := fanSpeed.Get(s, i); ok {
			in.Speeds[i] = reading.Some(v)
		}
	}
	if in.Inversion && have.fans > 0 && !g.toldInv {
		// The guard holds the fans and the die is still hot with slow fans:
		// the speed it commands is not what the fans run at.
		g.toldInv = true
		g.log.Warn("fan guard: a fan inversion while the guard holds the fans: the commanded speed is not taking effect",
			"speed_pct", slices.Max(have.speed[:have.fans]), "temp_c", optText(in.TempC))
	}
	d := g.pol.Step(in)
	if d.NoFloor != 0 {
		g.log.Warn("fan guard: neither the firmware's target nor the fan speed was read at the take-over; the floor is the curve's top",
			"fans", fanInts(bits(d.NoFloor)), "floor_pct", g.pol.Floor[bits(d.NoFloor)[0]])
	}
	if d == (Decision{}) {
		g.mu.Lock()
		retry := g.want.hold != (g.have.fans > 0) || (g.want.hold && g.want.speed != g.have.speed)
		g.mu.Unlock()
		if retry {
			g.poke() // a failed call, tried again once its back-off has passed
		}
		return
	}
	hold, fans := g.pol.Holding()
	g.mu.Lock()
	w := &g.want
	w.temp = in.TempC
	switch {
	case d.Engage:
		w.hold, w.fans, w.target0 = true, fans, g.pol.Target0
		w.why = "temperature"
		if in.Inversion && !(in.TempC.OK && int(in.TempC.V) >= g.o.Config.EngageC) {
			w.why = "fan inversion"
		}
	case d.Release:
		w.hold, w.why = false, "cooled"
	}
	if hold {
		w.speed = g.pol.Speed
	}
	g.mu.Unlock()
	g.poke()
}

// setPhase moves the guard to p (why says why) when it is in one of from.
func (g *Guard) setPhase(p phase, why string, from ...phase) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !slices.Contains(from, g.ph) {
		return false
	}
	g.ph, g.why = p, why
	return true
}

// checkHang declares the call in flight hung once it is past its deadline
// at now: counted and logged once, and the GPU's fans are not touched again.
func (g *Guard) checkHang(now time.Duration) {
	g.mu.Lock()
	g.hangLocked(g.inCall && now-g.callAt >= g.o.Config.CallDeadline, now)
}

// callOverdue is the deadline timer of call seq: it fires on a goroutine of
// its own, so a setter stuck while the GPU's samples are stuck too (the
// usual GSP fault: no sample reaches Observe) is recorded all the same.
func (g *Guard) callOverdue(seq uint64) {
	g.mu.Lock()
	g.hangLocked(g.inCall && g.callSeq == seq, g.o.Mono())
}

// hangLocked, with mu held (it unlocks it), declares the call in flight
// hung when overdue: counted, logged once, one events.log line.
func (g *Guard) hangLocked(overdue bool, now time.Duration) {
	hung := overdue && g.ph != phaseHung
	fn, since := g.callFn, max(now-g.callAt, g.o.Config.CallDeadline)
	if hung {
		g.ph, g.why = phaseHung, fn+" stuck in the driver"
	}
	g.mu.Unlock()
	if !hung {
		return
	}
	g.reg.Inc(fanGuardHangs)
	g.log.Error("fan guard: a fan setter is stuck in the driver; this GPU's fans are not touched again", "function", fn, "elapsed", since.Round(time.Millisecond))
	g.event(Event{Kind: EventHung, Fan: -1, Reason: fn + " stuck " + strconv.FormatInt(since.Milliseconds(), 10) + "ms"})
}

// InNVML reports whether a call is inside the driver (shutdown skips
// nvmlShutdown under a stuck call).
func (g *Guard) InNVML() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.inCall
}

// working reports whether the actuator is in a step.
func (g *Guard) working() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.busy || g.inCall
}

// call runs f as the driver function fn, marked in flight for checkHang.
// It reports false when the call was declared hung meanwhile.
// Once HandBack or Abandon began, no call is made but HandBack's own (ok
// false): nvmlShutdown may follow at any time.
func (g *Guard) call(fn string, f func() error) (ok bool, err error) {
	g.mu.Lock()
	if g.closing && !g.releasing {
		g.mu.Unlock()
		return false, nil
	}
	g.callSeq++
	seq := g.callSeq
	g.inCall, g.callFn, g.callAt = true, fn, g.o.Mono()
	g.mu.Unlock()
	t := time.AfterFunc(g.o.Config.CallDeadline, func() { g.callOverdue(seq) })
	err = f()
	t.Stop()
	now := g.o.Mono()
	g.checkHang(now)
	g.mu.Lock()
	g.inCall = false
	hung := g.ph == phaseHung
	g.mu.Unlock()
	return !hung, err
}

// step makes the next call that brings the driver to what is wanted; it
// reports whether there may be more to do.
func (g *Guard) step() bool {
	g.mu.Lock()
	if !g.started || g.fans < 0 || g.closing || g.ph > phaseReady || g.o.Mono() < g.retryAt {
		g.mu.Unlock()
		return false
	}
	g.busy = true
	defer func() {
		g.mu.Lock()
		g.busy = false
		g.mu.Unlock()
	}()
	if len(g.restore) > 0 {
		fans := g.restore
		g.restore = nil
		g.mu.Unlock()
		g.restorePrevious(fans)
		return true
	}
	if g.ph == phaseStarting {
		g.mu.Unlock()
		return g.readLimits()
	}
	w, have := g.want, g.have
	g.mu.Unlock()
	switch {
	case w.hold && have.fans < w.fans:
		return g.engage(w, have)
	case w.hold:
		return g.change(w, have)
	case have.fans > 0:
		return g.release(have, w.temp, w.why)
	}
	return false
}

// readLimits reads the fans' limits; the policy starts once they are known.
func (g *Guard) readLimits() bool {
	var lim Limits
	ok, err := g.call("nvmlDeviceGetMinMaxFanSpeed", func() (err error) { lim, err = g.o.Driver.Limits(); return err })
	if !ok || !g.outcome(err, -1) {
		return false
	}
	g.pol = NewPolicy(g.o.Config, lim)
	g.setPhase(phaseReady, "", phaseStarting)
	if lim.Min <= 0 {
		// Not an error: a GPU may not tell it. The floor is then the
		// firmware's target at the take-over alone (or the speed measured).
		g.log.Warn("fan guard: the GPU does not tell its fans' minimum speed; the floor is the firmware's target at the take-over")
	}
	g.log.Info("fan guard: watching", "engage_c", g.o.Config.EngageC, "release_c", g.o.Config.ReleaseC,
		"curve", g.o.Config.Curve.String(), "min_pct", lim.Min, "max_pct", lim.Max)
	return true
}

// engage takes the fans not taken yet (a failed call may have left some):
// recorded as held first, so that a run killed between two calls still has
// them handed back at the next start.
func (g *Guard) engage(w wanted, have applied) bool {
	if have.fans == 0 && !g.held(fanList(w.fans)) {
		return false
	}
	have.target0, have.temp = w.target0, w.temp
	for i := have.fans; i < w.fans; i++ {
		ok, err := g.call("nvmlDeviceSetFanSpeed_v2", func() error { return g.o.Driver.SetSpeed(i, w.speed[i]) })
		if !ok || !g.outcome(err, i) {
			g.mu.Lock()
			g.have = have // the fans taken so far
			g.mu.Unlock()
			g.giveUp(have)
			return false
		}
		have.fans, have.speed[i] = i+1, w.speed[i]
		g.reg.Inc(fanGuardChanges)
		g.event(Event{Kind: EventEngaged, Fan: i, Speed: reading.Some(uint32(w.speed[i])), Firmware: w.target0[i], TempC: w.temp, Reason: w.why})
	}
	g.mu.Lock()
	g.have = have
	g.mu.Unlock()
	g.log.Info("fan guard: took the fans from the firmware", "fans", fanText(w.fans), "speed_pct", slices.Max(w.speed[:w.fans]),
		"temp_c", optText(w.temp), "why", w.why)
	return true
}

// change sets the held fans whose speed differs from what is wanted.
func (g *Guard) change(w wanted, have applied) bool {
	for i := range have.fans {
		if w.speed[i] == have.speed[i] {
			continue
		}
		ok, err := g.call("nvmlDeviceSetFanSpeed_v2", func() error { return g.o.Driver.SetSpeed(i, w.speed[i]) })
		if !ok || !g.outcome(err, i) {
			g.giveUp(have)
			return false
		}
		g.mu.Lock()
		g.have.speed[i], g.have.temp = w.speed[i], w.temp
		g.mu.Unlock()
		g.reg.Inc(fanGuardChanges)
		g.event(Event{Kind: EventSet, Fan: i, Speed: reading.Some(uint32(w.speed[i])), Firmware: have.target0[i], TempC: w.temp})
	}
	return false
}

// release hands every held fan back to the firmware; why is the reason in
// its events.
func (g *Guard) release(have applied, temp reading.Opt[uint32], why string) bool {
	for i := range have.fans {
		ok, err := g.call("nvmlDeviceSetDefaultFanSpeed_v2", func() error { return g.o.Driver.SetDefault(i) })
		if !ok || !g.outcome(err, i) {
			return false
		}
		g.event(Event{Kind: EventReleased, Fan: i, Speed: reading.Some(uint32(have.speed[i])), Firmware: have.target0[i], TempC: temp, Reason: why})
	}
	g.mu.Lock()
	g.have = applied{}
	g.mu.Unlock()
	g.held(nil)
	g.log.Info("fan guard: handed the fans back to the firmware", "fans", fanText(have.fans), "temp_c", optText(temp), "why", why)
	return true
}

// restorePrevious hands back the fans a previous run held and did not
// return (killed, crashed): before the guard does anything else.
// A failed call has the fans not handed back yet tried again once its
// back-off has passed; a refusal, a lost or hung GPU leaves them in
// run-state for the next start or `gpu-telemetry fan-guard release`.
func (g *Guard) restorePrevious(fans []int) {
	for k, i := range fans {
		ok, err := g.call("nvmlDeviceSetDefaultFanSpeed_v2", func() error { return g.o.Driver.SetDefault(i) })
		if !ok {
			return
		}
		if !g.outcome(err, i) {
			g.mu.Lock()
			if g.ph == phaseStarting {
				g.restore = fans[k:]
			}
			g.mu.Unlock()
			return
		}
		g.event(Event{Kind: EventReleased, Fan: i, Reason: "held by the previous run"})
	}
	g.held(nil)
	g.log.Warn("fan guard: the previous run held these fans and did not hand them back (killed or crashed); handed back to the firmware first",
		"fans", fanInts(fans))
}

// held records the fans held; false (logged) when it could not be.
func (g *Guard) held(fans []int) bool {
	if g.o.Held == nil {
		return true
	}
	if err := g.o.Held(fans); err != nil {
		if fans != nil {
			// Taking the fans without a record would leave them held after a
			// SIGKILL with nothing to hand them back: not taken.
			g.failed("cannot record the fans held in run-state; not taking them", err)
			return false
		}
		g.log.Warn("fan guard: cannot record in run-state that the fans were handed back; the next start hands them back again", "error", err)
	}
	return true
}

// outcome classifies a call's result for fan (-1: the GPU): true when it
// succeeded. A refusal leaves the GPU to the firmware (fans taken so far
// are handed back), a lost GPU is never touched again, a failure is
// tried again after MinChange.
func (g *Guard) outcome(err error, fan int) bool {
	var r interface{ Refused() bool }
	var l interface{ Lost() bool }
	switch {
	case err == nil:
		return true
	case errors.As(err, &l) && l.Lost():
		g.setPhase(phaseLost, "GPU lost", phaseStarting, phaseReady)
		g.log.Warn("fan guard: GPU lost; its fans are not touched again", "error", err)
	case errors.As(err, &r) && r.Refused():
		g.refuse(err)
	default:
		g.failed("fan setter failed; tried again once its back-off has passed", err, slog.Int("fan", fan))
	}
	return false
}

// refuse leaves the GPU to the firmware: one WARN with the driver's reason,
// counted, and its events.log line (the caller hands back the fans taken:
// giveUp).
func (g *Guard) refuse(err error) {
	if !g.setPhase(phaseRefused, err.Error(), phaseStarting, phaseReady) {
		return
	}
	g.reg.Inc(fanGuardRefused)
	g.log.Warn("fan guard: the driver refuses fan control on this GPU; its fans are left to the firmware, recording goes on", "reason", err.Error())
	g.event(Event{Kind: EventRefused, Fan: -1, Reason: err.Error()})
}

// giveUp hands back the fans taken so far after a refusal: the driver
// that refused one call may still take the hand-back. A fan it does not
// take back stays at the speed commanded: it stays in run-state (the next
// start or `gpu-telemetry fan-guard release` tries again), logged, counted,
// and the view says so.
func (g *Guard) giveUp(have applied) {
	g.mu.Lock()
	refused := g.ph == phaseRefused
	if refused {
		g.have = applied{}
	}
	g.mu.Unlock()
	if !refused {
		return
	}
	var left []int
	var errs []error
	for i := range have.fans {
		ok, err := g.call("nvmlDeviceSetDefaultFanSpeed_v2", func() error { return g.o.Driver.SetDefault(i) })
		if !ok { // hung, or shutting down: this fan and the rest stay
			left = append(left, fanList(have.fans)[i:]...)
			break
		}
		if err != nil {
			left, errs = append(left, i), append(errs, err)
		}
	}
	if len(left) == 0 {
		g.held(nil)
		return
	}
	g.mu.Lock()
	g.stranded, g.strandSpd = left, slices.Max(have.speed[:have.fans])
	g.mu.Unlock()
	if g.o.Held != nil {
		if err := g.o.Held(left); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		g.reg.Add(fanGuardFailures, uint64(len(errs))-1) // failed counts one
		g.failed("the driver did not take these fans back; they stay at the speed commanded, kept in run-state for the next start or 'gpu-telemetry fan-guard release'",
			errors.Join(errs...), slog.String("fans", fanInts(left)), slog.Int("speed_pct", slices.Max(have.speed[:have.fans])))
	}
}

// failed counts a failed call, logs the first, and holds the next try back
// for MinChange.
func (g *Guard) failed(msg string, err error, attrs ...slog.Attr) {
	g.mu.Lock()
	g.retryAt = g.o.Mono() + max(g.o.Config.MinChange, 100*time.Millisecond)
	first := !g.toldFail
	g.toldFail = true
	g.mu.Unlock()
	if g.reg.Add(fanGuardFailures, 1) == 1 || first {
		args := []any{"error", err.Error()}
		for _, a := range attrs {
			args = append(args, a)
		}
		g.log.Warn("fan guard: "+msg, args...)
	}
}

func (g *Guard) event(e Event) {
	if g.o.Event != nil {
		g.o.Event(e)
	}
}

// HandBack returns every held fan to the firmware at shutdown, waiting at
// most d: after the GPU's samples have stopped, before nvmlShutdown. A GPU
// lost, hung or refused is not touched; a call in flight that does not
// return in d is a hang, not waited for. It reports whether the guard
// holds no fan when it returns.
func (g *Guard) HandBack(d time.Duration) bool {
	g.mu.Lock()
	g.closing = true
	g.mu.Unlock()
	defer func() { // a call of the hand-back after its deadline is not made
		g.mu.Lock()
		g.releasing = false
		g.mu.Unlock()
	}()
	deadline := g.o.Mono() + d
	for g.working() { // the actuator's last step
		if g.o.Mono() >= deadline {
			g.checkHang(g.o.Mono())
			return false
		}
		time.Sleep(5 * time.Millisecond)
	}
	g.mu.Lock()
	have, ph, temp := g.have, g.ph, g.want.temp
	g.releasing = have.fans > 0 && ph == phaseReady
	g.mu.Unlock()
	if have.fans == 0 || ph != phaseReady {
		g.setPhase(phaseStopped, "", phaseReady, phaseStarting)
		return have.fans == 0
	}
	done := make(chan bool, 1)
	go func() { done <- g.release(have, temp, "shutdown") }()
	for {
		select {
		case ok := <-done:
			g.setPhase(phaseStopped, "", phaseReady)
			return ok
		case <-time.After(10 * time.Millisecond):
			if g.o.Mono() >= deadline {
				g.checkHang(g.o.Mono())
				return false
			}
		}
	}
}

// Abandon stops the guard without handing back (its GPU is stuck in the
// driver: shutdown leaves it alone): no further driver call is made.
func (g *Guard) Abandon() {
	g.mu.Lock()
	g.closing = true
	g.mu.Unlock()
}

// View is what the outputs show of a guard.
type View struct {
	State    string // watching, holding, no fans, refused, hung, GPU lost, starting, stopped, not handed back
	Why      string // why refused or hung; why it holds
	Fans     []int  // held
	Speed    int    // the highest speed commanded
	Firmware reading.Opt[uint32]
	TempC    reading.Opt[uint32]
}

// Holding reports whether the guard holds fans.
func (v View) Holding() bool { return len(v.Fans) > 0 }

// String is the status line's: "holding fans 0,1 at 78 % (firmware wanted 53 %), 73 °C".
func (v View) String() string {
	if !v.Holding() {
		if v.Why != "" {
			return v.State + " (" + v.Why + ")"
		}
		return v.State
	}
	if v.State != "holding" { // "not handed back: fans 0 at 76 % (the driver's reason)"
		s := v.State + ": fans " + fanInts(v.Fans) + " at " + strconv.Itoa(v.Speed) + " %"
		if v.Why != "" {
			s += " (" + v.Why + ")"
		}
		return s
	}
	s := "holding fans " + fanInts(v.Fans) + " at " + strconv.Itoa(v.Speed) + " %"
	if fw, ok := v.Firmware.Get(); ok {
		s += " (firmware wanted " + strconv.FormatUint(uint64(fw), 10) + " %)"
	}
	if t, ok := v.TempC.Get(); ok {
		s += ", " + strconv.FormatUint(uint64(t), 10) + " °C"
	}
	return s
}

// View returns the guard's state; safe from any goroutine, never waits on
// the driver.
func (g *Guard) View() View {
	g.mu.Lock()
	defer g.mu.Unlock()
	v := View{State: phaseNames[g.ph], Why: g.why}
	if g.have.fans > 0 {
		v.State, v.Why, v.Fans = "holding", g.want.why, fanList(g.have.fans)
		v.Speed = slices.Max(g.have.speed[:g.have.fans])
		for _, t := range g.have.target0[:g.have.fans] {
			if t.OK && (!v.Firmware.OK || t.V > v.Firmware.V) {
				v.Firmware = t
			}
		}
		v.TempC = g.have.temp
	}
	if len(g.stranded) > 0 {
		v.State, v.Fans, v.Speed = "not handed back", slices.Clone(g.stranded), g.strandSpd
	}
	return v
}

func fanList(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

func fanText(n int) string { return fanInts(fanList(n)) }

func fanInts(fans []int) string {
	s := make([]string, len(fans))
	for i, f := range fans {
		s[i] = strconv.Itoa(f)
	}
	return strings.Join(s, ",")
}

func optText(o reading.Opt[uint32]) string {
	if v, ok := o.Get(); ok {
		return strconv.FormatUint(uint64(v), 10)
	}
	return ""
}
