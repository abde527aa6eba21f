package reading

import "strconv"

// Clocks event reason bits (nvml.h, nvmlClocksEventReasons). NVML used to call
// them throttle reasons.
const (
	ThrottleGpuIdle              uint64 = 0x1
	ThrottleAppClocks            uint64 = 0x2
	ThrottleSwPowerCap           uint64 = 0x4
	ThrottleHwSlowdown           uint64 = 0x8
	ThrottleSyncBoost            uint64 = 0x10
	ThrottleSwThermalSlowdown    uint64 = 0x20
	ThrottleHwThermalSlowdown    uint64 = 0x40
	ThrottleHwPowerBrakeSlowdown uint64 = 0x80
	ThrottleDisplayClocks        uint64 = 0x100
	ThrottleBoardLimit           uint64 = 0x200
	ThrottleReliability          uint64 = 0x400
)

// ThrottleReason is one clocks event reason bit and its name.
type ThrottleReason struct {
	Bit  uint64
	Name string
}

// ThrottleReasons is every reason bit nvml.h names, lowest bit first. The
// names are those of gpu-telemetry-deep.py, the Python logger we ported (its
// THROTTLE_REASONS: AppClocks for 0x2, DisplayClocks for 0x100), so the
// throttle_reasons column reads as its did. Two differ on purpose: it named
// 0x200 UserDefinedClocks, which nvml.h uses as an old alias of 0x2, and it
// did not know 0x400; both take nvml.h's names (BoardLimit, Reliability).
// It also dropped unknown bits set beside known ones; AppendThrottleNames
// writes them as Unknown(0x...).
var ThrottleReasons = [...]ThrottleReason{
	{ThrottleGpuIdle, "GpuIdle"},
	{ThrottleAppClocks, "AppClocks"},
	{ThrottleSwPowerCap, "SwPowerCap"},
	{ThrottleHwSlowdown, "HwSlowdown"},
	{ThrottleSyncBoost, "SyncBoost"},
	{ThrottleSwThermalSlowdown, "SwThermalSlowdown"},
	{ThrottleHwThermalSlowdown, "HwThermalSlowdown"},
	{ThrottleHwPowerBrakeSlowdown, "HwPowerBrakeSlowdown"},
	{ThrottleDisplayClocks, "DisplayClocks"},
	{ThrottleBoardLimit, "BoardLimit"},
	{ThrottleReliability, "Reliability"},
}

// AppendThrottleNames appends the '|'-joined names of the bits set in mask:
// "None" for 0, and "Unknown(0x...)" for bits nvml.h does not name.
func AppendThrottleNames(b []byte, mask uint64) []byte {
	if mask == 0 {
		return append(b, "None"...)
	}
	first := true
	known := uint64(0)
	for _, t := range ThrottleReasons {
		known |= t.Bit
		if mask&t.Bit == 0 {
			continue
		}
		if !first {
			b = append(b, '|')
		}
		b = append(b, t.Name...)
		first = false
	}
	if rest := mask &^ known; rest != 0 {
		if !first {
			b = append(b, '|')
		}
		b = append(b, "Unknown(0x"...)
		b = strconv.AppendUint(b, rest, 16)
		b = append(b, ')')
	}
	return b
}

// ThrottleNames returns AppendThrottleNames as a string.
func ThrottleNames(mask uint64) string { return string(AppendThrottleNames(nil, mask)) }
