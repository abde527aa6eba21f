package sampler

import (
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpu-telemetry/gpu-telemetry/reading"
	"github.com/gpu-telemetry/gpu-telemetry/sampler/fakenvml"
)

// The field ids in reading's tables are nvml.h's (go-nvml's constants are
// generated from it).
func TestHealthFieldIDsMatchNVML(t *testing.T) {
	want := map[reading.ID]uint32{
		reading.HECCMode: nvml.FI_DEV_ECC_CURRENT, reading.HECCPending: nvml.FI_DEV_ECC_PENDING,
		reading.HSBEVolatile: nvml.FI_DEV_ECC_SBE_VOL_TOTAL, reading.HDBEVolatile: nvml.FI_DEV_ECC_DBE_VOL_TOTAL,
		reading.HSBEAggregate: nvml.FI_DEV_ECC_SBE_AGG_TOTAL, reading.HDBEAggregate: nvml.FI_DEV_ECC_DBE_AGG_TOTAL,
		reading.HRetiredSBE: nvml.FI_DEV_RETIRED_SBE, reading.HRetiredDBE: nvml.FI_DEV_RETIRED_DBE,
		reading.HRetiredPending:   nvml.FI_DEV_RETIRED_PENDING,
		reading.HRemapCorrectable: nvml.FI_DEV_REMAPPED_COR, reading.HRemapUncorrectable: nvml.FI_DEV_REMAPPED_UNC,
		reading.HRemapPending: nvml.FI_DEV_REMAPPED_PENDING, reading.HRemapFailure: nvml.FI_DEV_REMAPPED_FAILURE,
		reading.HPCIeReplayRollover: nvml.FI_DEV_PCIE_REPLAY_ROLLOVER_COUNTER,
		reading.HPCIeL0Recovery:     nvml.FI_DEV_PCIE_L0_TO_RECOVERY_COUNTER,
		reading.HPCIeCorrectable:    nvml.FI_DEV_PCIE_COUNT_CORRECTABLE_ERRORS,
		reading.HPCIeNAKsReceived:   nvml.FI_DEV_PCIE_COUNT_NAKS_RECEIVED,
		reading.HPCIeReceiverErrors: nvml.FI_DEV_PCIE_COUNT_RECEIVER_ERROR,
		reading.HPCIeBadTLP:         nvml.FI_DEV_PCIE_COUNT_BAD_TLP,
		reading.HPCIeNAKsSent:       nvml.FI_DEV_PCIE_COUNT_NAKS_SENT,
		reading.HPCIeBadDLLP:        nvml.FI_DEV_PCIE_COUNT_BAD_DLLP,
		reading.HPCIeNonFatal:       nvml.FI_DEV_PCIE_COUNT_NON_FATAL_ERROR,
		reading.HPCIeFatal:          nvml.FI_DEV_PCIE_COUNT_FATAL_ERROR,
		reading.HPCIeUnsupportedReq: nvml.FI_DEV_PCIE_COUNT_UNSUPPORTED_REQ,
		reading.HPCIeLCRC:           nvml.FI_DEV_PCIE_COUNT_LCRC_ERROR,
		reading.HClkSWPowerCap:      nvml.FI_DEV_CLOCKS_EVENT_REASON_SW_POWER_CAP,
		reading.HClkSyncBoost:       nvml.FI_DEV_CLOCKS_EVENT_REASON_SYNC_BOOST,
		reading.HClkSWThermal:       nvml.FI_DEV_CLOCKS_EVENT_REASON_SW_THERM_SLOWDOWN,
		reading.HClkHWThermal:       nvml.FI_DEV_CLOCKS_EVENT_REASON_HW_THERM_SLOWDOWN,
		reading.HClkHWPowerBrake:    nvml.FI_DEV_CLOCKS_EVENT_REASON_HW_POWER_BRAKE_SLOWDOWN,
		reading.HClkBoardLimit:      nvml.FI_DEV_PERF_POLICY_BOARD_LIMIT,
		reading.HClkReliability:     nvml.FI_DEV_PERF_POLICY_RELIABILITY,
		reading.HNVLinkCount:        nvml.FI_DEV_NVLINK_LINK_COUNT,
		reading.HC2CCount:           nvml.FI_DEV_C2C_LINK_COUNT,
		reading.HRecoveryAction:     nvml.FI_DEV_GET_GPU_RECOVERY_ACTION,
	}
	for _, id := range reading.HealthIDs {
		d := &reading.Table[id]
		w, ok := want[id]
		if !ok {
			w = 0 // derived
		}
		if d.Field != w {
			t.Errorf("%s: field %d, nvml.h says %d", d.Name, d.Field, w)
		}
	}
	link := map[reading.LinkCounterID]uint32{
		reading.LMalformed: nvml.FI_DEV_NVLINK_COUNT_MALFORMED_PACKET_ERRORS, reading.LBufferOverrun: nvml.FI_DEV_NVLINK_COUNT_BUFFER_OVERRUN_ERRORS,
		reading.LRxErrors: nvml.FI_DEV_NVLINK_COUNT_RCV_ERRORS, reading.LLocalIntegrity: nvml.FI_DEV_NVLINK_COUNT_LOCAL_LINK_INTEGRITY_ERRORS,
		reading.LTxDiscards: nvml.FI_DEV_NVLINK_COUNT_XMIT_DISCARDS, reading.LEffectiveErrors: nvml.FI_DEV_NVLINK_COUNT_EFFECTIVE_ERRORS,
		reading.LRecoveryOK: nvml.FI_DEV_NVLINK_COUNT_LINK_RECOVERY_SUCCESSFUL_EVENTS, reading.LRecoveryFailed: nvml.FI_DEV_NVLINK_COUNT_LINK_RECOVERY_FAILED_EVENTS,
		reading.LSymbolErrors: nvml.FI_DEV_NVLINK_COUNT_SYMBOL_ERRORS, reading.LEffectiveBER: nvml.FI_DEV_NVLINK_COUNT_EFFECTIVE_BER,
		reading.LSymbolBER: nvml.FI_DEV_NVLINK_COUNT_SYMBOL_BER,
	}
	for id, d := range reading.LinkDefs {
		if d.Field != link[reading.LinkCounterID(id)] {
			t.Errorf("link %s: field %d, nvml.h says %d", d.Name, d.Field, link[reading.LinkCounterID(id)])
		}
	}
	for _, c := range []struct{ got, want uint32 }{
		{reading.FieldLinkSpeed, nvml.FI_DEV_NVLINK_GET_SPEED}, {reading.FieldLinkState, nvml.FI_DEV_NVLINK_GET_STATE},
		{reading.FieldLinkVersion, nvml.FI_DEV_NVLINK_GET_VERSION}, {reading.FieldC2CStatus, nvml.FI_DEV_C2C_LINK_GET_STATUS},
		{reading.FieldC2CCRC, nvml.FI_DEV_C2C_LINK_ERROR_INTR}, {reading.FieldC2CReplay, nvml.FI_DEV_C2C_LINK_ERROR_REPLAY},
		{reading.FieldC2CReplayB2, nvml.FI_DEV_C2C_LINK_ERROR_REPLAY_B2B}, {reading.LinkStateActive, nvml.NVLINK_STATE_ACTIVE},
	} {
		if c.got != c.want {
			t.Errorf("field %d, nvml.h says %d", c.got, c.want)
		}
	}
}

