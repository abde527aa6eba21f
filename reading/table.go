package reading

import (
	"math"
	"strconv"
	"strings"
)

// The table of readings: every scalar value of a Sample is declared once
// here, by its ID: where NVML gives it, how often it is read, its unit and
// sane range, and the outputs it reaches. Its value is Sample.Values[id].
// The sampler plans its calls from it, the CSV writer lays out its columns
// from it, the status document gives each reading with a Key under that
// key, the metrics collector exports each with a Metric; sampler's
// TestTableIsRead and sink's TestTableReachesCSV walk it.
//
// A reading NVML gives as a field value (nvmlDeviceGetFieldValues) is a row
// with its Field ID: the sampler adds it to the sample's one batched call
// and stores what comes back. A getter reading names its NVML function in
// Getter, how it is called (Shape, Arg) and which value of what it fills
// (Value); the sampler's C batch makes the call from that description, so
// a getter of a known shape is its row and nothing else. Adding a reading
// is an ID and its row.

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
	// Static: a fact of the board that does not change while the driver
	// runs (a maximum clock, a temperature threshold): read on the slow
	// tier until it is given, then carried forward (read again only after
	// a failed sample).
	Static
)

// Format is how a CSV cell writes a reading's value (Def.AppendCell; read
// back by Def.ParseCell).
type Format uint8

