package reading

import (
	"math"
	"strconv"
	"strings"
)

// The table of readings: every scalar value of a Sample is declared once
// here, with where NVML gives it, how often it is read, its unit and sane
// range, and the outputs it reaches. The sampler plans its field batch and
// checks values against it, the CSV writer lays out its columns from it,
// the status document gives each reading with a Key under that key;
// sampler's TestTableIsRead and sink's TestTableReachesCSV walk it to check
// that every reading is read and reaches the column it declares.
//
// A reading NVML gives as a field value (nvmlDeviceGetFieldValues) is a row
// with its Field ID and nothing else anywhere: the sampler adds it to the
// sample's one batched call and stores what comes back. A getter reading
// names its NVML function in Getter; its call is the sampler's only code for
// it.

// Tier is how often a reading is read.
type Tier uint8

const (
	// EverySample: read in every sample.
	EverySample Tier = iota
	// Secondary: read every sample unless the pacer stretches it (NVML too
	// slow for the interval); carried forward in between.
	Secondary
	// Slow: read about once a second (the slow tier), carried forward in
	// between.
	Slow
)

// Format is how a CSV cell writes a reading's value (Def.AppendCell; read
// back by Def.ParseCell).
type Format uint8

const (
	Plain     Format = iota // the stored value in decimal
	Watts                   // milliwatts as whole watts, rounded (the seed's "%.0f")
	CentiWatt               // milliwatts as watts with 2 decimals (the seed's power_instant)
	MiB                     // bytes as whole MiB, truncated
	Hex4                    // "0x" and at least 4 hex digits (the seed's "0x%04x")
	Seconds                 // nanoseconds as seconds with 3 decimals (AppendSeconds)
)

// DocForm is how the status document gives a reading's value under its Key.
type DocForm uint8

const (
	DocPlain   DocForm = iota // the stored value, an integer
	DocMilli                  // the stored value / 1000, a number (W from mW, J from mJ)
	DocReasons                // a clocks event mask as the names of its bits in ThrottleReasons ([] none)
)

// Call is the NVML call that reads a field reading's Field.
type Call uint8

const (
	// SampleCall: the sample's one batched nvmlDeviceGetFieldValues.
	SampleCall Call = iota
	// HealthCall: the slow tier's health counter call, one of its own after
	// the sample's calls (on GB200, ECC fields batched with NVLink counters
	// were reported to come back N/A: DCGM issue 265).
	HealthCall
)

// Metric is a reading's Prometheus series: gpu_<Name>, one per GPU (and per
// Label value when Label is set), the stored value times Scale.
type Metric struct {
	Name    string
	Help    string
	Counter bool      // a counter (else a gauge)
	Scale   float64   // stored value times Scale is the exported value
	Div     float64   // when set, the stored value divided by Div instead
	Label   [2]string // label name and this reading's value, for readings sharing a family ("" none)
}

// Def declares one reading.
type Def struct {
	Name string // unique; the Sample field it is stored in
	// Field is the NVML field ID read (scope 0) in the sample's batched
	// nvmlDeviceGetFieldValues; 0 for a getter reading.
	Field uint32
	// Getter is the NVML function that gives the reading; for a field
	// reading, the call made instead in the same sample when the driver
	// refuses the field ("" none).
	Getter string
	Tier   Tier
	Call   Call   // the field call that reads Field
	Unit   string // of the stored value
	// Min and Max bound a sane stored value (Max 0: unbounded); a value
	// outside is a driver error: absent, logged once.
	Min, Max uint64
	CSV      string // CSV column ("" none)
	Format   Format // how the CSV cell writes it
	Key      string // the status document's key ("" none)
	Metric   Metric // Metric.Name "" none
	// Doc is how the status document gives the value under Key.
	Doc DocForm
	// Group and Kind of a hardware health counter (IsHealth): the set it is
	// supported with and how it changes (events.log, detectors).
	Group HealthGroup
	Kind  HealthKind

	hid HealthID // a health counter's index in Sample.Health, + 1; 0: not one
	u32 func(*Sample) *Opt[uint32]
	u64 func(*Sample) *Opt[uint64]
	i32 func(*Sample) *Opt[int32]
}

