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

// Values holds a value of every reading of Table, by ID.
type Values [NumReadings]Opt[uint64]

// Sample is one reading of one GPU. It is a plain value without pointers into
// shared state, so copying it is safe and allocation-free.
type Sample struct {
	GPU        int           // GPU index
	Time       time.Time     // wall clock when the reading started (not the scheduled tick)
	KernelTime time.Duration // CLOCK_MONOTONIC at Time: the clock dmesg prints
	Status     Status
	Err        string        // StatusFailed: error text; StatusHung: the stuck function
	HungFor    time.Duration // StatusHung: how long the call has been stuck

	// Values holds every reading of Table, by ID (a signed one as its
	// int64's bits); the slow tier's are carried forward in between.
	Values  Values
	NumFans int // how many entries of Fans are meaningful
	Fans    [MaxFans]Fan
	Sensor0 Opt[Sensor]

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

// Get returns reading id's value and whether it is present.
func (s *Sample) Get(id ID) (uint64, bool) { return s.Values[id].Get() }

// Int returns signed reading id's value and whether it is present.
func (s *Sample) Int(id ID) (int64, bool) {
	v, ok := s.Values[id].Get()
	return int64(v), ok
}

// Set stores v as reading id's value (present).
func (s *Sample) Set(id ID, v uint64) { s.Values[id] = Some(v) }

// U32 returns reading id's value as the uint32 a reading of Type U32
// holds.
func (s *Sample) U32(id ID) Opt[uint32] {
	return Opt[uint32]{V: uint32(s.Values[id].V), OK: s.Values[id].OK}
}