func healthDev() *fakenvml.Dev {
	d := fakenvml.NewDev()
	d.Fields = map[uint32]uint64{
		nvml.FI_DEV_ECC_CURRENT: 1, nvml.FI_DEV_ECC_SBE_VOL_TOTAL: 7, nvml.FI_DEV_ECC_DBE_VOL_TOTAL: 0,
		nvml.FI_DEV_REMAPPED_PENDING: 1, nvml.FI_DEV_PCIE_COUNT_BAD_TLP: 3,
		nvml.FI_DEV_CLOCKS_EVENT_REASON_HW_THERM_SLOWDOWN: 2_500_000_000,
	}
	return d
}

func TestHealthPerFieldReturns(t *testing.T) {
	d := healthDev()
	d.FieldRet[nvml.FI_DEV_PCIE_COUNT_BAD_TLP] = nvml.ERROR_NO_PERMISSION
	h := openFakeConfig(t, &fakenvml.Lib{Devs: []*fakenvml.Dev{d}}, Config{Reprobe: time.Hour, SlowEvery: 1, FieldWait: time.Millisecond})
	var s reading.Sample
	h.GPUs[0].Sample(&s)
	checks := []struct {
		id   reading.ID
		want reading.Opt[uint64]
	}{
		{reading.HECCMode, reading.Some[uint64](1)},
		{reading.HSBEVolatile, reading.Some[uint64](7)},
		{reading.HDBEVolatile, reading.Some[uint64](0)}, // a real zero
		{reading.HRemapPending, reading.Some[uint64](1)},
		{reading.HPCIeBadTLP, reading.Opt[uint64]{}},   // refused: absent, not 0
		{reading.HPCIeFatal, reading.Opt[uint64]{}},    // not supported
		{reading.HNVLinkCount, reading.Opt[uint64]{}},  // a PCIe board
		{reading.HNVLinkErrors, reading.Opt[uint64]{}}, // no links, no sum
		{reading.HClkHWThermal, reading.Some[uint64](2_500_000_000)},
	}
	for _, c := range checks {
		if s.Values[c.id] != c.want {
			t.Errorf("%s = %+v, want %+v", reading.Table[c.id].Name, s.Values[c.id], c.want)
		}
	}
	// One call for the batch, one for the health counters; no NVLink call
	// on a GPU without links.
	if n := d.Count("GetFieldValues"); n != 2 {
		t.Errorf("field calls %d, want 2", n)
	}
	// The refused fields are not asked again (capability cache); the rest is.
	d.FieldRet = map[uint32]nvml.Return{}
	d.Fields[nvml.FI_DEV_ECC_SBE_VOL_TOTAL] = 9
	h.GPUs[0].Sample(&s)
	if v := s.Values[reading.HPCIeBadTLP]; v.OK {
		t.Errorf("refused field asked again before Reprobe: %+v", v)
	}
	if v := s.Values[reading.HSBEVolatile]; v != reading.Some[uint64](9) {
		t.Errorf("SBE after change %+v", v)
	}
	// A new handle (the driver reloaded) asks everything again.
	h.GPUs[0].resetHealth()
	h.GPUs[0].Sample(&s)
	if v := s.Values[reading.HPCIeBadTLP]; v != reading.Some[uint64](3) {
		t.Errorf("after reset: %+v", v)
	}
}

