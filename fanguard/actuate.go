package fanguard

// The guard's driver calls: each on its own goroutine with a deadline, the
// hang rules, and the hand-back on every exit path.

import (
	"errors"
	"log/slog"
	"slices"
	"strconv"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

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
		fans, holding := g.restore, g.have.fans
		g.restore = nil
		g.mu.Unlock()
		g.restorePrevious(fans, holding)
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
// return (killed, crashed): before the guard does anything else. The first
// holding fans are this run's already (a UUID known only after the guard
// took them, Restore): they are handed back with the guard's own, and stay
// recorded as held.
// A failed call has the fans not handed back yet tried again once its
// back-off has passed; a refusal, a lost or hung GPU leaves them in
// run-state for the next start or `gpu-telemetry fan-guard release`.
func (g *Guard) restorePrevious(fans []int, holding int) {
	fans = slices.DeleteFunc(slices.Clone(fans), func(i int) bool { return i < holding })
	if len(fans) == 0 {
		return
	}
	for k, i := range fans {
		ok, err := g.call("nvmlDeviceSetDefaultFanSpeed_v2", func() error { return g.o.Driver.SetDefault(i) })
		if !ok {
			return
		}
		if !g.outcome(err, i) {
			g.mu.Lock()
			if g.ph <= phaseReady { // a failure: after its back-off (a refusal or a lost GPU left the phase)
				g.restore = append(slices.Clone(fans[k:]), g.restore...)
			}
			g.mu.Unlock()
			return
		}
		g.event(Event{Kind: EventReleased, Fan: i, Reason: "held by the previous run"})
	}
	var still []int // this run's, recorded again: the previous run's record of the GPU is gone
	if holding > 0 {
		still = fanList(holding)
	}
	g.held(still)
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
