package action

import (
	"testing"

	"github.com/gpu-telemetry/gpu-telemetry/xid"
)

// TestXidAction checks the action of Xid reports against NVIDIA's Xid
// catalog's resolution (immediate action) column, docs.nvidia.com/deploy/
// xid-errors, as xid/catalog.json carries it, and DCGM's health watch, which
// fails a GPU on Xid 48, 74, 79, 95, 119, 120 and 140.
func TestXidAction(t *testing.T) {
	for _, tc := range []struct {
		name   string
		code   int
		text   string
		want   Action
		source string
	}{
		{"graphics engine exception", 13, "", Watch, "catalog: RESTART_APP"},
		{"memory page fault", 31, "", Watch, "catalog: RESTART_APP"},
		{"GPU stopped processing (application)", 43, "", None, "catalog: IGNORE"},
		{"preemptive cleanup", 45, "", None, "catalog: WORKFLOW_XID_45, the consequence of other Xids"},
		{"double-bit ECC error", 48, "", ResetGPU, "catalog: WORKFLOW_XID_48; DCGM fails on Xid 48"},
		{"aux power not connected", 54, "", Inspect, "catalog: CHECK_MECHANICALS"},
		{"micro-controller breakpoint", 61, "", Watch, "catalog: CONTACT_SUPPORT"},
		{"micro-controller halt", 62, "", ResetGPU, "catalog: RESET_GPU"},
		{"row remapping event", 63, "", None, "catalog: IGNORE"},
		{"row remapping failure", 64, "", ResetGPU, "catalog: RESET_GPU (the health verdict's remap_failure asks for inspect)"},
		{"NVLink error", 74, "", ResetGPU, "catalog: WORKFLOW_NVLINK_ERR; DCGM fails on Xid 74"},
		{"vGPU start error", 78, "", Watch, "catalog: UPDATE_SWFW"},
		{"fallen off the bus", 79, "", Reboot, "catalog: RESTART_BM; DCGM fails on Xid 79"},
		{"high SBE rate", 92, "", None, "catalog: IGNORE"},
		{"contained memory error", 94, "", Watch, "catalog: RESTART_APP; DCGM warns on Xid 94"},
		{"uncontained memory error", 95, "", ResetGPU, "catalog: RESET_GPU; DCGM fails on Xid 95"},
		{"GSP RPC timeout", 119, "", ResetGPU, "catalog: RESET_GPU; DCGM fails on Xid 119"},
		{"GSP error", 120, "", ResetGPU, "catalog: RESET_GPU; DCGM fails on Xid 120"},
		{"ECC unrecovered error", 140, "", ResetGPU, "catalog: RESET_GPU; DCGM fails on Xid 140"},
		{"GPU initialization error", 143, "", ResetGPU, "catalog: RESET_GPU"},
		{"NVLink5 SAW fatal", 144, "SAW_MVB Fatal XC0 i0 Link 03 (0x00000021 0x00000002 0x00000000 0x00000000 0x00000000 0x00000000)", ResetGPU, "NVIDIA's Xid 144-150 decode: RESET_GPU"},
		{"NVLink5 link down", 149, "NETIR_LINK_EVT Fatal XC0 i0 Link 01 (0x021425c6 0x00000000 0x00000000 0x00000000 0x00000000 0x00000000)", DrainAndReset,
			"NVIDIA's Xid 144-150 decode: NETIR_LINK_EVT, Severity link fatal: the GPU is in the drain-and-reset state (recovery action 4)"},
		{"NVLink5 BER event", 149, "NETIR_BER_EVENT Nonfatal XC0 i0 Link 04 (0x00000226 0x00000002)", None, "NVIDIA's Xid 144-150 decode: IGNORE"},
		{"NVLink5 not decoded", 149, "", ResetGPU, "catalog: WORKFLOW_NVLINK5_ERR"},
		{"key rotation error", 151, "", Reboot, "catalog: RESTART_VM"},
		{"recovery action to reset", 154, "GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset Required)", ResetGPU, "nvml.h: GPU_RESET; DCGM fails"},
		{"recovery action to reboot", 154, "GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot Required)", Reboot, "nvml.h: NODE_REBOOT; DCGM fails"},
		{"recovery action to drain P2P", 154, "GPU recovery action changed from 0x0 (None) to 0x3 (Drain P2P)", Watch, "nvml.h: DRAIN_P2P; DCGM warns"},
		{"recovery action to drain and reset", 154, "GPU recovery action changed from 0x0 (None) to 0x4 (Drain and Reset)", DrainAndReset, "nvml.h: DRAIN_AND_RESET; DCGM fails"},
		{"recovery action to IMEX domain recovery", 154, "GPU recovery action changed from 0x0 (None) to 0x5 (IMEX Domain Recovery)", RecoverFabric, "nvml.h: RECOVER_IMEX_DOMAIN"},
		{"recovery action back to none", 154, "GPU recovery action changed from 0x1 (GPU Reset Required) to 0x0 (None)", None, "nvml.h: NONE"},
		{"recovery action without text", 154, "", None, "catalog: XID_154, about another Xid"},
		{"GPU fatal timeout", 158, "", ResetGPU, "catalog: RESET_GPU"},
		{"CHI non-data error", 159, "", Watch, "catalog: CHECK_UVM"},
		{"no bucket in the catalog", 166, "", Watch, "catalog: no resolution for Xid 166 (CC-mode NVLink traffic)"},
		{"PCIe fatal timeout", 167, "", Reboot, "catalog: PCIE_FATAL_TIMEOUT, no bucket; the GPU off its bus, as Xid 79's RESTART_BM"},
		{"SEC2 micro-controller halt", 169, "", ResetGPU, "catalog: SEC2_HALT_ERROR, no bucket; named as Xid 62, RESET_GPU"},
		{"uncorrectable DRAM error", 171, "", ResetGPU, "catalog: no bucket; details Xid 48, \"reset the GPU\" (WORKFLOW_XID_48)"},
		{"uncorrectable SRAM error", 172, "", ResetGPU, "catalog: no bucket; details Xid 48, \"reset the GPU\" (WORKFLOW_XID_48)"},
		{"copy engine exception", 39, "", Watch, "catalog: RESTART_APP (engine exceptions)"},
		{"not in the catalog", 999, "", Watch, "not in the catalog: shown, never dropped"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := xid.ExplainDetail(tc.code, xid.Detail(tc.code, tc.text))
			if got := XidAction(e); got != tc.want {
				t.Errorf("Xid %d (bucket %q): %v, want %v (%s)", tc.code, e.Bucket, got, tc.want, tc.source)
			}
		})
	}
}

// TestXidSource: the reason names what the action was read from, the
// unbucketed Xids' entries included.
func TestXidSource(t *testing.T) {
	for _, tc := range []struct {
		code int
		text string
		want string
	}{
		{79, "", "NVIDIA's resolution RESTART_BM"},
		{154, "GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot Required)", "recovery action "},
		{167, "", "no resolution in the catalog; off its bus, as Xid 79 (RESTART_BM)"},
		{166, "", "NVIDIA's resolution "},
	} {
		e := xid.ExplainDetail(tc.code, xid.Detail(tc.code, tc.text))
		if got := XidSource(e); len(got) < len(tc.want) || got[:len(tc.want)] != tc.want {
			t.Errorf("Xid %d: %q, want %q...", tc.code, got, tc.want)
		}
	}
}
