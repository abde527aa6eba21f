package reading

import (
	"encoding/binary"
	"encoding/hex"
	"strconv"
	"strings"
)

// The NVLink fabric a GPU of an NVSwitch system (HGX B200, GB200 NVL72,
// Hopper HGX) belongs to, as nvmlDeviceGetGpuFabricInfo_v4 gives it
// (nvml.h, NVML_GPU_FABRIC_*): the fabric manager's probe state, its
// status, the health mask and its summary, the clique and the cluster UUID.
// The readings are the rows HFabric... of Table (group GroupFabric) and the
// UUID's halves FabricCluster0 and 8; this file decodes their values.

// The probe states (NVML_GPU_FABRIC_STATE_*).
const (
	FabricNotSupported = 0
	FabricNotStarted   = 1
	FabricInProgress   = 2 // CUDA cannot start while it lasts (NVIDIA/gpu-operator issue 2781: CUDA error 802)
	FabricCompleted    = 3
)

// FabricStateName returns the text of a fabric probe state; an unknown one
// is "state_N".
func FabricStateName(v uint64) string {
	switch v {
	case FabricNotSupported:
		return "not_supported"
	case FabricNotStarted:
		return "not_started"
	case FabricInProgress:
		return "in_progress"
	case FabricCompleted:
		return "completed"
	}
	return "state_" + strconv.FormatUint(v, 10)
}

// FabricSummaryName returns the text of NVML_GPU_FABRIC_HEALTH_SUMMARY_*.
func FabricSummaryName(v uint64) string {
	switch v {
	case 0:
		return "not_supported"
	case 1:
		return "healthy"
	case 2:
		return "unhealthy"
	case 3:
		return "limited_capacity"
	}
	return "summary_" + strconv.FormatUint(v, 10)
}

// FabricHealthField is one field of the fabric health mask
// (NVML_GPU_FABRIC_HEALTH_MASK_SHIFT_* and _WIDTH_*). Its value 0 is "not
// supported"; the yes/no fields are 1 true, 2 false.
type FabricHealthField struct {
	Name  string
	Shift uint
	Mask  uint64
	// Values names each value (index = value); nil: 0 not_supported,
	// 1 true, 2 false.
	Values []string
}

// The health mask fields, in nvml.h's order.
const (
	FabricDegradedBW = iota
	FabricRouteRecovery
	FabricRouteUnhealthy
	FabricAccessTimeoutRecovery
	FabricIncorrectConfig
	FabricPartitionAssigned
	FabricGFMState
	NumFabricHealthFields
)

// FabricConfigOK is the incorrect-configuration field's value "none": the
// configuration is correct.
const FabricConfigOK = 1

// FabricHealthFields declares the health mask, indexed by the constants
// above (nvml.h of NVML API 13, go-nvml v0.13.4-1).
var FabricHealthFields = [NumFabricHealthFields]FabricHealthField{
	FabricDegradedBW:            {Name: "degraded_bandwidth", Shift: 0, Mask: 0x3},
	FabricRouteRecovery:         {Name: "route_recovery", Shift: 2, Mask: 0x3},
	FabricRouteUnhealthy:        {Name: "route_unhealthy", Shift: 4, Mask: 0x3},
	FabricAccessTimeoutRecovery: {Name: "access_timeout_recovery", Shift: 6, Mask: 0x3},
	FabricIncorrectConfig: {Name: "incorrect_configuration", Shift: 8, Mask: 0xf, Values: []string{
		"not_supported", "none", "incorrect_sysguid", "incorrect_chassis_serial", "no_partition",
		"insufficient_nvlinks", "incompatible_gpu_firmware", "invalid_location", "gpu_state_invalid"}},
	FabricPartitionAssigned: {Name: "partition_assigned", Shift: 12, Mask: 0x3},
	FabricGFMState:          {Name: "global_fabric_manager", Shift: 14, Mask: 0x3, Values: []string{"not_supported", "connected", "disconnected"}},
}

