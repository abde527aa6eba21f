package reading

import (
	"strconv"
	"strings"
)

// The per-fan readings: every value a Sample holds for each fan
// (Sample.Fans[i]) is declared once in FanTable, as Table declares the
// scalar ones. The sampler reads each with its own call, the fan's index
// its argument; the CSV writer gives it the column fan<i>_<CSV>, the status
// document the key Key in each fan's object, the metrics collector the
// series gpu_telemetry_<Metric.Name>{fan="<i>"}, and a reader of the
// logger's files finds it by its column (FanColumn). A row without CSV or
// Metric.Name has no column or series.

// Fan is one fan's readings: speed and target in percent, the policy an
// NVML fan control policy (FanPolicyText).
type Fan struct {
	Speed  Opt[uint32] // measured
	Target Opt[uint32] // what the fan controller asks for
	Policy Opt[uint32] // who drives the fan: the firmware's temperature control (0) or a manual speed (1)
}

// FanDef declares one per-fan reading.
type FanDef struct {
	Name string // the Fan field it is stored in
	// Getter is the NVML function that reads it (the sampler's calls name
	// this row; an old driver's single-fan call may give fan 0's).
	Getter string
	// Fan0 is the function an older driver has instead, without the fan
	// argument, which gives fan 0's (called where the driver lacks
	// Getter; "" none).
	Fan0   string
	Max    uint64 // a sane value's bound; above it the value is a driver error: absent, logged once
	CSV    string // the column of fan i is fan<i>_<CSV>
	Key    string // its key in the status document's object of each fan
	Metric Metric // the series; its label is fan (Metric.Label is not used)
	// Seldom: read by the sampler beside the sample's batch, every
	// fanPolicyEvery (sampler/gpu.go), and carried forward in between: it
	// changes only when someone takes or hands back manual control.
	Seldom bool
	get    func(*Fan) *Opt[uint32]
}

// FanTable is every per-fan reading, in CSV column order.
var FanTable = []FanDef{
	// NVML documents that a fan's speed may exceed 100 %.
	{Name: "Speed", Getter: "nvmlDeviceGetFanSpeed_v2", Fan0: "nvmlDeviceGetFanSpeed", Max: 2 * maxPercent, CSV: "speed_pct", Key: "speed_pct",
		Metric: Metric{Name: "fan_speed_ratio", Help: "Fan speed (0-1).", Scale: 0.01},
		get:    func(f *Fan) *Opt[uint32] { return &f.Speed }},
	// A "negative" target arrives as 4294967295: out of range, absent.
	{Name: "Target", Getter: "nvmlDeviceGetTargetFanSpeed", Max: maxPercent, CSV: "target_pct", Key: "target_pct",
		Metric: Metric{Name: "fan_target_ratio", Help: "Fan speed the controller targets (0-1).", Scale: 0.01},
		get:    func(f *Fan) *Opt[uint32] { return &f.Target }},
	// The status document's only (top's GPU view): no column, no series.
	{Name: "Policy", Getter: "nvmlDeviceGetFanControlPolicy_v2", Max: maxFanPolicy, Key: "policy", Seldom: true,
		get: func(f *Fan) *Opt[uint32] { return &f.Policy }},
}

// The NVML fan control policies (nvmlFanControlPolicy_t).
const (
	FanPolicyAuto   = 0 // NVML_FAN_POLICY_TEMPERATURE_CONTINOUS_SW: the firmware follows the temperature
	FanPolicyManual = 1 // NVML_FAN_POLICY_MANUAL: a speed set through nvmlDeviceSetFanSpeed_v2
	maxFanPolicy    = 255
)

// FanPolicyText names a fan control policy: "auto", "manual", or the
// number of one this code does not know.
func FanPolicyText(p uint32) string {
	switch p {
	case FanPolicyAuto:
		return "auto"
	case FanPolicyManual:
		return "manual"
	}
	return strconv.FormatUint(uint64(p), 10)
}

// Get returns fan's value of the reading in s; absent for a fan s does not
// have.
func (d *FanDef) Get(s *Sample, fan int) (uint32, bool) {
	if fan < 0 || fan >= min(s.NumFans, MaxFans) {
		return 0, false
	}
	return d.get(&s.Fans[fan]).Get()
}

// Set stores v as fan's value of the reading in s (present).
func (d *FanDef) Set(s *Sample, fan int, v uint32) { *d.get(&s.Fans[fan]) = Some(v) }

// FanColumn returns the fan and the FanTable row of a CSV column named
// fan<i>_<CSV>; ok is false for any other column.
func FanColumn(name string) (fan int, def *FanDef, ok bool) {
	rest, found := strings.CutPrefix(name, "fan")
	if !found {
		return 0, nil, false
	}
	i := strings.IndexByte(rest, '_')
	if i <= 0 {
		return 0, nil, false
	}
	n, err := strconv.Atoi(rest[:i])
	if err != nil || n < 0 || n >= MaxFans || strconv.Itoa(n) != rest[:i] {
		return 0, nil, false
	}
	for j := range FanTable {
		if FanTable[j].CSV != "" && FanTable[j].CSV == rest[i+1:] {
			return n, &FanTable[j], true
		}
	}
	return 0, nil, false
}
