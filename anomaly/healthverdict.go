package anomaly

import (
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/action"
	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

// HealthReason is one reason a GPU's hardware health is not ok. Each is
// declared once in HealthReasonDefs with its level; every output (status,
// metrics, flags) walks that table.
type HealthReason uint8

// The health reasons. Thresholds come from DCGM's health watches
// (NVIDIA/DCGM modules/health/DcgmHealthWatch.cpp, common/DcgmGPUHardwareLimits.h)
// where DCGM has one; the others say where they come from.
const (
	// critical
	ReasonDBE                  HealthReason = iota // volatile DBE count > 0 (DCGM memory watch: fail)
	ReasonRemapFailure                             // a row remap failed (DCGM: fail)
	ReasonNVLinkDown                               // a link present is not active (DCGM: a link down fails; gpud issue 1085: every link inactive was reported healthy)
	ReasonNVLinkRecoveryFailed                     // NVLink5 failed link recovery count grew (DCGM: fail)
	ReasonC2CErrors                                // C2C CRC or replay errors grew (no DCGM watch; any error on a chip-to-chip link)
	ReasonRecoveryAction                           // recovery action reset, reboot, drain and reset, or one newer than we know (DCGM: fail)
	ReasonMemoryUnrepairable                       // the unrepairable-memory flag is set (issue 25: critical; NVIDIA: the GPU needs an RMA)
	ReasonFabricError                              // the fabric probe completed with an error status (nvml.h: status is meaningful once completed; CUDA cannot use the fabric)
	ReasonFabricConfig                             // the fabric health mask reports an incorrect configuration (nvml.h NVML_GPU_FABRIC_HEALTH_MASK_INCORRECT_CONFIGURATION_*)
	ReasonFabricRouteUnhealthy                     // the fabric health mask reports an unhealthy route (NVML_GPU_FABRIC_HEALTH_MASK_ROUTE_UNHEALTHY_TRUE)
	ReasonNVSwitchFatal                            // an NVSwitch logged a fatal SXid (xid.SXidInfo.Fatal): raised by the event (Tracker.Raise), not read from a sample
	// warning
	ReasonRemapPending     // a row remap waits for a reset (DCGM does not check it; it needs a reset to apply)
	ReasonRemapNearLimit   // uncorrectable remaps >= 512 (DCGM: warn)
	ReasonSBERate          // single-bit errors grew by >= SBERatePerMin within a minute (our choice: DCGM has no SBE watch; Xid 92 reports high SBE rates)
	ReasonPCIeReplays      // PCIe replays above DCGM's per-generation rate x width within a minute (DCGM: warn)
	ReasonNVLinkErrors     // NVLink error counters grew (DCGM NVLink5 fails on any delta; reported here as a warning, the link-down and failed-recovery reasons are the critical ones)
	ReasonNVLinkRecovered  // successful NVLink link recoveries grew (DCGM: warn)
	ReasonHWSlowdown       // HW thermal slowdown or HW power brake time grew (DCGM thermal/power watch: warn)
	ReasonRecoveryDrainP2P // recovery action drain P2P (DCGM: warn)
	ReasonRepairPending    // a channel or TPC repair waits for a reset (like a pending remap: it needs a reset to apply)
	ReasonSRAMThreshold    // the SRAM ECC error threshold of field diagnostics is exceeded (NVML's flag; our choice: a warning)
	ReasonPCIeDegraded     // the pcie_degraded detector flagged the busy GPU's link below its maximum (no DCGM watch; NVIDIA/NVSentinel issue 890)
	NumHealthReasons
)

// HealthReasonDef declares one health reason.
type HealthReasonDef struct {
	Name     string // status, metrics label, flag text
	Critical bool
	Help     string
	// Action is the repair it asks for (anomaly.Causes); the recovery
	// action's reasons leave it to the action's value (RecoveryAction).
	Action action.Action
	// Readings are what it is judged from: the repair action takes it
	// for absent only where one of them is present, any one of which lets
	// the verdict judge it (nvlink_down: the links up alone, as the link
	// count cannot show a link down gone; none: an event's, judged where
	// any reading of the sample is; sourceOf).
	Readings []reading.ID
}

// HealthReasonDefs declares every reason, indexed by HealthReason.
var HealthReasonDefs = [NumHealthReasons]HealthReasonDef{
	ReasonDBE:                  {"ecc_dbe", true, "double-bit ECC errors since the driver loaded", action.ResetGPU, []reading.ID{reading.HDBEVolatile}},
	ReasonRemapFailure:         {"remap_failure", true, "a row remap failed", action.Inspect, []reading.ID{reading.HRemapFailure}},
	ReasonNVLinkDown:           {"nvlink_down", true, "an NVLink link is not active", action.ResetGPU, []reading.ID{reading.HNVLinkUp}},
	ReasonNVLinkRecoveryFailed: {"nvlink_recovery_failed", true, "an NVLink link recovery failed", action.ResetGPU, []reading.ID{reading.HNVLinkRecoveryFailed}},
	ReasonC2CErrors:            {"c2c_errors", true, "C2C link errors grew", action.Watch, []reading.ID{reading.HC2CErrors}},
	ReasonRecoveryAction:       {"recovery_action", true, "the driver asks for a GPU reset, a reboot or a drain and reset", action.None, []reading.ID{reading.HRecoveryAction}},
	ReasonMemoryUnrepairable:   {"memory_unrepairable", true, "the GPU has memory that can no longer be repaired", action.Inspect, []reading.ID{reading.HMemoryUnrepairable}},
	// The fabric's: recover the fabric the GPU belongs to (NVML's recovery
	// action 5, "recover IMEX domain", asks the same of a fabric fault).
	ReasonFabricError:          {"fabric_error", true, "the NVLink fabric probe completed with an error status", action.RecoverFabric, []reading.ID{reading.HFabricState}},
	ReasonFabricConfig:         {"fabric_config", true, "the NVLink fabric reports an incorrect configuration", action.RecoverFabric, []reading.ID{reading.HFabricHealth}},
	ReasonFabricRouteUnhealthy: {"fabric_route_unhealthy", true, "the NVLink fabric reports an unhealthy route", action.RecoverFabric, []reading.ID{reading.HFabricHealth}},
	// A fatal SXid stops the switch port's traffic for every GPU of the
	// baseboard; NVIDIA's Fabric Manager User Guide (DU-09883-001, "Error
	// Handling", NVSwitch fatal errors) asks for the baseboard's GPUs and
	// NVSwitches to be reset together (nvidia-smi -r resets them as one
	// set on an NVSwitch system), a reboot if that fails: a GPU reset, not a
	// recovery of the fabric manager's partition.
	ReasonNVSwitchFatal:    {"nvswitch_fatal", true, "an NVSwitch of the GPU's baseboard logged a fatal SXid", action.ResetGPU, nil},
	ReasonRemapPending:     {"remap_pending", false, "a row remap waits for a GPU reset", action.ResetGPU, []reading.ID{reading.HRemapPending}},
	ReasonRemapNearLimit:   {"remap_near_limit", false, "512 or more rows remapped for uncorrectable errors", action.Watch, []reading.ID{reading.HRemapUncorrectable}},
	ReasonSBERate:          {"ecc_sbe_rate", false, "single-bit ECC errors at a high rate", action.Watch, []reading.ID{reading.HSBEVolatile}},
	ReasonPCIeReplays:      {"pcie_replays", false, "PCIe replays above DCGM's rate for the link", action.Watch, []reading.ID{reading.PCIeReplay}},
	ReasonNVLinkErrors:     {"nvlink_errors", false, "NVLink error counters grew", action.Watch, []reading.ID{reading.HNVLinkErrors}},
	ReasonNVLinkRecovered:  {"nvlink_recovered", false, "NVLink links went through recovery", action.Watch, []reading.ID{reading.HNVLinkRecovery}},
	ReasonHWSlowdown:       {"hw_slowdown", false, "time in HW thermal slowdown or HW power brake grew", action.Watch, []reading.ID{reading.HClkHWThermal, reading.HClkHWPowerBrake}},
	ReasonRecoveryDrainP2P: {"recovery_drain_p2p", false, "the driver asks to drain peer-to-peer traffic", action.None, []reading.ID{reading.HRecoveryAction}},
	ReasonRepairPending:    {"repair_pending", false, "a memory channel or TPC repair waits for a GPU reset", action.ResetGPU, []reading.ID{reading.HChannelRepairPending, reading.HTPCRepairPending}},
	ReasonSRAMThreshold:    {"sram_threshold", false, "the SRAM ECC error threshold is exceeded", action.Watch, []reading.ID{reading.HSRAMThreshold}},
	// A link that trains down under load is a failing riser, retimer or
	// slot, or a board not seated after maintenance (NVIDIA/NVSentinel
	// issue 890): it does not heal by waiting, hands on the hardware do.
	ReasonPCIeDegraded: {"pcie_degraded", false, "the PCIe link runs below its maximum while the GPU is busy", action.Inspect, []reading.ID{reading.PCIeGen, reading.PCIeWidth}},
}

// eventReasons are the reasons an event raises (Tracker.Raise) rather than a
// sample's readings: they hold until cleared (Tracker.Clear: an operator's
// acknowledgement); a restart in the same boot restores them (Tracker.Restore)
// from the board's history, as an Xid's repair does.
const eventReasons = 1 << ReasonNVSwitchFatal

// IsEventReason reports whether r is raised by an event (Tracker.Raise)
// rather than read from a sample.
func IsEventReason(r HealthReason) bool { return r < NumHealthReasons && eventReasons&(1<<r) != 0 }

// Thresholds of the health watches.
const (
	// RemapUncLimit: DCGM warns at 512 uncorrectable row remaps.
	RemapUncLimit = 512
	// SBERatePerMin is our threshold for ReasonSBERate (DCGM has none).
	SBERatePerMin = 10
	// healthWindow is the window of the per-minute rates (DCGM's health
	// watches judge the last minute).
	healthWindow = time.Minute
	// healthHold is how long a warning that came from growth stays in the
	// verdict after the last growth (the status check's "last 10 minutes").
	healthHold = 10 * time.Minute
	// kernelGapMax is the longest kernel-clock gap between consecutive
	// samples that is still one continuous run (healthWatch.stampOf): a
	// sample every 100 ms by default, its health counters every second, a
	// 10 s --interval with its jitter within it; boot B's logger starting
	// 30 s past boot A's last uptime is not.
	kernelGapMax = 15 * time.Second
)

// stamp is when a sample was taken, on both clocks it carries. The windows
// and the hold are measured on the monotonic one (reading.Sample.KernelTime,
// what dmesg_time writes), so that a step of the wall clock (chrony's
// makestep, date -s) neither keeps a window open for the hour it went back,
// adding a slow rate up to a burst, nor closes one early, splitting a burst
// in two, nor stretches or cuts the hold. This matters for report's replay:
// a row's timestamp has no Go monotonic reading, while the daemon's wall
// times (time.Now) have one, which wall.Sub uses.
type stamp struct {
	wall time.Time
	mono time.Duration // 0: none (a row of a file without dmesg_time; a test's sample)
}

// since is how long after u t was: on the monotonic clock where both carry
// it (healthWatch.stampOf drops it from the stamps kept when the run the
// kernel clock was trusted in ends); else on the wall clock.
func (t stamp) since(u stamp) time.Duration {
	if t.mono > 0 && u.mono > 0 && t.mono >= u.mono {
		return t.mono - u.mono
	}
	return t.wall.Sub(u.wall)
}

// pcieReplayRatePerLane is DCGM's replay rate per lane per minute by PCIe
// generation (index = generation; DCGM's DcgmGPUHardwareLimits.h).
var pcieReplayRatePerLane = [...]float64{0, 0.15, 0.30, 0.60, 0.96, 1.92, 3.84}

// PCIeReplayLimit returns DCGM's replays-per-minute warning limit for a
// link of generation gen and width lanes: ceil(rate x width) (Gen5 x16: 31).
func PCIeReplayLimit(gen, width uint32) (uint64, bool) {
	if gen == 0 || width == 0 {
		return 0, false
	}
	g := min(int(gen), len(pcieReplayRatePerLane)-1)
	lim := pcieReplayRatePerLane[g] * float64(width)
	n := uint64(lim)
	if float64(n) < lim {
		n++
	}
	return n, true
}

// HealthVerdict is a GPU's hardware health: the reasons that hold now.
type HealthVerdict struct {
	Reasons uint32 // bit r: HealthReason r holds
}

// Has reports whether reason r holds.
func (v HealthVerdict) Has(r HealthReason) bool { return v.Reasons&(1<<r) != 0 }

// Level is "ok", "warning" or "critical".
func (v HealthVerdict) Level() string {
	lvl := "ok"
	for r := range NumHealthReasons {
		if v.Has(r) {
			if HealthReasonDefs[r].Critical {
				return "critical"
			}
			lvl = "warning"
		}
	}
	return lvl
}

// Names lists the reasons that hold, critical first, in table order.
func (v HealthVerdict) Names() []string {
	var out []string
	for r := range NumHealthReasons {
		if v.Has(r) {
			out = append(out, HealthReasonDefs[r].Name)
		}
	}
	return out
}

// ReasonNamed returns the reason HealthReasonDefs names name (a flag's or
// an events.log line's reason=).
func ReasonNamed(name string) (HealthReason, bool) {
	for r := range NumHealthReasons {
		if HealthReasonDefs[r].Name == name {
			return r, true
		}
	}
	return 0, false
}

// HealthWatch judges a GPU's health counters sample by sample, as the
// Tracker does: a reader of the logger's rows (report) replays them through
// it to know how long each reason held. The zero value is ready.
type HealthWatch struct{ w healthWatch }

// Check judges sample s at now (its wall time); samples come in time order.
func (h *HealthWatch) Check(s *reading.Sample, now time.Time) HealthVerdict { return h.w.check(s, now) }

// Began records that reason r began at sample s, now being its wall time,
// as the logger's flag on a row says (or a detector's flag that is its
// evidence, FlagReason): a reason from growth is then held from s, as the
// Tracker held it, also when the growth that raised it came before the
// first sample replayed. A state reason holds only while its reading does.
func (h *HealthWatch) Began(r HealthReason, s *reading.Sample, now time.Time) {
	if r < NumHealthReasons {
		h.w.held[r] = h.w.stampOf(s, now)
		if IsEventReason(r) {
			h.w.raised |= 1 << r // held to the end of the replay: its clearing is not on a row
		}
	}
}

// healthWatch judges the health counters over time: state reasons from the
// current reading, growth reasons from the last minute, held for
// healthHold after the last growth. It is pure: time arrives as a value.
type healthWatch struct {
	last     [reading.NumReadings]reading.Opt[uint64] // last present value of each counter
	base     [reading.NumReadings]reading.Opt[uint64] // value at the start of the current window
	baseAt   [reading.NumReadings]stamp
	replay   reading.Opt[uint64] // PCIe replay counter at the window start
	replayAt stamp
	lastLink reading.Opt[uint64]     // links seen active at most (ReasonNVLinkDown)
	held     [NumHealthReasons]stamp // growth reasons: when last seen
	raised   uint32                  // event reasons begun (HealthWatch.Began)
	baseline bool                    // the first reading was reported
	mono     time.Duration           // the last KernelTime seen (stampOf)
}

// stampOf is sample s's stamp, now being its wall time. The kernel clock
// is trusted only between consecutive samples of one continuous run: where
// s's is behind the last sample's or more than kernelGapMax ahead of it,
// the stamps kept so far lose theirs and are measured on the wall clock
// from then on. Rows carry no boot id, so a reboot within a file report
// replays with one watch shows only as such a gap: boot B's dmesg_time
// starts again below boot A's, or (its logger started late) past it, and
// boot A's stamp at uptime 2h compared with boot B's uptime would have
// boot A's warning held again when boot B reaches 2h. A step back of
// dmesg_time's estimate, or a GPU that did not answer for longer, falls
// back to the wall clock too, as the watch measured before it had one.
func (w *healthWatch) stampOf(s *reading.Sample, now time.Time) stamp {
	if k := s.KernelTime; k > 0 {
		if w.mono > 0 && (k < w.mono || k-w.mono > kernelGapMax) {
			for i := range w.baseAt {
				w.baseAt[i].mono = 0
			}
			for i := range w.held {
				w.held[i].mono = 0
			}
			w.replayAt.mono = 0
		}
		w.mono = k
	}
	return stamp{now, s.KernelTime}
}

// grew reports the growth of counter id since its window started (a
// drop, after a driver reload, restarts the window).
func (w *healthWatch) grew(id reading.ID, now stamp, cur reading.Opt[uint64]) uint64 {
	v, ok := cur.Get()
	if !ok {
		return 0
	}
	b, bok := w.base[id].Get()
	if !bok || v < b || now.since(w.baseAt[id]) >= healthWindow {
		d := uint64(0)
		if bok && v >= b {
			d = v - b
		}
		w.base[id], w.baseAt[id] = cur, now
		return d
	}
	return v - b
}

// check judges sample s, wall being its wall time, and returns the verdict.
func (w *healthWatch) check(s *reading.Sample, wall time.Time) HealthVerdict {
	h, now := &s.Values, w.stampOf(s, wall)
	v := HealthVerdict{Reasons: w.raised}
	set := func(r HealthReason, on bool) {
		if on {
			v.Reasons |= 1 << r
		}
	}
	hold := func(r HealthReason, on bool) {
		if on {
			w.held[r] = now
		}
		if t := w.held[r]; !t.wall.IsZero() && now.since(t) < healthHold {
			v.Reasons |= 1 << r
		}
	}
	val := func(id reading.ID) (uint64, bool) { return h[id].Get() }
	inc := func(id reading.ID) bool {
		c, ok := h[id].Get()
		p, pok := w.last[id].Get()
		return ok && pok && c > p
	}

	if n, ok := val(reading.HDBEVolatile); ok {
		set(ReasonDBE, n > 0)
	}
	if n, ok := val(reading.HRemapFailure); ok {
		set(ReasonRemapFailure, n != 0)
	}
	if n, ok := val(reading.HRemapPending); ok {
		set(ReasonRemapPending, n != 0)
	}
	if n, ok := val(reading.HMemoryUnrepairable); ok {
		set(ReasonMemoryUnrepairable, n != 0)
	}
	if st, ok := val(reading.HFabricState); ok && st == reading.FabricCompleted {
		if e, ok := val(reading.HFabricStatus); ok {
			set(ReasonFabricError, e != 0)
		}
	}
	if m, ok := val(reading.HFabricHealth); ok {
		set(ReasonFabricConfig, reading.FabricBadConfig(m) != "")
		set(ReasonFabricRouteUnhealthy, reading.FabricTrue(m, reading.FabricRouteUnhealthy))
	}
	ch, chOK := val(reading.HChannelRepairPending)
	tpc, tpcOK := val(reading.HTPCRepairPending)
	set(ReasonRepairPending, (chOK && ch != 0) || (tpcOK && tpc != 0))
	if n, ok := val(reading.HSRAMThreshold); ok {
		set(ReasonSRAMThreshold, n != 0)
	}
	if n, ok := val(reading.HRemapUncorrectable); ok {
		set(ReasonRemapNearLimit, n >= RemapUncLimit)
	}
	if links, ok := val(reading.HNVLinkCount); ok && links > 0 {
		if up, ok := val(reading.HNVLinkUp); ok {
			set(ReasonNVLinkDown, up < min(links, reading.MaxLinks))
		}
	}
	hold(ReasonNVLinkRecoveryFailed, inc(reading.HNVLinkRecoveryFailed))
	hold(ReasonC2CErrors, inc(reading.HC2CErrors))
	hold(ReasonNVLinkErrors, inc(reading.HNVLinkErrors))
	hold(ReasonNVLinkRecovered, inc(reading.HNVLinkRecovery))
	hold(ReasonHWSlowdown, inc(reading.HClkHWThermal) || inc(reading.HClkHWPowerBrake))
	if a, ok := val(reading.HRecoveryAction); ok {
		set(ReasonRecoveryAction, a != 0 && a != 3)
		set(ReasonRecoveryDrainP2P, a == 3)
	}
	hold(ReasonSBERate, w.grew(reading.HSBEVolatile, now, h[reading.HSBEVolatile]) >= SBERatePerMin)

	// PCIe replays: the sample's own replay counter (a 100 ms column) against
	// DCGM's limit for the link's current generation and width.
	var replays bool
	if r, ok := s.Values[reading.PCIeReplay].Get(); ok {
		b, bok := w.replay.Get()
		switch {
		case !bok || r < b || now.since(w.replayAt) >= healthWindow:
			w.replay, w.replayAt = s.Values[reading.PCIeReplay], now
		default:
			if lim, ok := PCIeReplayLimit(s.U32(reading.PCIeGen).V, s.U32(reading.PCIeWidth).V); ok && s.U32(reading.PCIeGen).OK && s.U32(reading.PCIeWidth).OK {
				replays = r-b > lim
			}
		}
	}
	hold(ReasonPCIeReplays, replays)
	// A detector's judgement over time (pcieDegradedDef.Evidence): begun by
	// its flag (Began), held like a growth reason after the last one, so
	// that a downtrained link does not come and go with the load.
	hold(ReasonPCIeDegraded, false)

	for _, id := range reading.HealthIDs {
		if c := h[id]; c.OK {
			w.last[id] = c
		}
	}
	return v
}