var yesNo = []string{"not_supported", "true", "false"}

// Get returns the field's value in health mask m.
func (f *FabricHealthField) Get(m uint64) uint64 { return (m >> f.Shift) & f.Mask }

// Text returns the field's value in m as text; an unknown value is its
// number.
func (f *FabricHealthField) Text(m uint64) string {
	v, names := f.Get(m), f.Values
	if names == nil {
		names = yesNo
	}
	if v < uint64(len(names)) {
		return names[v]
	}
	return strconv.FormatUint(v, 10)
}

// FabricTrue reports whether yes/no field f is "true" in health mask m.
func FabricTrue(m uint64, f int) bool { return FabricHealthFields[f].Get(m) == 1 }

// FabricBadConfig returns the reason of an incorrect configuration in
// health mask m ("" when the configuration is correct or not reported).
func FabricBadConfig(m uint64) string {
	f := &FabricHealthFields[FabricIncorrectConfig]
	if v := f.Get(m); v > FabricConfigOK {
		return f.Text(m)
	}
	return ""
}

// FabricHealthText decodes health mask m field by field:
// "degraded_bandwidth:false,route_recovery:false,...".
func FabricHealthText(m uint64) string {
	var b strings.Builder
	for i := range FabricHealthFields {
		f := &FabricHealthFields[i]
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(f.Name)
		b.WriteByte(':')
		b.WriteString(f.Text(m))
	}
	return b.String()
}

// FabricStatusText returns the text of the probe's status (an
// nvmlReturn_t, meaningful once the state is completed): "success" for 0,
// else "error_N".
func FabricStatusText(v uint64) string {
	if v == 0 {
		return "success"
	}
	return "error_" + strconv.FormatUint(v, 10)
}

// FabricCliqueChecked leaves v's fabric_clique absent unless v4 says its
// first clique entry is there and a unicast one (the list is sorted by type,
// unicast, type 0, first): with no cliques, or only multicast ones, the
// entry's id is stale or another kind's. A v3 reading (no count read) is
// its cliqueId, kept.
func FabricCliqueChecked(v *Values) {
	n, ok := v[FabricNumCliques].Get()
	if !ok {
		return
	}
	var b [4]byte // the entry's type is its first byte; the rest is padding
	typ, tok := v[FabricClique0Type].Get()
	binary.NativeEndian.PutUint32(b[:], uint32(typ))
	if n == 0 || !tok || b[0] != 0 {
		v[HFabricClique] = Opt[uint64]{}
	}
}

// FabricClusterUUID returns the cluster UUID of the fabric the GPU is in,
// as v has it, in the canonical form (8-4-4-4-12 hex digits, the bytes in
// order: nvidia-smi -q's ClusterUUID); false when absent or all zero (in
// no cluster).
func FabricClusterUUID(v *Values) (string, bool) {
	lo, ok0 := v[FabricCluster0].Get()
	hi, ok8 := v[FabricCluster8].Get()
	if !ok0 || !ok8 || lo|hi == 0 {
		return "", false
	}
	// The sampler copies each half's 8 bytes into a uint64 as they lie
	// in memory: native order gives the bytes back.
	var u [16]byte
	binary.NativeEndian.PutUint64(u[:8], lo)
	binary.NativeEndian.PutUint64(u[8:], hi)
	var b [36]byte
	hex.Encode(b[0:8], u[0:4])
	hex.Encode(b[9:13], u[4:6])
	hex.Encode(b[14:18], u[6:8])
	hex.Encode(b[19:23], u[8:10])
	hex.Encode(b[24:], u[10:])
	b[8], b[13], b[18], b[23] = '-', '-', '-', '-'
	return string(b[:]), true
}

// FabricService is one of the fabric's daemons (a systemd unit) and
// whether a process runs it (proc.FabricServices).
type FabricService struct {
	Name string // the systemd unit's name
	Exe  string // its executable's name
	PID  int    // a process running it; 0: none
}