// Without ECC the remap fields' SUCCESS and zeros prove nothing (a GeForce
// board answers them): absent.
func TestHealthNoECCMeansNoRemap(t *testing.T) {
	d := fakenvml.NewDev()
	d.Fields = map[uint32]uint64{nvml.FI_DEV_REMAPPED_PENDING: 0, nvml.FI_DEV_REMAPPED_FAILURE: 0, nvml.FI_DEV_PCIE_COUNT_BAD_TLP: 0}
	h := openFake(t, &fakenvml.Lib{Devs: []*fakenvml.Dev{d}})
	var s reading.Sample
	h.GPUs[0].Sample(&s)
	if s.Values[reading.HRemapPending].OK || s.Values[reading.HRemapFailure].OK {
		t.Errorf("remap fields kept without ECC: %+v %+v", s.Values[reading.HRemapPending], s.Values[reading.HRemapFailure])
	}
	if !s.Values[reading.HPCIeBadTLP].OK {
		t.Errorf("PCIe counter dropped")
	}
	g := h.GPUs[0].HealthGroups()
	if g[reading.GroupECC] || g[reading.GroupRemap] || !g[reading.GroupPCIe] {
		t.Errorf("groups %v", g)
	}
}

func TestHealthNVLinkOwnCall(t *testing.T) {
	d := healthDev()
	d.Fields[nvml.FI_DEV_NVLINK_LINK_COUNT] = 3
	d.LinkFields = map[[2]uint32]uint64{}
	for l := uint32(0); l < 3; l++ {
		d.LinkFields[[2]uint32{nvml.FI_DEV_NVLINK_GET_STATE, l}] = 1
		d.LinkFields[[2]uint32{nvml.FI_DEV_NVLINK_COUNT_RCV_ERRORS, l}] = uint64(l)
		d.LinkFields[[2]uint32{nvml.FI_DEV_NVLINK_COUNT_LINK_RECOVERY_FAILED_EVENTS, l}] = 0
	}
	d.LinkFields[[2]uint32{nvml.FI_DEV_NVLINK_GET_STATE, 1}] = 0 // down
	d.LinkFields[[2]uint32{nvml.FI_DEV_NVLINK_COUNT_SYMBOL_BER, 2}] = 4<<8 | 11
	h := openFake(t, &fakenvml.Lib{Devs: []*fakenvml.Dev{d}})
	var s reading.Sample
	h.GPUs[0].Sample(&s)
	if n := d.Count("GetFieldValues"); n != 3 {
		t.Errorf("field calls %d, want 3 (batch, health, NVLink)", n)
	}
	want := map[reading.ID]reading.Opt[uint64]{
		reading.HNVLinkCount: reading.Some[uint64](3), reading.HNVLinkUp: reading.Some[uint64](2),
		reading.HNVLinkErrors: reading.Some[uint64](3), reading.HNVLinkRecoveryFailed: reading.Some[uint64](0),
		reading.HNVLinkRecovery: {},
	}
	for id, w := range want {
		if s.Values[id] != w {
			t.Errorf("%s = %+v, want %+v", reading.Table[id].Name, s.Values[id], w)
		}
	}
	links := h.GPUs[0].NVLinks()
	if links.N != 3 || links.L[1].Up() || !links.L[0].Up() {
		t.Fatalf("links %+v", links)
	}
	if ber := reading.DecodeBER(links.L[2].C[reading.LSymbolBER].V); ber < 3.9e-11 || ber > 4.1e-11 {
		t.Errorf("BER %g", ber)
	}
}