// Get returns the reading's value in s, as an int64 for the signed ones.
func (d *Def) Get(s *Sample) (v uint64, ok bool) {
	switch {
	case d.u32 != nil:
		o := d.u32(s)
		return uint64(o.V), o.OK
	case d.u64 != nil:
		o := d.u64(s)
		return o.V, o.OK
	default:
		o := d.i32(s)
		return uint64(int64(o.V)), o.OK
	}
}

// Fits reports whether v (as Get gives it: an int64 for a signed reading)
// is a value the reading can hold; Set would cut one that is not.
func (d *Def) Fits(v uint64) bool {
	switch {
	case d.u32 != nil:
		return v <= math.MaxUint32
	case d.i32 != nil:
		return int64(v) >= math.MinInt32 && int64(v) <= math.MaxInt32
	}
	return true
}

// Signed reports whether Get's value is an int64.
func (d *Def) Signed() bool { return d.i32 != nil }

// Set stores v as the reading's value in s (present).
func (d *Def) Set(s *Sample, v uint64) {
	switch {
	case d.u32 != nil:
		*d.u32(s) = Some(uint32(v))
	case d.u64 != nil:
		*d.u64(s) = Some(v)
	default:
		*d.i32(s) = Some(int32(int64(v)))
	}
}

// Clear makes the reading absent in s.
func (d *Def) Clear(s *Sample) {
	switch {
	case d.u32 != nil:
		*d.u32(s) = Opt[uint32]{}
	case d.u64 != nil:
		*d.u64(s) = Opt[uint64]{}
	default:
		*d.i32(s) = Opt[int32]{}
	}
}

// Health reports the health counter's index in Sample.Health; ok is false
// for a reading that is not a hardware health counter.
func (d *Def) Health() (id HealthID, ok bool) { return d.hid - 1, d.hid != 0 }

// Sanity bounds. Generous: they reject garbage, not extremes.
const (
	maxTempC    = 200       // no GPU survives 200 C; 4294967295 is a driver error
	maxPowerMW  = 5_000_000 // 5 kW: more than any single GPU board draws
	maxClockMHz = 20_000    // far above any shipping GPU clock
	maxPercent  = 100
	maxPState   = 15      // P0..P15; 32 means unknown
	maxVRAM     = 1 << 50 // 1 PiB
	maxPCIeGen  = 16      // generous; Gen 6 ships today; 0 is no link at all (Min 1)
	maxPCIeW    = 32      // x32 is the widest link defined; 0 is no link (Min 1)
)

// clockMetric and utilMetric are the families several readings share, by
// label value.
func clockMetric(clock string) Metric {
	return Metric{Name: "clock_hz", Help: "Clock frequency.", Scale: 1e6, Label: [2]string{"clock", clock}}
}

func utilMetric(engine string) Metric {
	return Metric{Name: "utilization_ratio", Help: "Utilization over the driver's last sample period (0-1).", Scale: 0.01, Label: [2]string{"engine", engine}}
}

// HealthID names one GPU-level health counter; it indexes Sample.Health and
// Health.
type HealthID uint8

