package action

import "github.com/gpu-telemetry/gpu-telemetry/xid"

// The one table of what the driver's reports ask of the operator: the
// daemon's repair action (anomaly.Repair) and the crash snapshots'
// incidents (snapshot.XidEvent: an event asking for more is a new stage)
// both read it.

// bucketAction is what each of NVIDIA's immediate-action buckets (the
// resolution column of the Xid catalog, docs.nvidia.com/deploy/xid-errors,
// carried by xid.Explanation.Bucket) asks of the operator.
var bucketActions = map[string]Action{
	"IGNORE":               None,     // catalog: no action
	"RESTART_APP":          Watch,    // catalog: restart the application; the GPU needs nothing, its investigatory column asks for support if it recurs
	"RESET_GPU":            ResetGPU, // catalog: reset the GPU
	"RESTART_BM":           Reboot,   // catalog: restart the bare-metal node (Xid 79)
	"RESTART_VM":           Reboot,   // catalog: restart the VM: the node as this logger sees it (Xid 151)
	"CHECK_MECHANICALS":    Inspect,  // catalog: check the board's power and seating (Xid 54): hands on the hardware
	"CONTACT_SUPPORT":      Watch,    // catalog: contact NVIDIA support (Xid 61, 142): a report to file, no repair
	"CHECK_UVM":            Watch,    // catalog: check the UVM driver (Xid 159): software
	"UPDATE_SWFW":          Watch,    // catalog: update the driver or firmware (Xid 78)
	"WORKFLOW_XID_45":      None,     // catalog: the consequence of other Xids (solo: restart the fabric manager); the others decide
	"WORKFLOW_XID_48":      ResetGPU, // catalog: DBE workflow: the remap it leaves pending applies at a GPU reset; DCGM fails on Xid 48
	"WORKFLOW_NVLINK_ERR":  ResetGPU, // catalog: NVLink error workflow (Xid 74): reset the GPU to retrain the links; DCGM fails on Xid 74
	"WORKFLOW_NVLINK5_ERR": ResetGPU, // catalog: NVLink5 workflow, when the text did not decode (xid.DecodeNVLink5 gives the row's own bucket when it does)
	"XID_154_EVAL":         Watch,    // NVLink5 decode: evaluate the recovery action Xid 154 announces (which decides)
	"XID_154":              None,     // Xid 154 announces a recovery action: RecoveryAction decides
	"":                     Watch,    // no bucket in the catalog (Xid 162-172, but unbucketed's) or a code not in it: keep an eye on it
}

// unbucketed is what the Xids that have no bucket in NVIDIA's catalog ask
// for where their entry (xid/catalog.json) or the Xid they detail or share
// a name with does, and what the reason says it was read from.
var unbucketed = map[int]struct {
	a    Action
	from string
}{
	167: {Reboot, "no resolution in the catalog; off its bus, as Xid 79 (RESTART_BM)"},          // catalog: PCIE_FATAL_TIMEOUT, class hardware: the GPU does not answer on its bus
	169: {ResetGPU, "no resolution in the catalog; the halt of Xid 62 (RESET_GPU)"},             // catalog: SEC2_HALT_ERROR, named as Xid 62, "Internal micro-controller halt"
	171: {ResetGPU, "no resolution in the catalog; as the Xid 48 it details (WORKFLOW_XID_48)"}, // catalog: "Follow the Xid 48 it details: reset the GPU ..."
	172: {ResetGPU, "no resolution in the catalog; as the Xid 48 it details (WORKFLOW_XID_48)"}, // catalog: "Follow the Xid 48 it details: reset the GPU ..."
}

// XidAction is the action one Xid report asks for, from its bucket in
// NVIDIA's catalog (the NVLink5 decode's when its text decoded); for an
// Xid 154 whose text named it, from the recovery action; for an Xid with
// no bucket, from what its entry says (unbucketed). An NVLink5 error the
// decode calls link fatal is DrainAndReset whatever its bucket: the
// decode's Severity column says a link-fatal error leaves the GPU in the
// drain-and-reset state (start no new work, let the jobs drain, then reset),
// the state the driver's recovery action 4 names.
func XidAction(e xid.Explanation) Action {
	switch {
	case e.HasRecovery:
		return RecoveryAction(e.Recovery)
	case e.LinkFatal:
		return DrainAndReset
	}
	if u, ok := unbucketed[e.Code]; ok && e.Bucket == "" {
		return u.a
	}
	if a, ok := bucketActions[e.Bucket]; ok {
		return a
	}
	return Watch // a bucket newer than this table: shown, never dropped
}

// XidSource says what XidAction read e's action from, for the reason that
// names it: "recovery action ...", what an unbucketed Xid's entry implies,
// or "NVIDIA's resolution BUCKET".
func XidSource(e xid.Explanation) string {
	if e.HasRecovery {
		return "recovery action " + xid.RecoveryActionName(e.Recovery)
	}
	if u, ok := unbucketed[e.Code]; ok && e.Bucket == "" {
		return u.from
	}
	return "NVIDIA's resolution " + e.BucketOrNone()
}

// recoveryActions is what each of the driver's recovery actions
// (nvmlDeviceGpuRecoveryAction_t in go-nvml's nvml.h; Xid 154's "to 0xN")
// asks for. DCGM's health watch fails on reset, reboot and drain and reset
// and warns on drain P2P.
var recoveryActions = [...]Action{
	0: None,          // NONE
	1: ResetGPU,      // GPU_RESET
	2: Reboot,        // NODE_REBOOT
	3: Watch,         // DRAIN_P2P: stop the P2P users, then the driver says what next (DCGM: warn)
	4: DrainAndReset, // DRAIN_AND_RESET
	5: RecoverFabric, // RECOVER_IMEX_DOMAIN
	6: ResetGPU,      // BUS_RESET: reset the GPU's PCIe bus (nvidia-smi -r resets it with the GPU)
	7: Reboot,        // SYSTEM_REBOOT
}

// RecoveryAction is what the driver's recovery action v asks for. A value
// newer than the table still needs action (health-counters.md: treat
// unknown values as needing action): a reboot, the strongest warm remedy.
func RecoveryAction(v uint64) Action {
	if v < uint64(len(recoveryActions)) {
		return recoveryActions[v]
	}
	return Reboot
}