func TestHealthFieldLockBusyKeepsReading(t *testing.T) {
	d := healthDev()
	h := openFake(t, &fakenvml.Lib{Devs: []*fakenvml.Dev{d}})
	var s reading.Sample
	h.GPUs[0].Sample(&s)
	release := holdFieldLock(t) // another GPU is stuck inside GetFieldValues
	d.Fields[nvml.FI_DEV_ECC_SBE_VOL_TOTAL] = 99
	for range 3 {
		h.GPUs[0].Sample(&s)
	}
	release()
	if v := s.Values[reading.HSBEVolatile]; v != reading.Some[uint64](7) {
		t.Errorf("kept reading %+v, want the last one (7)", v)
	}
	if h.GPUs[0].reg.Load(healthSkips) == 0 {
		t.Errorf("skips not counted")
	}
}

// A health field call waiting for the field lock is not in flight: only a
// call inside the driver is, as the batch's field call.
func TestHealthFieldCallWaitingForTheLockIsNotInFlight(t *testing.T) {
	d := healthDev()
	h := openFakeConfig(t, &fakenvml.Lib{Devs: []*fakenvml.Dev{d}}, Config{Reprobe: time.Hour, SlowEvery: 1, FieldWait: 200 * time.Millisecond})
	g := h.GPUs[0]
	var s reading.Sample
	g.Sample(&s)
	release := holdFieldLock(t)
	defer release()
	done := make(chan struct{})
	go func() {
		defer close(done)
		var s reading.Sample
		g.Sample(&s) // the batch's field call, then the health counters', each waits FieldWait
	}()
	polls := 0
	for {
		select {
		case <-done:
			if polls < 10 {
				t.Fatalf("only %d polls during the sample", polls)
			}
			if g.reg.Load(healthSkips) == 0 {
				t.Errorf("the health read did not wait for the lock (health_skips 0)")
			}
			return
		default:
		}
		if fn, _, ok := g.InFlight(); ok && (fn == FnHealthFields || fn == FnFieldValues) {
			t.Fatalf("%s in flight while it waits for the field lock", fn)
		}
		polls++
		time.Sleep(time.Millisecond)
	}
}

// Once it has the lock, the health field call is in flight, named: a GPU
// stuck in it shows where.
func TestHealthFieldCallInTheDriverIsInFlight(t *testing.T) {
	d := healthDev()
	h := openFake(t, &fakenvml.Lib{Devs: []*fakenvml.Dev{d}})
	g := h.GPUs[0]
	entered := make(chan string, 1)
	release := d.Block("GetFieldValues", entered)
	done := make(chan struct{})
	go func() {
		defer close(done)
		g.fieldCall(FnHealthFields, []nvml.FieldValue{{FieldId: nvml.FI_DEV_ECC_CURRENT}})
	}()
	<-entered
	fn, _, ok := g.InFlight()
	release()
	<-done
	if !ok || fn != FnHealthFields {
		t.Errorf("in flight %v (%v), want %s", fn, ok, FnHealthFields)
	}
	if fn, _, ok := g.InFlight(); ok {
		t.Errorf("%s still in flight after the call", fn)
	}
}

