package reading

import (
	"strconv"
	"time"
)

// Hardware health counters: what the GPU itself counted going wrong (ECC
// errors, row remapping, PCIe errors, time spent in each clock event
// reason, NVLink). Each GPU-level counter is a row of Table (health: name,
// NVML field or getter, group, kind), read on the slow tier; the sampler,
// the CSV, events.log, status, metrics and the snapshot walk it, so adding
// a counter is its ID and its row (both in table.go). The per-link
// NVLink counters are the per-link table LinkDefs.

// HealthKind says how a health counter changes and how it is written.
type HealthKind uint8

const (
	// HealthCount only grows while the driver stays loaded: events.log
	// writes a change as "+N".
	HealthCount HealthKind = iota
	// HealthState is a mode, a flag or an action: every change matters.
	HealthState
	// HealthNanos is a time in ns that only grows; the CSV writes seconds
	// with 3 decimals.
	HealthNanos
)

// HealthGroup is a set of counters a GPU supports together or not at all.
type HealthGroup uint8

// The health groups, in the order system-info.txt lists them.
const (
	GroupECC HealthGroup = iota
	GroupRemap
	GroupRetired
	GroupPCIe
	GroupClockEvents
	GroupNVLink
	GroupC2C
	GroupRecovery
	GroupRepair
	GroupFabric
	NumHealthGroups
)

// HealthGroupNames names the groups (system-info.txt, status --json).
var HealthGroupNames = [NumHealthGroups]string{
	GroupECC: "ecc", GroupRemap: "row_remap", GroupRetired: "retired_pages", GroupPCIe: "pcie",
	GroupClockEvents: "clock_events", GroupNVLink: "nvlink", GroupC2C: "c2c", GroupRecovery: "recovery_action",
	GroupRepair: "memory_repair", GroupFabric: "fabric",
}

// MaxLinks is the number of NVLink links per GPU the sampler records (a
// B200 has 18).
const MaxLinks = 18

// MaxC2C is the number of C2C links per GPU the sampler records.
const MaxC2C = 4

// LinkCounterID names one per-link NVLink error counter.
type LinkCounterID uint8

// The per-link NVLink counters: the NVLink5 fields (Blackwell), then the
// pre-Blackwell data-link counters, read with nvmlDeviceGetNvLinkErrorCounter
// on GPUs without the NVLink5 fields.
const (
	LMalformed LinkCounterID = iota
	LBufferOverrun
	LRxErrors
	LLocalIntegrity
	LTxDiscards
	LEffectiveErrors
	LRecoveryOK
	LRecoveryFailed
	LSymbolErrors
	LEffectiveBER // packed BER (DecodeBER)
	LSymbolBER    // packed BER
	LDLReplay     // pre-Blackwell: data-link replays
	LDLRecovery   // pre-Blackwell: data-link recoveries
	LDLCRCFlit    // pre-Blackwell: flit CRC errors
	LDLCRCData    // pre-Blackwell: data CRC errors
	NumLinkCounters
)

// LinkDef declares one per-link counter.
type LinkDef struct {
	Name  string // metric label value and snapshot column
	Field uint32 // NVML field read with scopeId = link; 0: read by the pre-Blackwell getter
	BER   bool   // a packed bit error rate, not a count
	// Error says the counter is summed into nvlink_errors.
	Error bool
}

// LinkDefs declares the per-link counters, indexed by LinkCounterID.
var LinkDefs = [NumLinkCounters]LinkDef{
	LMalformed:       {Name: "malformed", Field: 206, Error: true},
	LBufferOverrun:   {Name: "buffer_overrun", Field: 207, Error: true},
	LRxErrors:        {Name: "rx_errors", Field: 208, Error: true},
	LLocalIntegrity:  {Name: "local_integrity", Field: 211, Error: true},
	LTxDiscards:      {Name: "tx_discards", Field: 212, Error: true},
	LEffectiveErrors: {Name: "effective_errors", Field: 219, Error: true},
	LRecoveryOK:      {Name: "recovery_ok", Field: 213},
	LRecoveryFailed:  {Name: "recovery_failed", Field: 214},
	LSymbolErrors:    {Name: "symbol_errors", Field: 221},
	LEffectiveBER:    {Name: "effective_ber", Field: 220, BER: true},
	LSymbolBER:       {Name: "symbol_ber", Field: 222, BER: true},
	LDLReplay:        {Name: "dl_replay", Error: true},
	LDLRecovery:      {Name: "dl_recovery"},
	LDLCRCFlit:       {Name: "dl_crc_flit", Error: true},
	LDLCRCData:       {Name: "dl_crc_data", Error: true},
}

// The per-link inventory fields.
const (
	FieldLinkSpeed   = 164 // NVLink speed, MB/s
	FieldLinkState   = 165 // NVML_NVLINK_STATE_*: 0 inactive, 1 active, 2 sleep, 3 active, traffic disabled
	FieldLinkVersion = 166 // nvmlNvlinkVersion_t
	FieldC2CStatus   = 171 // 0 inactive, 1 active
	FieldC2CCRC      = 231
	FieldC2CReplay   = 232
	FieldC2CReplayB2 = 233
)

// LinkStateActive is NVML_NVLINK_STATE_ACTIVE.
const LinkStateActive = 1

// Link is one NVLink link as last read.
type Link struct {
	State     Opt[uint32]
	SpeedMBps Opt[uint32]
	Version   Opt[uint32]
	C         [NumLinkCounters]Opt[uint64]
}

// Up reports whether the link's state is known and active.
func (l *Link) Up() bool { return l.State.OK && l.State.V == LinkStateActive }

// LinkStateName returns the text of an NVML_NVLINK_STATE_* value.
func LinkStateName(v uint32) string {
	switch v {
	case 0:
		return "inactive"
	case 1:
		return "active"
	case 2:
		return "sleep"
	case 3:
		return "active_traffic_disabled"
	}
	return "state_" + strconv.FormatUint(uint64(v), 10)
}

// NVLinks is every NVLink link of a GPU as last read, with when. It is a
// plain value, published whole by the sampler.
type NVLinks struct {
	At time.Time // the sample that read them; zero: never read
	N  int       // links present (at most MaxLinks recorded)
	L  [MaxLinks]Link
}

// DecodeBER decodes a packed NVLink bit error rate: mantissa in bits 8-11,
// exponent in bits 0-7, rate = mantissa x 10^-exponent.
func DecodeBER(v uint64) float64 {
	mant := float64((v >> 8) & 0xf)
	exp := int(v & 0xff)
	r := mant
	for range exp {
		r /= 10
	}
	return r
}

// RecoveryActionName returns the text of an nvmlDeviceGpuRecoveryAction_t
// value. Values newer drivers add read "action_N": they still need action.
func RecoveryActionName(v uint64) string {
	switch v {
	case 0:
		return "none"
	case 1:
		return "gpu_reset"
	case 2:
		return "node_reboot"
	case 3:
		return "drain_p2p"
	case 4:
		return "drain_and_reset"
	case 5:
		return "recover_imex_domain"
	case 6:
		return "bus_reset"
	case 7:
		return "system_reboot"
	}
	return "action_" + strconv.FormatUint(v, 10)
}

// AppendHealthCell appends reading id's CSV cell (Def.AppendCell): nothing
// when absent.
func AppendHealthCell(b []byte, id ID, v Opt[uint64]) []byte {
	if x, ok := v.Get(); ok {
		return Table[id].AppendCell(b, x)
	}
	return b
}