// The GPU-level health counters.
const (
	HECCMode HealthID = iota
	HECCPending
	HSBEVolatile
	HDBEVolatile
	HSBEAggregate
	HDBEAggregate
	HRetiredSBE
	HRetiredDBE
	HRetiredPending
	HRemapCorrectable
	HRemapUncorrectable
	HRemapPending
	HRemapFailure
	HPCIeReplayRollover
	HPCIeL0Recovery
	HPCIeCorrectable
	HPCIeNAKsReceived
	HPCIeReceiverErrors
	HPCIeBadTLP
	HPCIeNAKsSent
	HPCIeBadDLLP
	HPCIeNonFatal
	HPCIeFatal
	HPCIeUnsupportedReq
	HPCIeLCRC
	HClkSWPowerCap
	HClkSyncBoost
	HClkSWThermal
	HClkHWThermal
	HClkHWPowerBrake
	HClkBoardLimit
	HClkReliability
	HNVLinkCount
	HNVLinkUp       // derived: links whose state is active
	HNVLinkErrors   // derived: the links' error counters summed
	HNVLinkRecovery // derived: successful link recoveries summed
	HNVLinkRecoveryFailed
	HC2CCount
	HC2CUp     // derived: C2C links whose status is active
	HC2CErrors // derived: the C2C links' CRC and replay counters summed
	HRecoveryAction
	HSRAMCorrectable // getter: nvmlDeviceGetSramEccErrorStatus
	HSRAMUncSecDed
	HSRAMUncParity
	HSRAMThreshold
	HChannelRepairPending // getter: nvmlDeviceGetRepairStatus
	HTPCRepairPending
	HMemoryUnrepairable // getter: nvmlDeviceGetUnrepairableMemoryFlag_v1
	NumHealth
)