// The health getters (SRAM ECC, repair status, unrepairable memory) are read
// by their calls on the slow tier and carried between slow samples; a GPU
// without them leaves them absent, and without ECC the SRAM ones prove
// nothing either.
func TestHealthGetters(t *testing.T) {
	d := healthDev()
	d.SramEcc = &nvml.EccSramErrorStatus{VolatileCor: 5, VolatileUncSecDed: 2, VolatileUncParity: 1, BThresholdExceeded: 1}
	d.Repair = &nvml.RepairStatus{BTpcRepairPending: 1}
	d.Unrepairable = &nvml.UnrepairableMemoryStatus_v1{BUnrepairableMemory: 1}
	h := openFakeConfig(t, &fakenvml.Lib{Devs: []*fakenvml.Dev{d}}, Config{Reprobe: time.Hour, SlowEvery: 3, FieldWait: time.Millisecond})
	want := map[reading.ID]reading.Opt[uint64]{
		reading.HSRAMCorrectable: reading.Some[uint64](5), reading.HSRAMUncSecDed: reading.Some[uint64](2),
		reading.HSRAMUncParity: reading.Some[uint64](1), reading.HSRAMThreshold: reading.Some[uint64](1),
		reading.HChannelRepairPending: reading.Some[uint64](0), reading.HTPCRepairPending: reading.Some[uint64](1),
		reading.HMemoryUnrepairable: reading.Some[uint64](1),
	}
	for n := range 3 { // a slow sample, then two that carry it
		var s reading.Sample
		h.GPUs[0].Sample(&s)
		for id, w := range want {
			if s.Values[id] != w {
				t.Errorf("sample %d: %s = %+v, want %+v", n, reading.Table[id].Name, s.Values[id], w)
			}
		}
	}
	if n := d.Count("GetRepairStatus"); n != 1 {
		t.Errorf("GetRepairStatus called %d times in 3 samples, want 1 (slow tier)", n)
	}
	if !h.GPUs[0].HealthGroups()[reading.GroupRepair] {
		t.Errorf("memory repair group not recorded")
	}

	plain := fakenvml.NewDev() // no getters, no ECC
	plain.SramEcc = &nvml.EccSramErrorStatus{VolatileCor: 5}
	h = openFake(t, &fakenvml.Lib{Devs: []*fakenvml.Dev{plain}})
	var s reading.Sample
	h.GPUs[0].Sample(&s)
	for id := range want {
		if s.Values[id].OK {
			t.Errorf("GPU without ECC or the getters: %s = %+v, want absent", reading.Table[id].Name, s.Values[id])
		}
	}
}

// TestECCModeHiccupKeepsTheCounters: the ECC mode decides whether the ECC,
// remap and SRAM counters can be had, and it changes only with a GPU
// reset. A slow read in which the mode field alone fails (a transient
// error, not a refusal) keeps the counters the GPU answered in it instead
// of blanking them, the SRAM threshold flag with them.
func TestECCModeHiccupKeepsTheCounters(t *testing.T) {
	d := healthDev()
	d.SramEcc = &nvml.EccSramErrorStatus{VolatileUncSecDed: 2, BThresholdExceeded: 1}
	h := openFakeConfig(t, &fakenvml.Lib{Devs: []*fakenvml.Dev{d}}, Config{Reprobe: time.Hour, SlowEvery: 1, FieldWait: time.Millisecond})
	var s reading.Sample
	h.GPUs[0].Sample(&s) // the mode answers 1
	d.FieldRet[nvml.FI_DEV_ECC_CURRENT] = nvml.ERROR_UNKNOWN
	h.GPUs[0].Sample(&s)
	if s.Values[reading.HECCMode].OK {
		t.Fatalf("ECC mode %+v in the read where it failed, want absent", s.Values[reading.HECCMode])
	}
	for id, want := range map[reading.ID]reading.Opt[uint64]{
		reading.HSRAMUncSecDed: reading.Some[uint64](2), reading.HSRAMThreshold: reading.Some[uint64](1),
		reading.HSBEVolatile: reading.Some[uint64](7),
	} {
		if s.Values[id] != want {
			t.Errorf("after an ECC mode hiccup: %s = %+v, want %+v", reading.Table[id].Name, s.Values[id], want)
		}
	}
}

