package reading

import "time"

// MaxFans is the number of fans per GPU the sampler records. Boards with more
// fans (none known) are sampled for the first MaxFans only.
const MaxFans = 8

// Status says whether a sample holds readings or stands for a failure.
type Status uint8

const (
	// StatusAnswered: the GPU answered the sample; individual readings may
	// still be absent. (A GPU whose last sample was answered is
	// live.StateAnswering, "answering" in the metrics.)
	StatusAnswered Status = iota
	// StatusFailed: every call the sample tried failed; Err says why.
	StatusFailed
	// StatusHung: an NVML call for this GPU has not returned by the deadline;
	// Err names the function and HungFor says for how long it has been stuck.
	StatusHung
	// StatusLost: the driver reported the GPU lost (NVML_ERROR_GPU_IS_LOST).
	StatusLost
)

// Sensor is one entry of the thermal settings array (nvmlGpuThermalSettings_t).
type Sensor struct {
	Temp       int32
	Target     int32 // thermal target, C (NVML's nvmlThermalTarget_t)
	Controller int32 // NVML's nvmlThermalController_t
}

// Sample is one reading of one GPU. It is a plain value without pointers into
// shared state, so copying it is safe and allocation-free.
type Sample struct {
	GPU        int           // GPU index
	Time       time.Time     // wall clock when the reading started (not the scheduled tick)
	KernelTime time.Duration // CLOCK_MONOTONIC at Time: the clock dmesg prints
	Status     Status
	Err        string        // StatusFailed: error text; StatusHung: the stuck function
	HungFor    time.Duration // StatusHung: how long the call has been stuck

	TempC           Opt[uint32]
	TLimitC         Opt[int32] // GPU max threshold minus TempC
	PowerMW         Opt[uint32]
	PowerLimitMW    Opt[uint32] // management limit (nvidia-smi -pl); re-read every sample
	EnforcedLimitMW Opt[uint32]
	EnergyMJ        Opt[uint64] // total since driver load
	PState          Opt[uint32] // 0..15
	GraphicsMHz     Opt[uint32]
	MemMHz          Opt[uint32]
	SMMHz           Opt[uint32]
	GPUUtil         Opt[uint32] // percent
	MemUtil         Opt[uint32] // percent
	EncUtil         Opt[uint32] // percent
	DecUtil         Opt[uint32] // percent
	VRAMUsedBytes   Opt[uint64]
	VRAMTotalBytes  Opt[uint64]
	PCIeGen         Opt[uint32]
	PCIeWidth       Opt[uint32]
	PCIeReplay      Opt[uint64]
	MemTempC        Opt[uint32]
	Throttle        Opt[uint64] // clocks event reasons bitmask
	NumFans         int         // how many entries of Fans are meaningful
	Fans            [MaxFans]Fan
	Sensor0         Opt[Sensor]

	// Health holds the GPU-level health counters (Health: rows of Table), read on the
	// slow tier and carried forward in between like its other columns.
	Health [NumHealth]Opt[uint64]

	Flags Flags
}

// MaxFanSpeed returns the fastest fan's speed; absent when the GPU has no fans
// or no fan speed was read.
func (s *Sample) MaxFanSpeed() Opt[uint32] {
	var m Opt[uint32]
	for i := 0; i < s.NumFans && i < MaxFans; i++ {
		if v, ok := s.Fans[i].Speed.Get(); ok && (!m.OK || v > m.V) {
			m = Some(v)
		}
	}
	return m
}