// Table is every scalar reading, in CSV column order. The per-fan readings
// are FanTable's; thermal sensor 0 and the columns that are not readings
// (time, kernel time, throttle reason names, flags) are laid out by their
// outputs.
var Table = []Def{
	{Name: "TempC", Getter: "nvmlDeviceGetTemperature", Unit: "C", Max: maxTempC, CSV: "gpu_temp", Key: "temperature_c",
		Metric: Metric{Name: "temperature_celsius", Help: "GPU temperature.", Scale: 1},
		u32:    func(s *Sample) *Opt[uint32] { return &s.TempC }},
	{Name: "TLimitC", Unit: "C", CSV: "gpu_tlimit",
		i32: func(s *Sample) *Opt[int32] { return &s.TLimitC }},
	{Name: "PowerMW", Field: 186 /* NVML_FI_DEV_POWER_INSTANT */, Getter: "nvmlDeviceGetPowerUsage", Unit: "mW", Max: maxPowerMW, CSV: "power_instant", Format: CentiWatt, Key: "power_w", Doc: DocMilli,
		Metric: Metric{Name: "power_watts", Help: "Power draw.", Scale: 1e-3},
		u32:    func(s *Sample) *Opt[uint32] { return &s.PowerMW }},
	// A limit of 0 W is a driver error (and would divide by zero).
	{Name: "PowerLimitMW", Getter: "nvmlDeviceGetPowerManagementLimit", Unit: "mW", Min: 1, Max: maxPowerMW, CSV: "power_limit", Format: Watts, Key: "power_limit_w", Doc: DocMilli,
		Metric: Metric{Name: "power_limit_watts", Help: "Power management limit.", Scale: 1e-3},
		u32:    func(s *Sample) *Opt[uint32] { return &s.PowerLimitMW }},
	{Name: "PState", Getter: "nvmlDeviceGetPerformanceState", Tier: Secondary, Max: maxPState, CSV: "pstate", Key: "pstate",
		Metric: Metric{Name: "pstate", Help: "Performance state (0 fastest, 15 slowest).", Scale: 1},
		u32:    func(s *Sample) *Opt[uint32] { return &s.PState }},
	{Name: "GraphicsMHz", Getter: "nvmlDeviceGetClockInfo", Unit: "MHz", Max: maxClockMHz, CSV: "gpu_clock", Key: "graphics_clock_mhz",
		Metric: clockMetric("graphics"),
		u32:    func(s *Sample) *Opt[uint32] { return &s.GraphicsMHz }},
	{Name: "MemMHz", Getter: "nvmlDeviceGetClockInfo", Unit: "MHz", Max: maxClockMHz, CSV: "mem_clock", Key: "memory_clock_mhz",
		Metric: clockMetric("memory"),
		u32:    func(s *Sample) *Opt[uint32] { return &s.MemMHz }},
	{Name: "GPUUtil", Getter: "nvmlDeviceGetUtilizationRates", Tier: Secondary, Unit: "%", Max: maxPercent, CSV: "gpu_util", Key: "gpu_util_pct",
		Metric: utilMetric("gpu"),
		u32:    func(s *Sample) *Opt[uint32] { return &s.GPUUtil }},
	{Name: "MemUtil", Getter: "nvmlDeviceGetUtilizationRates", Tier: Secondary, Unit: "%", Max: maxPercent, CSV: "mem_util", Key: "memory_util_pct",
		Metric: utilMetric("memory"),
		u32:    func(s *Sample) *Opt[uint32] { return &s.MemUtil }},
	{Name: "VRAMUsedBytes", Getter: "nvmlDeviceGetMemoryInfo_v2", Tier: Secondary, Unit: "B", Max: maxVRAM, CSV: "vram_used_mb", Format: MiB, Key: "memory_used_bytes",
		Metric: Metric{Name: "memory_used_bytes", Help: "GPU memory used.", Scale: 1},
		u64:    func(s *Sample) *Opt[uint64] { return &s.VRAMUsedBytes }},
	{Name: "VRAMTotalBytes", Getter: "nvmlDeviceGetMemoryInfo_v2", Tier: Secondary, Unit: "B", Min: 1, Max: maxVRAM, Key: "memory_total_bytes",
		Metric: Metric{Name: "memory_total_bytes", Help: "GPU memory size.", Scale: 1},
		u64:    func(s *Sample) *Opt[uint64] { return &s.VRAMTotalBytes }},
	{Name: "PCIeGen", Getter: "nvmlDeviceGetCurrPcieLinkGeneration", Tier: Slow, Min: 1, Max: maxPCIeGen, CSV: "pcie_gen", Key: "pcie_gen",
		Metric: Metric{Name: "pcie_link_generation", Help: "Current PCIe link generation.", Scale: 1},
		u32:    func(s *Sample) *Opt[uint32] { return &s.PCIeGen }},
	{Name: "PCIeWidth", Getter: "nvmlDeviceGetCurrPcieLinkWidth", Tier: Slow, Unit: "lanes", Min: 1, Max: maxPCIeW, CSV: "pcie_width", Key: "pcie_width",
		Metric: Metric{Name: "pcie_link_width", Help: "Current PCIe link width (lanes).", Scale: 1},
		u32:    func(s *Sample) *Opt[uint32] { return &s.PCIeWidth }},
	{Name: "Throttle", Getter: "nvmlDeviceGetCurrentClocksEventReasons", Unit: "bitmask", CSV: "throttle_bitmask", Format: Hex4, Key: "throttle_reasons", Doc: DocReasons,
		u64: func(s *Sample) *Opt[uint64] { return &s.Throttle }},
	{Name: "SMMHz", Getter: "nvmlDeviceGetClockInfo", Unit: "MHz", Max: maxClockMHz, CSV: "sm_clock", Key: "sm_clock_mhz",
		Metric: clockMetric("sm"),
		u32:    func(s *Sample) *Opt[uint32] { return &s.SMMHz }},
	{Name: "EnforcedLimitMW", Field: 190 /* NVML_FI_DEV_POWER_CURRENT_LIMIT */, Getter: "nvmlDeviceGetEnforcedPowerLimit", Unit: "mW", Min: 1, Max: maxPowerMW, CSV: "power_enforced_limit", Format: Watts, Key: "enforced_limit_w", Doc: DocMilli,
		Metric: Metric{Name: "power_enforced_limit_watts", Help: "Enforced power limit.", Scale: 1e-3},
		u32:    func(s *Sample) *Opt[uint32] { return &s.EnforcedLimitMW }},
	{Name: "EnergyMJ", Field: 83 /* NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION */, Getter: "nvmlDeviceGetTotalEnergyConsumption", Unit: "mJ", CSV: "energy_mj", Key: "energy_j", Doc: DocMilli,
		Metric: Metric{Name: "energy_joules_total", Help: "Energy consumed since the driver loaded.", Counter: true, Div: 1000},
		u64:    func(s *Sample) *Opt[uint64] { return &s.EnergyMJ }},
	{Name: "PCIeReplay", Field: 94 /* NVML_FI_DEV_PCIE_REPLAY_COUNTER */, Getter: "nvmlDeviceGetPcieReplayCounter", Unit: "count", CSV: "pcie_replay", Key: "pcie_replay",
		Metric: Metric{Name: "pcie_replays_total", Help: "PCIe replay counter.", Counter: true, Scale: 1},
		u64:    func(s *Sample) *Opt[uint64] { return &s.PCIeReplay }},
	{Name: "MemTempC", Field: 82 /* NVML_FI_DEV_MEMORY_TEMP */, Unit: "C", Max: maxTempC, CSV: "mem_temp", Key: "memory_temperature_c",
		Metric: Metric{Name: "memory_temperature_celsius", Help: "GPU memory temperature.", Scale: 1},
		u32:    func(s *Sample) *Opt[uint32] { return &s.MemTempC }},
	{Name: "EncUtil", Getter: "nvmlDeviceGetEncoderUtilization", Tier: Slow, Unit: "%", Max: maxPercent, CSV: "enc_util", Key: "encoder_util_pct",
		Metric: utilMetric("encoder"),
		u32:    func(s *Sample) *Opt[uint32] { return &s.EncUtil }},
	{Name: "DecUtil", Getter: "nvmlDeviceGetDecoderUtilization", Tier: Slow, Unit: "%", Max: maxPercent, CSV: "dec_util", Key: "decoder_util_pct",
		Metric: utilMetric("decoder"),
		u32:    func(s *Sample) *Opt[uint32] { return &s.DecUtil }},

	// The hardware health counters (health.go), in HealthID order, read on
	// the slow tier in their own field call; field 0: derived from the
	// per-link readings.
	health(HECCMode, "ecc_mode", 1, GroupECC, HealthState, "ECC mode now (1 on, 0 off)"),
	health(HECCPending, "ecc_mode_pending", 2, GroupECC, HealthState, "ECC mode after the next reset"),
	health(HSBEVolatile, "ecc_sbe_volatile", 3, GroupECC, HealthCount, "single-bit (corrected) ECC errors since the driver loaded"),
	health(HDBEVolatile, "ecc_dbe_volatile", 4, GroupECC, HealthCount, "double-bit (uncorrected) ECC errors since the driver loaded"),
	health(HSBEAggregate, "ecc_sbe_aggregate", 5, GroupECC, HealthCount, "single-bit ECC errors over the GPU's life"),
	health(HDBEAggregate, "ecc_dbe_aggregate", 6, GroupECC, HealthCount, "double-bit ECC errors over the GPU's life"),
	health(HRetiredSBE, "retired_pages_sbe", 29, GroupRetired, HealthCount, "pages retired for single-bit errors (pre-Ampere)"),
	health(HRetiredDBE, "retired_pages_dbe", 30, GroupRetired, HealthCount, "pages retired for double-bit errors (pre-Ampere)"),
	health(HRetiredPending, "retired_pages_pending", 31, GroupRetired, HealthState, "pages waiting to be retired at the next reset (1 yes)"),
	health(HRemapCorrectable, "remap_correctable", 142, GroupRemap, HealthCount, "rows remapped for correctable errors"),
	health(HRemapUncorrectable, "remap_uncorrectable", 143, GroupRemap, HealthCount, "rows remapped for uncorrectable errors"),
	health(HRemapPending, "remap_pending", 144, GroupRemap, HealthState, "a row remap waits for a GPU reset (1 yes)"),
	health(HRemapFailure, "remap_failure", 145, GroupRemap, HealthState, "a row remap failed (1 yes)"),
	health(HPCIeReplayRollover, "pcie_replay_rollover", 95, GroupPCIe, HealthCount, "PCIe replay counter rollovers"),
	health(HPCIeL0Recovery, "pcie_l0_recovery", 169, GroupPCIe, HealthCount, "PCIe link L0 to recovery transitions"),
	health(HPCIeCorrectable, "pcie_correctable", 173, GroupPCIe, HealthCount, "PCIe correctable errors"),
	health(HPCIeNAKsReceived, "pcie_naks_received", 174, GroupPCIe, HealthCount, "PCIe NAKs received"),
	health(HPCIeReceiverErrors, "pcie_receiver_errors", 175, GroupPCIe, HealthCount, "PCIe receiver errors"),
	health(HPCIeBadTLP, "pcie_bad_tlp", 176, GroupPCIe, HealthCount, "PCIe bad TLPs"),
	health(HPCIeNAKsSent, "pcie_naks_sent", 177, GroupPCIe, HealthCount, "PCIe NAKs sent"),
	health(HPCIeBadDLLP, "pcie_bad_dllp", 178, GroupPCIe, HealthCount, "PCIe bad DLLPs"),
	health(HPCIeNonFatal, "pcie_nonfatal", 179, GroupPCIe, HealthCount, "PCIe non-fatal errors"),
	health(HPCIeFatal, "pcie_fatal", 180, GroupPCIe, HealthCount, "PCIe fatal errors"),
	health(HPCIeUnsupportedReq, "pcie_unsupported_req", 181, GroupPCIe, HealthCount, "PCIe unsupported requests"),
	health(HPCIeLCRC, "pcie_lcrc", 182, GroupPCIe, HealthCount, "PCIe LCRC errors"),
	health(HClkSWPowerCap, "clk_sw_power_cap_s", 74, GroupClockEvents, HealthNanos, "time clocks were held by the software power cap"),
	health(HClkSyncBoost, "clk_sync_boost_s", 76, GroupClockEvents, HealthNanos, "time clocks were held by sync boost"),
	health(HClkSWThermal, "clk_sw_thermal_s", 269, GroupClockEvents, HealthNanos, "time clocks were held by software thermal slowdown"),
	health(HClkHWThermal, "clk_hw_thermal_s", 270, GroupClockEvents, HealthNanos, "time clocks were held by hardware thermal slowdown"),
	health(HClkHWPowerBrake, "clk_hw_power_brake_s", 271, GroupClockEvents, HealthNanos, "time clocks were held by the hardware power brake"),
	health(HClkBoardLimit, "clk_board_limit_s", 77, GroupClockEvents, HealthNanos, "time clocks were held by the board limit"),
	health(HClkReliability, "clk_reliability_s", 79, GroupClockEvents, HealthNanos, "time clocks were held by the reliability policy"),
	health(HNVLinkCount, "nvlink_links", 91, GroupNVLink, HealthState, "NVLink links present"),
	health(HNVLinkUp, "nvlink_up", 0, GroupNVLink, HealthState, "NVLink links active"),
	health(HNVLinkErrors, "nvlink_errors", 0, GroupNVLink, HealthCount, "NVLink error counters summed over the links (malformed, buffer overrun, rx, local integrity, tx discards, effective)"),
	health(HNVLinkRecovery, "nvlink_recoveries", 0, GroupNVLink, HealthCount, "successful NVLink link recoveries summed over the links"),
	health(HNVLinkRecoveryFailed, "nvlink_recovery_failed", 0, GroupNVLink, HealthCount, "failed NVLink link recoveries summed over the links"),
	health(HC2CCount, "c2c_links", 170, GroupC2C, HealthState, "C2C links present"),
	health(HC2CUp, "c2c_up", 0, GroupC2C, HealthState, "C2C links active"),
	health(HC2CErrors, "c2c_errors", 0, GroupC2C, HealthCount, "C2C CRC and replay errors summed over the links"),
	health(HRecoveryAction, "recovery_action", 230, GroupRecovery, HealthState, "recovery action the driver asks for (0 none, 1 reset, 2 reboot, 3 drain P2P, 4 drain and reset)"),
	// Getter counters: read by their call in the sample's batch, on the
	// slow tier (the volatile SRAM counts: since the driver loaded).
	health(HSRAMCorrectable, "sram_correctable", 0, GroupECC, HealthCount, "correctable SRAM ECC errors since the driver loaded").by("nvmlDeviceGetSramEccErrorStatus"),
	health(HSRAMUncSecDed, "sram_uncorrectable_secded", 0, GroupECC, HealthCount, "uncorrectable SRAM SEC-DED errors since the driver loaded").by("nvmlDeviceGetSramEccErrorStatus"),
	health(HSRAMUncParity, "sram_uncorrectable_parity", 0, GroupECC, HealthCount, "uncorrectable SRAM parity errors since the driver loaded").by("nvmlDeviceGetSramEccErrorStatus"),
	health(HSRAMThreshold, "sram_threshold_exceeded", 0, GroupECC, HealthState, "the SRAM error threshold of field diagnostics is exceeded (1 yes)").by("nvmlDeviceGetSramEccErrorStatus"),
	health(HChannelRepairPending, "channel_repair_pending", 0, GroupRepair, HealthState, "a memory channel repair waits for a GPU reset (1 yes)").by("nvmlDeviceGetRepairStatus"),
	health(HTPCRepairPending, "tpc_repair_pending", 0, GroupRepair, HealthState, "a TPC repair waits for a GPU reset (1 yes)").by("nvmlDeviceGetRepairStatus"),
	health(HMemoryUnrepairable, "memory_unrepairable", 0, GroupRepair, HealthState, "the GPU has memory that can no longer be repaired (1 yes)").by("nvmlDeviceGetUnrepairableMemoryFlag_v1"),
}