// TestFabricInfo: the fabric's state, status, health mask, summary, clique
// and cluster UUID come from nvmlDeviceGetGpuFabricInfo_v4 on the slow tier
// (its one-byte state and summary read as bytes, the clique from its first
// entry, the UUID in two 8-byte halves), from the versioned v3 call on a
// driver without v4 (its cliqueId), from the original call on a driver with
// neither (R535: all but the health mask and summary, which stay absent),
// and not at all on a driver with none of the three or a GPU of no fabric.
func TestFabricInfo(t *testing.T) {
	fabric := &nvml.GpuFabricInfo_v4{Status: 0, State: 3, HealthMask: 0x5199, HealthSummary: 2, NumCliques: 2}
	fabric.Cliques[0].Id = 7                                            // unicast pointer: v3's cliqueId
	fabric.Cliques[1] = nvml.GpuFabricClique_v1{Type: 1, Id: 0xfffffff} // multicast pointer
	for i := range fabric.ClusterUuid {
		fabric.ClusterUuid[i] = byte(0x10 + i)
	}
	const uuid = "10111213-1415-1617-1819-1a1b1c1d1e1f"
	want := map[reading.ID]reading.Opt[uint64]{
		reading.HFabricState: reading.Some[uint64](3), reading.HFabricStatus: reading.Some[uint64](0),
		reading.HFabricHealth: reading.Some[uint64](0x5199), reading.HFabricSummary: reading.Some[uint64](2),
		reading.HFabricClique: reading.Some[uint64](7),
	}
	// A fabric that dropped its cliques keeps its stale first entry; one
	// with only a multicast clique has no unicast id: fabric_clique absent
	// from v4 (v3's cliqueId is what the driver says).
	noCliques, multicast := *fabric, *fabric
	noCliques.NumCliques = 0
	multicast.NumCliques, multicast.Cliques[0] = 1, nvml.GpuFabricClique_v1{Type: 1, Id: 7}
	noClique := maps.Clone(want)
	noClique[reading.HFabricClique] = reading.Opt[uint64]{}
	v1 := maps.Clone(want)
	v1[reading.HFabricHealth], v1[reading.HFabricSummary] = reading.Opt[uint64]{}, reading.Opt[uint64]{}
	none := map[reading.ID]reading.Opt[uint64]{reading.HFabricState: {}, reading.HFabricStatus: {}, reading.HFabricHealth: {}, reading.HFabricSummary: {},
		reading.HFabricClique: {}, reading.FabricCluster0: {}, reading.FabricCluster8: {}}
	for _, tc := range []struct {
		name    string
		fabric  *nvml.GpuFabricInfo_v4
		missing []string
		want    map[reading.ID]reading.Opt[uint64]
		called  string
	}{
		{"v4", fabric, nil, want, "GetGpuFabricInfo_v4"},
		{"v4: no cliques", &noCliques, nil, noClique, "GetGpuFabricInfo_v4"},
		{"v4: no unicast clique", &multicast, nil, noClique, "GetGpuFabricInfo_v4"},
		{"older driver: v3", fabric, []string{"nvmlDeviceGetGpuFabricInfo_v4"}, want, "GetGpuFabricInfoV"},
		{"R535: the original call", fabric, []string{"nvmlDeviceGetGpuFabricInfo_v4", "nvmlDeviceGetGpuFabricInfoV"}, v1, "GetGpuFabricInfo"},
		{"old driver: none", fabric, []string{"nvmlDeviceGetGpuFabricInfo_v4", "nvmlDeviceGetGpuFabricInfoV", "nvmlDeviceGetGpuFabricInfo"}, none, ""},
		{"no fabric", nil, nil, none, "GetGpuFabricInfo_v4"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := healthDev()
			d.Fabric = tc.fabric
			missing := map[string]bool{}
			for _, m := range tc.missing {
				missing[m] = true
			}
			h := openFakeConfig(t, &fakenvml.Lib{Devs: []*fakenvml.Dev{d}, Missing: missing}, Config{Reprobe: time.Hour, SlowEvery: 3, FieldWait: time.Millisecond})
			for n := range 3 { // a slow sample, then two that carry it
				var s reading.Sample
				h.GPUs[0].Sample(&s)
				for id, w := range tc.want {
					if s.Values[id] != w {
						t.Errorf("sample %d: %s = %+v, want %+v", n, reading.Table[id].Name, s.Values[id], w)
					}
				}
				if u, ok := reading.FabricClusterUUID(&s.Values); ok != tc.want[reading.HFabricState].OK || ok && u != uuid {
					t.Errorf("sample %d: cluster UUID %q, %v; want %q", n, u, ok, uuid)
				}
			}
			if tc.called != "" && d.Count(tc.called) != 1 {
				t.Errorf("%s called %d times in 3 samples, want 1 (slow tier)", tc.called, d.Count(tc.called))
			}
			// A function the driver lacks is never called (the fake
			// panics where a real process dies, after counting it).
			for _, m := range tc.missing {
				if n := d.Count(strings.TrimPrefix(m, "nvmlDevice")); n != 0 {
					t.Errorf("%s, which the driver lacks, called %d times", m, n)
				}
			}
			if got := h.GPUs[0].HealthGroups()[reading.GroupFabric]; got != tc.want[reading.HFabricState].OK {
				t.Errorf("fabric group recorded %v", got)
			}
			// The probe times the fabric call a sample makes, not an
			// older one that a newer present stands in for.
			var probed []string
			for _, pc := range probeCalls(h.GPUs) {
				if strings.HasPrefix(pc.name, "nvmlDeviceGetGpuFabricInfo") {
					probed = append(probed, strings.TrimPrefix(pc.name, "nvmlDevice"))
				}
			}
			if want := []string{tc.called}; tc.called != "" && !slices.Equal(probed, want) || tc.called == "" && probed != nil {
				t.Errorf("the probe times %q, want %q", probed, tc.called)
			}
		})
	}
}