const (
	Plain     Format = iota // the stored value in decimal
	Watts                   // milliwatts as whole watts, rounded ("%.0f", as the Python logger gpu-telemetry-deep.py wrote it)
	CentiWatt               // milliwatts as watts with 2 decimals (gpu-telemetry-deep.py's power_instant)
	MiB                     // bytes as whole MiB, truncated
	Hex4                    // "0x" and at least 4 hex digits (gpu-telemetry-deep.py's "0x%04x")
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

// Shape is how a getter is called (the sampler's C batch knows these).
type Shape uint8

const (
	ShapeOut    Shape = iota // f(dev, *out)
	ShapeArgOut              // f(dev, Arg, *out)
	ShapeOutOut              // f(dev, *out, *out2): the value is in out
)

// Type is the type a reading's value has (Sample.Values holds every one as
// a uint64: a signed one as its int64's bits).
type Type uint8

const (
	U32 Type = iota
	U64
	I32
)

// Def declares one reading.
type Def struct {
	Name string // unique; the Go name of its ID (a health counter's: its counter name)
	// Field is the NVML field ID read (scope 0) in the sample's batched
	// nvmlDeviceGetFieldValues; 0 for a getter reading.
	Field uint32
	// Getter is the NVML function that gives the reading; for a field
	// reading, the call made instead in the same sample when the driver
	// refuses the field ("" none).
	Getter string
	// Older lists, newest first, the functions older drivers have instead
	// of Getter (same shape, argument and value): a sample makes the first
	// call of Getter and these that the driver has and has not refused.
	Older []string
	Shape Shape  // how Getter is called
	Arg   uint32 // its argument (ShapeArgOut)
	// Value is the field of the struct Getter fills (go-nvml's name for
	// it) that holds the reading; "": Getter gives the value itself.
	// "Field+N" is the value of the reading's Type N bytes into Field (a
	// part of an array field: a half of a UUID, an entry of a list).
	// OlderValue is the field of Older's structs, where they name it
	// otherwise ("": Value).
	Value, OlderValue string
	Type              Type
	Tier              Tier
	Call              Call   // the field call that reads Field
	Unit              string // of the stored value
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
	// Text, when set, gives a value's meaning (events.log's meaning= of
	// a change).
	Text func(uint64) string

	id     ID
	health bool
}

// ID returns the reading's ID: its index in Table and Sample.Values.
func (d *Def) ID() ID { return d.id }

// IsHealth reports whether the reading is a hardware health counter.
func (d *Def) IsHealth() bool { return d.health }

// Get returns the reading's value in s, as an int64's bits for a signed
// one.
func (d *Def) Get(s *Sample) (v uint64, ok bool) { return s.Values[d.id].Get() }

// Fits reports whether v (as Get gives it: an int64 for a signed reading)
// is a value the reading can hold; Set would cut one that is not.
func (d *Def) Fits(v uint64) bool {
	switch d.Type {
	case U32:
		return v <= math.MaxUint32
	case I32:
		return int64(v) >= math.MinInt32 && int64(v) <= math.MaxInt32
	}
	return true
}

// Signed reports whether Get's value is an int64.
func (d *Def) Signed() bool { return d.Type == I32 }

// Set stores v as the reading's value in s (present), cut to what the
// reading holds.
func (d *Def) Set(s *Sample, v uint64) {
	switch d.Type {
	case U32:
		v = uint64(uint32(v))
	case I32:
		v = uint64(int64(int32(int64(v))))
	}
	s.Values[d.id] = Some(v)
}

// Clear makes the reading absent in s.
func (d *Def) Clear(s *Sample) { s.Values[d.id] = Opt[uint64]{} }

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

// ID names one reading: its row of Table and its value in Sample.Values.
type ID uint8

// The readings, in CSV column order. The hardware health counters (H...,
// health.go) come last, but for the fabric's cluster UUID (no column).
const (
	TempC   ID = iota
	TLimitC    // GPU max threshold minus TempC
	PowerMW
	PowerLimitMW // management limit (nvidia-smi -pl); re-read every sample
	PState       // 0..15
	GraphicsMHz
	MemMHz
	GPUUtil // percent
	MemUtil // percent
	VRAMUsedBytes
	VRAMTotalBytes
	PCIeGen
	PCIeWidth
	Throttle // clocks event reasons bitmask
	SMMHz
	EnforcedLimitMW
	EnergyMJ // total since driver load
	PCIeReplay
	MemTempC
	EncUtil // percent
	DecUtil // percent
	PCIeMaxGen
	PCIeMaxWidth
	PCIeTxBytes
	PCIeRxBytes
	JpgUtil // percent
	OfaUtil // percent
	BAR1UsedBytes
	BAR1TotalBytes
	VRAMReservedBytes
	MaxGraphicsMHz
	MaxSMMHz
	MaxMemMHz
	ShutdownTempC
	SlowdownTempC
	PCIeGPUMaxGen
	HECCMode
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
	HFabricState        // getter: nvmlDeviceGetGpuFabricInfo_v4 (fabric.go)
	HFabricStatus
	HFabricHealth
	HFabricSummary
	HFabricClique
	// The fabric's cluster UUID, its bytes 0-7 and 8-15 (FabricClusterUUID
	// composes them): not outputs of their own.
	FabricCluster0
	FabricCluster8
	// v4's count of cliques and its first entry's type (its first byte),
	// which say whether fabric_clique is a unicast clique's id
	// (FabricCliqueChecked): not outputs of their own.
	FabricNumCliques
	FabricClique0Type
	NumReadings
)

// Table is every scalar reading, by ID, in CSV column order. The per-fan
// readings are FanTable's; thermal sensor 0 and the columns that are not
// readings (time, kernel time, throttle reason names, flags) are laid out
// by their outputs.
var Table = [NumReadings]Def{
	TempC: {Name: "TempC", Getter: "nvmlDeviceGetTemperature", Shape: ShapeArgOut, Arg: 0 /* NVML_TEMPERATURE_GPU */, Unit: "C", Max: maxTempC, CSV: "gpu_temp", Key: "temperature_c",
		Metric: Metric{Name: "temperature_celsius", Help: "GPU temperature.", Scale: 1}},
	TLimitC: {Name: "TLimitC", Type: I32, Unit: "C", CSV: "gpu_tlimit"},
	PowerMW: {Name: "PowerMW", Field: 186 /* NVML_FI_DEV_POWER_INSTANT */, Getter: "nvmlDeviceGetPowerUsage", Unit: "mW", Max: maxPowerMW, CSV: "power_instant", Format: CentiWatt, Key: "power_w", Doc: DocMilli,
		Metric: Metric{Name: "power_watts", Help: "Power draw.", Scale: 1e-3}},
	// A limit of 0 W is a driver error (and would divide by zero).
	PowerLimitMW: {Name: "PowerLimitMW", Getter: "nvmlDeviceGetPowerManagementLimit", Unit: "mW", Min: 1, Max: maxPowerMW, CSV: "power_limit", Format: Watts, Key: "power_limit_w", Doc: DocMilli,
		Metric: Metric{Name: "power_limit_watts", Help: "Power management limit.", Scale: 1e-3}},
	PState: {Name: "PState", Getter: "nvmlDeviceGetPerformanceState", Tier: Secondary, Max: maxPState, CSV: "pstate", Key: "pstate",
		Metric: Metric{Name: "pstate", Help: "Performance state (0 fastest, 15 slowest).", Scale: 1}},
	GraphicsMHz: {Name: "GraphicsMHz", Getter: "nvmlDeviceGetClockInfo", Shape: ShapeArgOut, Arg: 0 /* NVML_CLOCK_GRAPHICS */, Unit: "MHz", Max: maxClockMHz, CSV: "gpu_clock", Key: "graphics_clock_mhz",
		Metric: clockMetric("graphics")},
	MemMHz: {Name: "MemMHz", Getter: "nvmlDeviceGetClockInfo", Shape: ShapeArgOut, Arg: 2 /* NVML_CLOCK_MEM */, Unit: "MHz", Max: maxClockMHz, CSV: "mem_clock", Key: "memory_clock_mhz",
		Metric: clockMetric("memory")},
	GPUUtil: {Name: "GPUUtil", Getter: "nvmlDeviceGetUtilizationRates", Value: "Gpu", Tier: Secondary, Unit: "%", Max: maxPercent, CSV: "gpu_util", Key: "gpu_util_pct",
		Metric: utilMetric("gpu")},
	MemUtil: {Name: "MemUtil", Getter: "nvmlDeviceGetUtilizationRates", Value: "Memory", Tier: Secondary, Unit: "%", Max: maxPercent, CSV: "mem_util", Key: "memory_util_pct",
		Metric: utilMetric("memory")},
	VRAMUsedBytes: {Name: "VRAMUsedBytes", Getter: "nvmlDeviceGetMemoryInfo_v2", Older: []string{"nvmlDeviceGetMemoryInfo"}, Value: "Used", Type: U64, Tier: Secondary, Unit: "B", Max: maxVRAM, CSV: "vram_used_mb", Format: MiB, Key: "memory_used_bytes",
		Metric: Metric{Name: "memory_used_bytes", Help: "GPU memory used.", Scale: 1}},
	VRAMTotalBytes: {Name: "VRAMTotalBytes", Getter: "nvmlDeviceGetMemoryInfo_v2", Older: []string{"nvmlDeviceGetMemoryInfo"}, Value: "Total", Type: U64, Tier: Secondary, Unit: "B", Min: 1, Max: maxVRAM, Key: "memory_total_bytes",
		Metric: Metric{Name: "memory_total_bytes", Help: "GPU memory size.", Scale: 1}},
	PCIeGen: {Name: "PCIeGen", Getter: "nvmlDeviceGetCurrPcieLinkGeneration", Tier: Slow, Min: 1, Max: maxPCIeGen, CSV: "pcie_gen", Key: "pcie_gen",
		Metric: Metric{Name: "pcie_link_generation", Help: "Current PCIe link generation.", Scale: 1}},
	PCIeWidth: {Name: "PCIeWidth", Getter: "nvmlDeviceGetCurrPcieLinkWidth", Tier: Slow, Unit: "lanes", Min: 1, Max: maxPCIeW, CSV: "pcie_width", Key: "pcie_width",
		Metric: Metric{Name: "pcie_link_width", Help: "Current PCIe link width (lanes).", Scale: 1}},
	Throttle: {Name: "Throttle", Getter: "nvmlDeviceGetCurrentClocksEventReasons", Older: []string{"nvmlDeviceGetCurrentClocksThrottleReasons"}, Type: U64, Unit: "bitmask", CSV: "throttle_bitmask", Format: Hex4, Key: "throttle_reasons", Doc: DocReasons},
	SMMHz: {Name: "SMMHz", Getter: "nvmlDeviceGetClockInfo", Shape: ShapeArgOut, Arg: 1 /* NVML_CLOCK_SM */, Unit: "MHz", Max: maxClockMHz, CSV: "sm_clock", Key: "sm_clock_mhz",
		Metric: clockMetric("sm")},
	EnforcedLimitMW: {Name: "EnforcedLimitMW", Field: 190 /* NVML_FI_DEV_POWER_CURRENT_LIMIT */, Getter: "nvmlDeviceGetEnforcedPowerLimit", Unit: "mW", Min: 1, Max: maxPowerMW, CSV: "power_enforced_limit", Format: Watts, Key: "enforced_limit_w", Doc: DocMilli,
		Metric: Metric{Name: "power_enforced_limit_watts", Help: "Enforced power limit.", Scale: 1e-3}},
	EnergyMJ: {Name: "EnergyMJ", Field: 83 /* NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION */, Getter: "nvmlDeviceGetTotalEnergyConsumption", Type: U64, Unit: "mJ", CSV: "energy_mj", Key: "energy_j", Doc: DocMilli,
		Metric: Metric{Name: "energy_joules_total", Help: "Energy consumed since the driver loaded.", Counter: true, Div: 1000}},
	// Its getter gives an unsigned int (the C batch zeroes the rest).
	PCIeReplay: {Name: "PCIeReplay", Field: 94 /* NVML_FI_DEV_PCIE_REPLAY_COUNTER */, Getter: "nvmlDeviceGetPcieReplayCounter", Type: U64, Unit: "count", CSV: "pcie_replay", Key: "pcie_replay",
		Metric: Metric{Name: "pcie_replays_total", Help: "PCIe replay counter.", Counter: true, Scale: 1}},
	MemTempC: {Name: "MemTempC", Field: 82 /* NVML_FI_DEV_MEMORY_TEMP */, Unit: "C", Max: maxTempC, CSV: "mem_temp", Key: "memory_temperature_c",
		Metric: Metric{Name: "memory_temperature_celsius", Help: "GPU memory temperature.", Scale: 1}},
	// The encoder's and decoder's utilization; their sampling period (out2)
	// is not read.
	EncUtil: {Name: "EncUtil", Getter: "nvmlDeviceGetEncoderUtilization", Shape: ShapeOutOut, Tier: Slow, Unit: "%", Max: maxPercent, CSV: "enc_util", Key: "encoder_util_pct",
		Metric: utilMetric("encoder")},
	DecUtil: {Name: "DecUtil", Getter: "nvmlDeviceGetDecoderUtilization", Shape: ShapeOutOut, Tier: Slow, Unit: "%", Max: maxPercent, CSV: "dec_util", Key: "decoder_util_pct",
		Metric: utilMetric("decoder")},
	// The most the link can do (the GPU's and the slot's): a current link
	// below it is downtrained.
	PCIeMaxGen: {Name: "PCIeMaxGen", Getter: "nvmlDeviceGetMaxPcieLinkGeneration", Tier: Slow, Min: 1, Max: maxPCIeGen, Key: "pcie_max_gen",
		Metric: Metric{Name: "pcie_link_max_generation", Help: "Maximum PCIe link generation of the GPU and its slot.", Scale: 1}},
	PCIeMaxWidth: {Name: "PCIeMaxWidth", Getter: "nvmlDeviceGetMaxPcieLinkWidth", Tier: Slow, Unit: "lanes", Min: 1, Max: maxPCIeW, Key: "pcie_max_width",
		Metric: Metric{Name: "pcie_link_max_width", Help: "Maximum PCIe link width of the GPU and its slot (lanes).", Scale: 1}},
	// Cumulative; the driver lets it wrap (issue 40 derives throughput).
	PCIeTxBytes: {Name: "PCIeTxBytes", Field: 197 /* NVML_FI_DEV_PCIE_COUNT_TX_BYTES */, Type: U64, Unit: "B", CSV: "pcie_tx_bytes", Key: "pcie_tx_bytes",
		Metric: Metric{Name: "pcie_tx_bytes_total", Help: "PCIe bytes transmitted (the driver's counter may wrap).", Counter: true, Scale: 1}},
	// Beside TX: the two cumulative counters give the link's throughput
	// each way (rate()) without nvmlDeviceGetPcieThroughput's 20 ms sampling.
	PCIeRxBytes: {Name: "PCIeRxBytes", Field: 198 /* NVML_FI_DEV_PCIE_COUNT_RX_BYTES */, Type: U64, Unit: "B", CSV: "pcie_rx_bytes", Key: "pcie_rx_bytes",
		Metric: Metric{Name: "pcie_rx_bytes_total", Help: "PCIe bytes received (the driver's counter may wrap).", Counter: true, Scale: 1}},
	// The JPEG decoder's and the optical flow accelerator's utilization
	// (issue 40's engine panel), as the encoder's and decoder's; drivers
	// before R525 have neither function: absent.
	JpgUtil: {Name: "JpgUtil", Getter: "nvmlDeviceGetJpgUtilization", Shape: ShapeOutOut, Tier: Slow, Unit: "%", Max: maxPercent, Key: "jpg_util_pct",
		Metric: utilMetric("jpeg")},
	OfaUtil: {Name: "OfaUtil", Getter: "nvmlDeviceGetOfaUtilization", Shape: ShapeOutOut, Tier: Slow, Unit: "%", Max: maxPercent, Key: "ofa_util_pct",
		Metric: utilMetric("ofa")},
	// The BAR1 aperture (the CPU's window onto GPU memory), used and size.
	BAR1UsedBytes: {Name: "BAR1UsedBytes", Getter: "nvmlDeviceGetBAR1MemoryInfo", Value: "Bar1Used", Type: U64, Tier: Slow, Unit: "B", Max: maxVRAM, Key: "bar1_used_bytes",
		Metric: Metric{Name: "bar1_used_bytes", Help: "BAR1 memory used.", Scale: 1}},
	BAR1TotalBytes: {Name: "BAR1TotalBytes", Getter: "nvmlDeviceGetBAR1MemoryInfo", Value: "Bar1Total", Type: U64, Tier: Slow, Unit: "B", Max: maxVRAM, Key: "bar1_total_bytes",
		Metric: Metric{Name: "bar1_total_bytes", Help: "BAR1 memory size.", Scale: 1}},
	// What the driver reserves of the VRAM: the same call as used and
	// total; an older driver's nvmlDeviceGetMemoryInfo counts it as used
	// and does not give it (absent).
	VRAMReservedBytes: {Name: "VRAMReservedBytes", Getter: "nvmlDeviceGetMemoryInfo_v2", Value: "Reserved", Type: U64, Tier: Secondary, Unit: "B", Max: maxVRAM, Key: "memory_reserved_bytes",
		Metric: Metric{Name: "memory_reserved_bytes", Help: "GPU memory reserved by the driver.", Scale: 1}},
	// The clocks' maximums, for the clocks against them.
	MaxGraphicsMHz: {Name: "MaxGraphicsMHz", Getter: "nvmlDeviceGetMaxClockInfo", Shape: ShapeArgOut, Arg: 0 /* NVML_CLOCK_GRAPHICS */, Tier: Static, Unit: "MHz", Max: maxClockMHz, Key: "max_graphics_clock_mhz",
		Metric: Metric{Name: "clock_max_hz", Help: "Maximum clock frequency.", Scale: 1e6, Label: [2]string{"clock", "graphics"}}},
	MaxSMMHz: {Name: "MaxSMMHz", Getter: "nvmlDeviceGetMaxClockInfo", Shape: ShapeArgOut, Arg: 1 /* NVML_CLOCK_SM */, Tier: Static, Unit: "MHz", Max: maxClockMHz, Key: "max_sm_clock_mhz",
		Metric: Metric{Name: "clock_max_hz", Help: "Maximum clock frequency.", Scale: 1e6, Label: [2]string{"clock", "sm"}}},
	MaxMemMHz: {Name: "MaxMemMHz", Getter: "nvmlDeviceGetMaxClockInfo", Shape: ShapeArgOut, Arg: 2 /* NVML_CLOCK_MEM */, Tier: Static, Unit: "MHz", Max: maxClockMHz, Key: "max_memory_clock_mhz",
		Metric: Metric{Name: "clock_max_hz", Help: "Maximum clock frequency.", Scale: 1e6, Label: [2]string{"clock", "memory"}}},
	// The temperatures at which the GPU shuts down and slows down for
	// hardware protection (0 is no threshold: Min 1).
	ShutdownTempC: {Name: "ShutdownTempC", Getter: "nvmlDeviceGetTemperatureThreshold", Shape: ShapeArgOut, Arg: 0 /* NVML_TEMPERATURE_THRESHOLD_SHUTDOWN */, Tier: Static, Unit: "C", Min: 1, Max: maxTempC, Key: "shutdown_temp_c",
		Metric: Metric{Name: "temperature_threshold_celsius", Help: "Temperature threshold of hardware protection.", Scale: 1, Label: [2]string{"threshold", "shutdown"}}},
	SlowdownTempC: {Name: "SlowdownTempC", Getter: "nvmlDeviceGetTemperatureThreshold", Shape: ShapeArgOut, Arg: 1 /* NVML_TEMPERATURE_THRESHOLD_SLOWDOWN */, Tier: Static, Unit: "C", Min: 1, Max: maxTempC, Key: "slowdown_temp_c",
		Metric: Metric{Name: "temperature_threshold_celsius", Help: "Temperature threshold of hardware protection.", Scale: 1, Label: [2]string{"threshold", "slowdown"}}},
	// The GPU's own maximum link generation (pcie_max_gen is the GPU's and
	// the slot's together): a slot below the GPU shows as the two apart
	// (issue 39); R510 and later.
	PCIeGPUMaxGen: {Name: "PCIeGPUMaxGen", Getter: "nvmlDeviceGetGpuMaxPcieLinkGeneration", Tier: Static, Min: 1, Max: maxPCIeGen, Key: "pcie_gpu_max_gen",
		Metric: Metric{Name: "pcie_link_gpu_max_generation", Help: "Maximum PCIe link generation of the GPU.", Scale: 1}},

	// The hardware health counters (health.go), read on the slow tier in
	// their own field call; field 0: derived from the per-link readings,
	// or read by the getter named (by), in the sample's batch.
	HECCMode:              health("ecc_mode", 1, GroupECC, HealthState, "ECC mode now (1 on, 0 off)"),
	HECCPending:           health("ecc_mode_pending", 2, GroupECC, HealthState, "ECC mode after the next reset"),
	HSBEVolatile:          health("ecc_sbe_volatile", 3, GroupECC, HealthCount, "single-bit (corrected) ECC errors since the driver loaded"),
	HDBEVolatile:          health("ecc_dbe_volatile", 4, GroupECC, HealthCount, "double-bit (uncorrected) ECC errors since the driver loaded"),
	HSBEAggregate:         health("ecc_sbe_aggregate", 5, GroupECC, HealthCount, "single-bit ECC errors over the GPU's life"),
	HDBEAggregate:         health("ecc_dbe_aggregate", 6, GroupECC, HealthCount, "double-bit ECC errors over the GPU's life"),
	HRetiredSBE:           health("retired_pages_sbe", 29, GroupRetired, HealthCount, "pages retired for single-bit errors (pre-Ampere)"),
	HRetiredDBE:           health("retired_pages_dbe", 30, GroupRetired, HealthCount, "pages retired for double-bit errors (pre-Ampere)"),
	HRetiredPending:       health("retired_pages_pending", 31, GroupRetired, HealthState, "pages waiting to be retired at the next reset (1 yes)"),
	HRemapCorrectable:     health("remap_correctable", 142, GroupRemap, HealthCount, "rows remapped for correctable errors"),
	HRemapUncorrectable:   health("remap_uncorrectable", 143, GroupRemap, HealthCount, "rows remapped for uncorrectable errors"),
	HRemapPending:         health("remap_pending", 144, GroupRemap, HealthState, "a row remap waits for a GPU reset (1 yes)"),
	HRemapFailure:         health("remap_failure", 145, GroupRemap, HealthState, "a row remap failed (1 yes)"),
	HPCIeReplayRollover:   health("pcie_replay_rollover", 95, GroupPCIe, HealthCount, "PCIe replay counter rollovers"),
	HPCIeL0Recovery:       health("pcie_l0_recovery", 169, GroupPCIe, HealthCount, "PCIe link L0 to recovery transitions"),
	HPCIeCorrectable:      health("pcie_correctable", 173, GroupPCIe, HealthCount, "PCIe correctable errors"),
	HPCIeNAKsReceived:     health("pcie_naks_received", 174, GroupPCIe, HealthCount, "PCIe NAKs received"),
	HPCIeReceiverErrors:   health("pcie_receiver_errors", 175, GroupPCIe, HealthCount, "PCIe receiver errors"),
	HPCIeBadTLP:           health("pcie_bad_tlp", 176, GroupPCIe, HealthCount, "PCIe bad TLPs"),
	HPCIeNAKsSent:         health("pcie_naks_sent", 177, GroupPCIe, HealthCount, "PCIe NAKs sent"),
	HPCIeBadDLLP:          health("pcie_bad_dllp", 178, GroupPCIe, HealthCount, "PCIe bad DLLPs"),
	HPCIeNonFatal:         health("pcie_nonfatal", 179, GroupPCIe, HealthCount, "PCIe non-fatal errors"),
	HPCIeFatal:            health("pcie_fatal", 180, GroupPCIe, HealthCount, "PCIe fatal errors"),
	HPCIeUnsupportedReq:   health("pcie_unsupported_req", 181, GroupPCIe, HealthCount, "PCIe unsupported requests"),
	HPCIeLCRC:             health("pcie_lcrc", 182, GroupPCIe, HealthCount, "PCIe LCRC errors"),
	HClkSWPowerCap:        health("clk_sw_power_cap_s", 74, GroupClockEvents, HealthNanos, "time clocks were held by the software power cap"),
	HClkSyncBoost:         health("clk_sync_boost_s", 76, GroupClockEvents, HealthNanos, "time clocks were held by sync boost"),
	HClkSWThermal:         health("clk_sw_thermal_s", 269, GroupClockEvents, HealthNanos, "time clocks were held by software thermal slowdown"),
	HClkHWThermal:         health("clk_hw_thermal_s", 270, GroupClockEvents, HealthNanos, "time clocks were held by hardware thermal slowdown"),
	HClkHWPowerBrake:      health("clk_hw_power_brake_s", 271, GroupClockEvents, HealthNanos, "time clocks were held by the hardware power brake"),
	HClkBoardLimit:        health("clk_board_limit_s", 77, GroupClockEvents, HealthNanos, "time clocks were held by the board limit"),
	HClkReliability:       health("clk_reliability_s", 79, GroupClockEvents, HealthNanos, "time clocks were held by the reliability policy"),
	HNVLinkCount:          health("nvlink_links", 91, GroupNVLink, HealthState, "NVLink links present"),
	HNVLinkUp:             health("nvlink_up", 0, GroupNVLink, HealthState, "NVLink links active"),
	HNVLinkErrors:         health("nvlink_errors", 0, GroupNVLink, HealthCount, "NVLink error counters summed over the links (malformed, buffer overrun, rx, local integrity, tx discards, effective)"),
	HNVLinkRecovery:       health("nvlink_recoveries", 0, GroupNVLink, HealthCount, "successful NVLink link recoveries summed over the links"),
	HNVLinkRecoveryFailed: health("nvlink_recovery_failed", 0, GroupNVLink, HealthCount, "failed NVLink link recoveries summed over the links"),
	HC2CCount:             health("c2c_links", 170, GroupC2C, HealthState, "C2C links present"),
	HC2CUp:                health("c2c_up", 0, GroupC2C, HealthState, "C2C links active"),
	HC2CErrors:            health("c2c_errors", 0, GroupC2C, HealthCount, "C2C CRC and replay errors summed over the links"),
	HRecoveryAction:       health("recovery_action", 230, GroupRecovery, HealthState, "recovery action the driver asks for (0 none, 1 reset, 2 reboot, 3 drain P2P, 4 drain and reset)"),
	HSRAMCorrectable:      health("sram_correctable", 0, GroupECC, HealthCount, "correctable SRAM ECC errors since the driver loaded").by("nvmlDeviceGetSramEccErrorStatus", "VolatileCor"),
	HSRAMUncSecDed:        health("sram_uncorrectable_secded", 0, GroupECC, HealthCount, "uncorrectable SRAM SEC-DED errors since the driver loaded").by("nvmlDeviceGetSramEccErrorStatus", "VolatileUncSecDed"),
	HSRAMUncParity:        health("sram_uncorrectable_parity", 0, GroupECC, HealthCount, "uncorrectable SRAM parity errors since the driver loaded").by("nvmlDeviceGetSramEccErrorStatus", "VolatileUncParity"),
	HSRAMThreshold:        health("sram_threshold_exceeded", 0, GroupECC, HealthState, "the SRAM error threshold of field diagnostics is exceeded (1 yes)").by("nvmlDeviceGetSramEccErrorStatus", "BThresholdExceeded"),
	HChannelRepairPending: health("channel_repair_pending", 0, GroupRepair, HealthState, "a memory channel repair waits for a GPU reset (1 yes)").by("nvmlDeviceGetRepairStatus", "BChannelRepairPending"),
	HTPCRepairPending:     health("tpc_repair_pending", 0, GroupRepair, HealthState, "a TPC repair waits for a GPU reset (1 yes)").by("nvmlDeviceGetRepairStatus", "BTpcRepairPending"),
	HMemoryUnrepairable:   health("memory_unrepairable", 0, GroupRepair, HealthState, "the GPU has memory that can no longer be repaired (1 yes)").by("nvmlDeviceGetUnrepairableMemoryFlag_v1", "BUnrepairableMemory"),
	// The NVLink fabric (fabric.go): v4, else an older driver's call
	// (fabricOlder); no CSV column, a state read each second that
	// events.log writes on each change. R535's original call has no health
	// mask or summary, R550's v2 struct no summary: absent there.
	HFabricState:   fabric("fabric_state", "the fabric manager's probe of the GPU (0 not supported, 1 not started, 2 in progress, 3 completed)", "State", FabricStateName),
	HFabricStatus:  fabric("fabric_status", "the probe's status once completed (an NVML return code, 0 success)", "Status", FabricStatusText),
	HFabricHealth:  fabric("fabric_health_mask", "the fabric health mask (NVML_GPU_FABRIC_HEALTH_MASK_*)", "HealthMask", FabricHealthText).older(fabricV3, fabricV2),
	HFabricSummary: fabric("fabric_health", "the fabric health summary (0 not supported, 1 healthy, 2 unhealthy, 3 limited capacity)", "HealthSummary", FabricSummaryName).older(fabricV3),
	// The clique (the GPUs the fabric manager lets talk over NVLink) the
	// GPU is in: v3's and v1's cliqueId, which nvml.h maps to v4's first
	// unicast pointer clique (the list is sorted by type, that type 0
	// first); an events.log line when the GPU moves.
	HFabricClique: fabricClique(),
	// The cluster UUID in two halves of one call, composed by
	// FabricClusterUUID for status and events.log.
	FabricCluster0: fabricUUID("FabricCluster0", "ClusterUuid+0"),
	FabricCluster8: fabricUUID("FabricCluster8", "ClusterUuid+8"),
	// v4 only: v3's and v1's cliqueId is the clique itself.
	FabricNumCliques:  {Name: "FabricNumCliques", Getter: "nvmlDeviceGetGpuFabricInfo_v4", Value: "NumCliques", Type: U32, Tier: Slow},
	FabricClique0Type: {Name: "FabricClique0Type", Getter: "nvmlDeviceGetGpuFabricInfo_v4", Value: "Cliques+0", Type: U32, Tier: Slow},
}

// HealthIDs is Table's hardware health counters, in table order.
var HealthIDs = func() (h []ID) {
	for id := range Table {
		d := &Table[id]
		if d.Name == "" {
			panic("reading.Table: no row for reading " + strconv.Itoa(id))
		}
		d.id = ID(id)
		if d.health {
			h = append(h, ID(id))
		}
	}
	return h
}()

// by names the getter that reads a health counter (its field is 0) and the
// field of the struct it fills that holds the counter.
func (d Def) by(getter, value string) Def {
	d.Getter, d.Value = getter, value
	return d
}

// What older drivers have instead of nvmlDeviceGetGpuFabricInfo_v4, newest
// first (fabricOlder): the versioned call, with the v3 struct (the same
// fields, the clique as cliqueId), then with the v2 struct, the newest an
// R550 knows (nvml.h of CUDA 12.4: nvmlGpuFabricInfoV_t is v2; no health
// summary), and R535's original call, whose nvmlGpuFabricInfo_t has no
// health mask or summary. "/v2" names the same function asked for another
// struct (sampler.fnOf).
const (
	fabricV3 = "nvmlDeviceGetGpuFabricInfoV"
	fabricV2 = "nvmlDeviceGetGpuFabricInfoV/v2"
	fabricV1 = "nvmlDeviceGetGpuFabricInfo"
)

var fabricOlder = []string{fabricV3, fabricV2, fabricV1}

// fabric declares a reading of the GPU's fabric info (fabric.go): field
// value of nvmlDeviceGetGpuFabricInfo_v4's struct, or of an older call's
// (fabricOlder), with text its events.log meaning.
func fabric(name, help, value string, text func(uint64) string) Def {
	d := health(name, 0, GroupFabric, HealthState, help).by("nvmlDeviceGetGpuFabricInfo_v4", value)
	d.Older, d.CSV, d.Text = fabricOlder, "", text
	return d
}

// older names the functions older drivers have instead of d's getter,
// newest first: only those whose struct has d's value.
func (d Def) older(fns ...string) Def {
	d.Older = fns
	return d
}

// fabricClique declares the fabric clique the GPU is in: 4 bytes into v4's
// first clique entry (nvmlGpuFabricClique_v1_t's id, after its one-byte
// type), the older structs' cliqueId. An id: no metric.
func fabricClique() Def {
	d := fabric("fabric_clique", "the fabric clique the GPU is in", "Cliques+4", nil)
	d.OlderValue, d.Type, d.Metric = "CliqueId", U32, Metric{}
	return d
}

// fabricUUID declares 8 bytes of the fabric's cluster UUID at value:
// read with the other fabric readings, written by no output itself.
func fabricUUID(name, value string) Def {
	return Def{Name: name, Getter: "nvmlDeviceGetGpuFabricInfo_v4", Older: fabricOlder, Value: value, Type: U64, Tier: Slow}
}

// health declares a hardware health counter: a slow-tier reading of the
// NVML field given (0: derived from the per-link readings) in the health
// call, its CSV column, status counter key and events.log counter= value
// name, its metric named from name by kind (health_<name>_total for a
// count, health_<name>_seconds_total for a time, health_<name> for a
// state) with help.
func health(name string, field uint32, g HealthGroup, k HealthKind, help string) Def {
	d := Def{Name: name, Field: field, Type: U64, Tier: Slow, Call: HealthCall, Unit: "count", CSV: name, Key: name, Group: g, Kind: k, health: true}
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
