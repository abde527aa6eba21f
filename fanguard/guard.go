package fanguard

import (
	"cmp"
	"log/slog"
	"slices"
	"strconv"
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

// Fields are the event's FAN_GUARD line's key=value pairs (events.log):
// kind, fan (absent for the GPU as a whole), speed_pct, firmware_pct,
// temp_c (empty when not known) and reason.
func (e Event) Fields() []string {
	kv := []string{"kind", e.Kind}
	if e.Fan >= 0 {
		kv = append(kv, "fan", strconv.Itoa(e.Fan))
	}
	return append(kv, "speed_pct", optText(e.Speed), "firmware_pct", optText(e.Firmware), "temp_c", optText(e.TempC), "reason", e.Reason)
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
	// Added to what a FactsKnown before Start gave (a GPU that answered
	// before the monitor started its guard): both are to hand back.
	g.started, g.restore = true, append(g.restore, restore...)
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

// Restore hands back fans a previous run held of the GPU whose UUID became
// known after its other facts (FactsKnown came without them): first, as
// Start's. A guard that no longer calls the driver (refused, hung, lost,
// stopped) leaves them, logged: run-state keeps them for the next start.
func (g *Guard) Restore(fans []int) {
	if len(fans) == 0 {
		return
	}
	g.mu.Lock()
	g.restore = append(g.restore, fans...)
	if g.ph == phaseFanless {
		g.ph = phaseStarting // a fan count of 0 with fans to hand back: as Start's
	}
	ph := g.ph
	g.mu.Unlock()
	if ph > phaseReady {
		g.log.Warn("fan guard: the previous run held fans of this GPU; the guard makes no more calls, so they are left as they are (run-state keeps them: gpu-telemetry fan-guard release)",
			"fans", fanInts(fans), "state", phaseNames[ph])
		return
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
		retry := g.want.hold != (g.have.fans > 0) || (g.want.hold && g.want.speed != g.have.speed) || len(g.restore) > 0
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