// TestHealthReadFindsTheGPULost: the sample's batch answered, then an entry
// of the health counters' call says GPU_IS_LOST: the sample is lost, as one
// whose batch found it lost, with no reading and no call after it.
func TestHealthReadFindsTheGPULost(t *testing.T) {
	d := healthDev()
	h := openFake(t, &fakenvml.Lib{Devs: []*fakenvml.Dev{d}})
	g := h.GPUs[0]
	var s reading.Sample
	g.Sample(&s)
	if s.Status != reading.StatusAnswered || !s.Values[reading.HSBEVolatile].OK {
		t.Fatalf("first sample: status %v, SBE %+v", s.Status, s.Values[reading.HSBEVolatile])
	}
	d.FieldRet[nvml.FI_DEV_ECC_SBE_VOL_TOTAL] = nvml.ERROR_GPU_IS_LOST // a health counter, not in the batch
	before := d.Calls()
	g.Sample(&s)
	if s.Status != reading.StatusLost || s.Err != "GPU is lost" {
		t.Errorf("status %v (%q), want lost", s.Status, s.Err)
	}
	if s.Values[reading.TempC].OK || s.Values[reading.HECCMode].OK || s.Fans[0].Speed.OK || s.Fans[0].Policy.OK {
		t.Errorf("lost sample carries readings")
	}
	// The batch and the health call; nothing after the health call.
	if n := d.Calls()["GetFieldValues"] - before["GetFieldValues"]; n != 2 {
		t.Errorf("%d field calls, want 2 (the batch, the health counters)", n)
	}
	if n := d.Calls()["GetFanControlPolicy_v2"] - before["GetFanControlPolicy_v2"]; n != 0 {
		t.Errorf("fan policies read after the GPU was found lost")
	}
}

// TestFabricWhereEveryVersionedStructIsRefused: a driver that has the
// versioned fabric call but knows neither struct it is asked with (v3,
// then v2: NVML_ERROR_ARGUMENT_VERSION_MISMATCH), and not v4, gives the
// fabric's state from the original call in every slow sample: in the
// first, right after the versioned call is refused (raw.older), and after
// the re-probe time, since a struct version the driver does not know is
// not asked again. (The first slow sample had no fabric readings, and
// re-probing left them absent once each re-probe.) An R550, which answers
// the v2 struct, is TestFabricHealthMaskOnAnR550Driver.
func TestFabricWhereEveryVersionedStructIsRefused(t *testing.T) {
	d := healthDev()
	d.Fabric = &nvml.GpuFabricInfo_v4{State: 3}
	d.Set("GetGpuFabricInfoV", nvml.ERROR_ARGUMENT_VERSION_MISMATCH)
	h := openFakeConfig(t, &fakenvml.Lib{Devs: []*fakenvml.Dev{d}, Missing: map[string]bool{"nvmlDeviceGetGpuFabricInfo_v4": true}},
		Config{Reprobe: time.Hour, SlowEvery: 1, FieldWait: time.Millisecond})
	g := h.GPUs[0]
	sampleAcrossReprobe(g, 6, 3, func(n int, s *reading.Sample) {
		if v, ok := s.Values[reading.HFabricState].Get(); !ok || v != 3 {
			t.Errorf("sample %d: fabric_state %+v, want 3 from nvmlDeviceGetGpuFabricInfo", n, s.Values[reading.HFabricState])
		}
	})
	if n := d.Count("GetGpuFabricInfoV"); n != 2 {
		t.Errorf("the versioned call made %d times, want 2 (the v3 and v2 structs once each: the driver knows neither)", n)
	}
}

