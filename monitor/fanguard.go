package monitor

import (
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/fanguard"
	"github.com/gpu-telemetry/gpu-telemetry/live"
	"github.com/gpu-telemetry/gpu-telemetry/runstate"
	"github.com/gpu-telemetry/gpu-telemetry/sampler"
	"github.com/gpu-telemetry/gpu-telemetry/sink"
)

// The fan guard's wiring (--fan-guard; package fanguard decides and makes
// the calls): one guard per GPU, observing each sample after the detectors
// and before the row is written (its flag is on the row), its calls on a
// goroutine of its own; its events to events.log, the fans it holds to
// run-state, its state to the published view and the snapshot headers.
// Without --fan-guard gs.fan is nil and nothing here runs.

// fanHandBack bounds the fans' hand-back at shutdown (every GPU's at once).
const fanHandBack = 2 * time.Second

// fanDriver is the sampler's fan setters as fanguard.Driver.
type fanDriver struct{ sampler.FanControl }

// Limits reads the fans' limits. A GPU that does not tell them (the driver
// answers not supported) is guarded without (the guard logs it): the
// firmware's target still bounds the speed from below, and the driver
// refuses a speed out of range.
func (d fanDriver) Limits() (fanguard.Limits, error) {
	lo, hi, err := d.MinMax()
	var fe *sampler.CallError
	if errors.As(err, &fe) && fe.Class == sampler.ClassNotSupported {
		return fanguard.Limits{}, nil
	}
	return fanguard.Limits{Min: lo, Max: hi}, err
}

// newFanGuard returns gs's guard; nil without --fan-guard. Its events are
// FAN_GUARD lines; the fans it holds are recorded in run-state by the
// GPU's UUID.
func (m *Monitor) newFanGuard(gs *gpuState) *fanguard.Guard {
	if m.cfg.FanGuard == nil {
		return nil
	}
	event := func(e fanguard.Event) { m.eventLine(gs.event(time.Now(), sink.TypeFanGuard, e.Fields()...)) }
	return fanguard.New(fanguard.Options{Config: *m.cfg.FanGuard, GPU: gs.idx, Driver: fanDriver{gs.g.FanControl()},
		Log: m.log, Counters: m.reg, Mono: m.cfg.mono, Event: event, Held: func(fans []int) error {
			uuid := gs.g.Info().UUID
			if uuid == "" {
				return errors.New("the GPU's UUID is not known yet")
			}
			return m.runState.Save(func(s *runstate.State) bool {
				s.FanGuard = slices.DeleteFunc(slices.Clone(s.FanGuard), func(h runstate.FanHold) bool { return h.UUID == uuid })
				if len(fans) > 0 {
					s.FanGuard = append(s.FanGuard, runstate.FanHold{UUID: uuid, Fans: fans})
				}
				return true
			})
		}})
}

// startFanGuards runs once this run's state is recorded, with the fans the
// previous run held and did not hand back (killed, crashed): they stay in
// run-state until handed back (runstate.Begin kept them), each guard hands
// back its GPU's first (runstate.Saver.ClaimFans), and then it watches. A
// GPU whose static facts are not known yet (it did not answer at start) is
// not touched until they are, nor the previous run's fans of a GPU whose
// UUID is not known yet handed back until it is (lateFacts). Without --fan-guard nothing
// is touched: one WARN says how to hand them back.
func (m *Monitor) startFanGuards() {
	if m.cfg.FanGuard == nil {
		if prev := m.runState.UnclaimedFans(); len(prev) > 0 {
			m.log.Warn("the previous run's fan guard held fans and did not hand them back; --fan-guard is off, so they are left as they are: run 'gpu-telemetry fan-guard release'",
				"gpus", runstate.HoldsText(prev))
		}
		return
	}
	late := 0
	for _, gs := range m.gpus {
		if !gs.g.FactsKnown() {
			late++
			gs.fan.Start(-1, nil) // lateFacts starts it
			continue
		}
		uuid := gs.g.Info().UUID
		if uuid == "" {
			late++ // its UUID unread at start: lateFacts claims its fans once it is read
		}
		gs.fan.Start(gs.g.Info().NumFans, m.runState.ClaimFans(uuid))
	}
	rest := m.runState.UnclaimedFans()
	if len(rest) == 0 {
		return
	}
	if late > 0 {
		m.log.Warn("the previous run's fan guard held fans of GPUs not known yet; handed back if one of them answers, else left as they are (gpu-telemetry fan-guard release)",
			"gpus", runstate.HoldsText(rest), "gpus_not_answering", late)
		return
	}
	m.log.Warn("the previous run's fan guard held fans of GPUs this run does not monitor; left as they are (gpu-telemetry fan-guard release)", "gpus", runstate.HoldsText(rest))
}

// handBackFans returns every held fan to the firmware at shutdown, after
// the workers are waited for and before the files close (its events.log
// lines are written) and nvmlShutdown. A GPU whose sample is still stuck
// in the driver is not touched. It returns the GPUs whose guard call is
// stuck.
func (m *Monitor) handBackFans(stuck []string) []string {
	var out []string
	var wg sync.WaitGroup
	for _, gs := range m.gpus {
		if gs.fan == nil {
			continue
		}
		// waitWorkers names a GPU "3", or "3 (process list)".
		if i := slices.IndexFunc(stuck, func(s string) bool { return strings.HasPrefix(s+" ", strconv.Itoa(gs.idx)+" ") }); i >= 0 {
			// A sample or a process read stuck in the driver: a setter call
			// would block on the same fault.
			gs.fan.Abandon()
			m.log.Warn("fan guard: GPU stuck in the driver; its fans are left as they are (run-state keeps them for the next start)",
				"gpu", gs.idx, "stuck", stuck[i])
			continue
		}
		wg.Go(func() { gs.fan.HandBack(fanHandBack) })
	}
	wg.Wait() // HandBack is bounded
	for _, gs := range m.gpus {
		if gs.fan == nil {
			continue
		}
		fv := gs.fanView() // no sample publishes it again
		gs.slot.Update(func(g *live.GPU) { g.FanGuard = fv })
		if gs.fan.InNVML() {
			out = append(out, strconv.Itoa(gs.idx)+" (fan guard)")
		}
	}
	m.cfg.trace("fans-handed-back")
	return out
}

// fanView is the guard's state for the published view; nil without it.
func (gs *gpuState) fanView() *live.FanGuard {
	if gs.fan == nil {
		return nil
	}
	v := gs.fan.View()
	out := &live.FanGuard{State: v.State, Why: v.Why, Fans: v.Fans, Text: v.String()}
	if v.Holding() {
		out.SpeedPct = &v.Speed
		if fw, ok := v.Firmware.Get(); ok {
			out.FirmwarePct = &fw
		}
		if t, ok := v.TempC.Get(); ok {
			out.TempC = &t
		}
	}
	return out
}