// Health is Table's hardware health counters, by HealthID.
var Health = func() (h [NumHealth]*Def) {
	for i := range Table {
		if id, ok := Table[i].Health(); ok {
			h[id] = &Table[i]
		}
	}
	for id, d := range h {
		if d == nil {
			panic("reading.Table: no row for health counter " + strconv.Itoa(id))
		}
	}
	return h
}()

// by names the getter that reads a health counter (its field is 0).
func (d Def) by(getter string) Def {
	d.Getter = getter
	return d
}

// health declares hardware health counter id: a slow-tier reading of the
// NVML field given (0: derived from the per-link readings) in the health
// call, its CSV column, status counter key and events.log counter= value
// name, its metric named from name by kind (health_<name>_total for a
// count, health_<name>_seconds_total for a time, health_<name> for a
// state) with help.
func health(id HealthID, name string, field uint32, g HealthGroup, k HealthKind, help string) Def {
	d := Def{Name: name, Field: field, Tier: Slow, Call: HealthCall, Unit: "count", CSV: name, Key: name, Group: g, Kind: k, hid: id + 1,
		u64: func(s *Sample) *Opt[uint64] { return &s.Health[id] }}
	m := Metric{Name: "health_" + name, Help: strings.ToUpper(help[:1]) + help[1:] + ".", Scale: 1}
	switch k {
	case HealthCount:
		m.Name, m.Counter = m.Name+"_total", true
	case HealthNanos:
		m.Name, m.Counter, m.Scale, m.Div = "health_"+strings.TrimSuffix(name, "_s")+"_seconds_total", true, 0, 1e9
		d.Unit, d.Format = "ns", Seconds
	default:
		d.Unit = ""
	}
	d.Metric = m
	return d
}
