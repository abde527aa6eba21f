package reading

// Thresholds are the GPU's temperature thresholds in degrees C, read once at start.
type Thresholds struct {
	Shutdown Opt[uint32] // GPU shuts down for hardware protection
	Slowdown Opt[uint32] // hardware slowdown begins
	MemMax   Opt[uint32] // memory temperature limit
	GPUMax   Opt[uint32] // GPU may be throttled below base clock; gpu_tlimit is measured from here
}

// GPU is what is known about one monitored GPU without sampling it: read once at
// start. Index is NVML's enumeration index (used in file names); UUID is the
// stable identity.
type GPU struct {
	Index               int
	UUID                string
	Name                string
	Serial              string
	VBIOS               string
	BusID               string // NVML form, upper case: 00000000:4B:00.0
	MinorNumber         Opt[int]
	NumFans             int // fans the driver reports (0 on datacenter parts); at most MaxFans are sampled
	Thresholds          Thresholds
	GSPVersion          string // empty when unknown
	GSPMode             string // "enabled", "disabled", "enabled (default)" ...; empty when unknown
	PowerLimitDefaultMW Opt[uint32]
}

// System is what is known about the host and driver.
type System struct {
	DriverVersion string
	NVMLVersion   string
	CUDAVersion   string // driver's CUDA version, "12.8"; empty when unknown
}