// TestFabricHealthMaskOnAnR550Driver: an R550's versioned fabric call
// refuses the v3 struct but answers the v2 one (its nvml.h's
// nvmlGpuFabricInfoV_t), which has the health mask but no summary: the
// mask comes from it in every slow sample, the first included, and the
// original call, which lacks the mask, is not made. (The mask was absent:
// the v2 struct was never asked for.)
func TestFabricHealthMaskOnAnR550Driver(t *testing.T) {
	d := healthDev()
	d.Fabric = &nvml.GpuFabricInfo_v4{State: 3, HealthMask: 0x5199, HealthSummary: 2, NumCliques: 1}
	d.Fabric.Cliques[0].Id = 7
	d.FabricV2Only = true
	h := openFakeConfig(t, &fakenvml.Lib{Devs: []*fakenvml.Dev{d}, Missing: map[string]bool{"nvmlDeviceGetGpuFabricInfo_v4": true}},
		Config{Reprobe: time.Hour, SlowEvery: 1, FieldWait: time.Millisecond})
	g := h.GPUs[0]
	want := map[reading.ID]reading.Opt[uint64]{
		reading.HFabricState: reading.Some[uint64](3), reading.HFabricHealth: reading.Some[uint64](0x5199),
		reading.HFabricClique: reading.Some[uint64](7), reading.HFabricSummary: {},
	}
	sampleAcrossReprobe(g, 4, 2, func(n int, s *reading.Sample) {
		for id, w := range want {
			if s.Values[id] != w {
				t.Errorf("sample %d: %s = %+v, want %+v", n, reading.Table[id].Name, s.Values[id], w)
			}
		}
	})
	// v3 once (refused for good), then v2 in each of the 4 samples.
	if n := d.Count("GetGpuFabricInfoV"); n != 5 {
		t.Errorf("the versioned call made %d times in 4 samples, want 5", n)
	}
	if n := d.Count("GetGpuFabricInfo"); n != 0 {
		t.Errorf("the original call made %d times where the v2 struct answers", n)
	}
}

// TestOlderCallAfterNotSupported: a GPU that does not support a reading's
// newer call but answers the older driver's (clock event reasons refused,
// throttle reasons answered) has the reading in every sample: in the
// first and in each re-probe's, the older call is made right after the
// refusal (raw.older), and in between the refused call stays off. A GPU
// of no fabric, where every fabric call is not supported, makes each of
// them once until the re-probe, not once per sample. (Each re-probe's
// sample had no throttle reasons.)
func TestOlderCallAfterNotSupported(t *testing.T) {
	d := healthDev()
	d.Set("GetCurrentClocksEventReasons", nvml.ERROR_NOT_SUPPORTED)
	d.Getters[fakenvml.Getter{Fn: "GetCurrentClocksThrottleReasons"}] = uint64(8)
	h := openFakeConfig(t, &fakenvml.Lib{Devs: []*fakenvml.Dev{d}}, Config{Reprobe: time.Hour, SlowEvery: 1, FieldWait: time.Millisecond})
	g := h.GPUs[0]
	sampleAcrossReprobe(g, 6, 3, func(n int, s *reading.Sample) {
		if v, ok := s.Values[reading.Throttle].Get(); !ok || v != 8 {
			t.Errorf("sample %d: throttle %+v, want 8 from nvmlDeviceGetCurrentClocksThrottleReasons", n, s.Values[reading.Throttle])
		}
	})
	if n := d.Count("GetCurrentClocksEventReasons"); n != 2 {
		t.Errorf("the refused call made %d times in 6 samples, want 2 (the first, the re-probe)", n)
	}
	if n := d.Count("GetCurrentClocksThrottleReasons"); n != 6 {
		t.Errorf("the older call made %d times in 6 samples, want 6", n)
	}
	// Once before the re-probe, once after (the versioned call with the
	// v3 and the v2 struct).
	for fn, want := range map[string]int{"GetGpuFabricInfo_v4": 2, "GetGpuFabricInfoV": 4, "GetGpuFabricInfo": 2} {
		if n := d.Count(fn); n != want {
			t.Errorf("%s made %d times on a GPU of no fabric, want %d", fn, n, want)
		}
	}
}

// sampleAcrossReprobe takes samples of g, moving its clock past the
// re-probe (Config.Reprobe: an hour) before sample at, and hands each to
// check.
func sampleAcrossReprobe(g *GPU, samples, at int, check func(n int, s *reading.Sample)) {
	for n := range samples {
		if n == at {
			g.base = g.base.Add(-2 * time.Hour)
		}
		var s reading.Sample
		g.Sample(&s)
		check(n, &s)
	}
}
