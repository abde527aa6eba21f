package reading

// The table of readings: every scalar value of a Sample is declared once
// here, with where NVML gives it, how often it is read, its unit and sane
// range, and the outputs it reaches. The sampler plans its field batch and
// checks values against it, the CSV writer lays out its columns from it;
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

// Format is how a CSV cell writes a reading's value.
type Format uint8

const (
	Plain     Format = iota // the stored value in decimal
	Watts                   // milliwatts as whole watts, rounded (the seed's "%.0f")
	CentiWatt               // milliwatts as watts with 2 decimals (the seed's power_instant)
	MiB                     // bytes as whole MiB, truncated
	Hex4                    // "0x" and at least 4 hex digits (the seed's "0x%04x")
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
	Unit   string // of the stored value
	// Min and Max bound a sane stored value (Max 0: unbounded); a value
	// outside is a driver error: absent, logged once.
	Min, Max uint64
	CSV      string // CSV column ("" none)
	Format   Format // how the CSV cell writes it
	Key      string // the status document's key ("" none)
	Metric   Metric // Metric.Name "" none

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

// Sane reports whether v is inside the reading's bounds.
func (d *Def) Sane(v uint64) bool { return v >= d.Min && (d.Max == 0 || v <= d.Max) }

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

// Table is every scalar reading, in CSV column order. Composite readings
// (fans, thermal sensor 0) and the columns that are not readings (time,
// kernel time, throttle reason names, flags) are laid out by their outputs.
var Table = []Def{
	{Name: "TempC", Getter: "nvmlDeviceGetTemperature", Unit: "C", Max: maxTempC, CSV: "gpu_temp", Key: "temperature_c",
		Metric: Metric{Name: "temperature_celsius", Help: "GPU temperature.", Scale: 1},
		u32:    func(s *Sample) *Opt[uint32] { return &s.TempC }},
	{Name: "TLimitC", Unit: "C", CSV: "gpu_tlimit",
		i32: func(s *Sample) *Opt[int32] { return &s.TLimitC }},
	{Name: "PowerMW", Field: 186 /* NVML_FI_DEV_POWER_INSTANT */, Getter: "nvmlDeviceGetPowerUsage", Unit: "mW", Max: maxPowerMW, CSV: "power_instant", Format: CentiWatt, Key: "power_w",
		Metric: Metric{Name: "power_watts", Help: "Power draw.", Scale: 1e-3},
		u32:    func(s *Sample) *Opt[uint32] { return &s.PowerMW }},
	// A limit of 0 W is a driver error (and would divide by zero).
	{Name: "PowerLimitMW", Getter: "nvmlDeviceGetPowerManagementLimit", Unit: "mW", Min: 1, Max: maxPowerMW, CSV: "power_limit", Format: Watts, Key: "power_limit_w",
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
	{Name: "PCIeGen", Getter: "nvmlDeviceGetCurrPcieLinkGeneration", Tier: Slow, Min: 1, Max: maxPCIeGen, CSV: "pcie_gen", Key: "pcie_gen",
		Metric: Metric{Name: "pcie_link_generation", Help: "Current PCIe link generation.", Scale: 1},
		u32:    func(s *Sample) *Opt[uint32] { return &s.PCIeGen }},
	{Name: "PCIeWidth", Getter: "nvmlDeviceGetCurrPcieLinkWidth", Tier: Slow, Unit: "lanes", Min: 1, Max: maxPCIeW, CSV: "pcie_width", Key: "pcie_width",
		Metric: Metric{Name: "pcie_link_width", Help: "Current PCIe link width (lanes).", Scale: 1},
		u32:    func(s *Sample) *Opt[uint32] { return &s.PCIeWidth }},
	{Name: "Throttle", Getter: "nvmlDeviceGetCurrentClocksEventReasons", Unit: "bitmask", CSV: "throttle_bitmask", Format: Hex4, Key: "throttle_reasons",
		u64: func(s *Sample) *Opt[uint64] { return &s.Throttle }},
	{Name: "SMMHz", Getter: "nvmlDeviceGetClockInfo", Unit: "MHz", Max: maxClockMHz, CSV: "sm_clock", Key: "sm_clock_mhz",
		Metric: clockMetric("sm"),
		u32:    func(s *Sample) *Opt[uint32] { return &s.SMMHz }},
	{Name: "EnforcedLimitMW", Field: 190 /* NVML_FI_DEV_POWER_CURRENT_LIMIT */, Getter: "nvmlDeviceGetEnforcedPowerLimit", Unit: "mW", Min: 1, Max: maxPowerMW, CSV: "power_enforced_limit", Format: Watts, Key: "enforced_limit_w",
		Metric: Metric{Name: "power_enforced_limit_watts", Help: "Enforced power limit.", Scale: 1e-3},
		u32:    func(s *Sample) *Opt[uint32] { return &s.EnforcedLimitMW }},
	{Name: "EnergyMJ", Field: 83 /* NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION */, Getter: "nvmlDeviceGetTotalEnergyConsumption", Unit: "mJ", CSV: "energy_mj", Key: "energy_j",
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
}
