package simnvml_test

import (
	"encoding/binary"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// fieldReader reads NVML fields on one device and returns each entry's own
// result and value (decoded by its value type).
type fieldReader struct {
	t *testing.T
	d nvml.Device
}

type fieldAns struct {
	ret nvml.Return
	typ uint32
	v   uint64
}

func (f fieldReader) read(ids []uint32, scope uint32) []fieldAns {
	f.t.Helper()
	vals := make([]nvml.FieldValue, len(ids))
	for i, id := range ids {
		vals[i].FieldId, vals[i].ScopeId = id, scope
		vals[i].Value = [8]byte{0xde, 0xad, 0xbe, 0xef, 0xde, 0xad, 0xbe, 0xef} // must be overwritten
	}
	ok(f.t, f.d.GetFieldValues(vals), "GetFieldValues")
	out := make([]fieldAns, len(ids))
	for i, v := range vals {
		a := fieldAns{ret: nvml.Return(v.NvmlReturn), typ: v.ValueType}
		switch v.ValueType {
		case uint32(nvml.VALUE_TYPE_UNSIGNED_INT):
			a.v = uint64(binary.LittleEndian.Uint32(v.Value[:4]))
		default:
			a.v = binary.LittleEndian.Uint64(v.Value[:])
		}
		if a.ret != nvml.SUCCESS && binary.LittleEndian.Uint64(v.Value[:]) != 0 {
			f.t.Errorf("field %d: refused (%d) but value %x not zeroed", v.FieldId, v.NvmlReturn, v.Value)
		}
		out[i] = a
	}
	return out
}

func (f fieldReader) one(id, scope uint32) fieldAns {
	f.t.Helper()
	return f.read([]uint32{id}, scope)[0]
}

func (f fieldReader) want(name string, id, scope uint32, ret nvml.Return, v uint64) {
	f.t.Helper()
	a := f.one(id, scope)
	if a.ret != ret || (ret == nvml.SUCCESS && a.v != v) {
		f.t.Errorf("%s (field %d scope %d): return %d value %d, want %d value %d", name, id, scope, a.ret, a.v, ret, v)
	}
}

// The GPU classes answer the health fields as the boards do: an RTX PRO 6000
// has ECC, remapping, PCIe counters and no NVLink; a GeForce RTX 5090 refuses
// ECC but answers the remap fields with zeros (as gpud saw on an RTX 4090);
// a B200 has 18 NVLink5 links.
func TestHealthClasses(t *testing.T) {
	t.Parallel()
	simulate(t, opts{scenario: `
gpus 4
gpu 1 class rtx-5090
gpu 2 class b200
gpu 3 class gb200
`}, func(_ clock, l nvml.Interface) {
		pro, g5090, b200, gb200 := fieldReader{t, dev(t, l, 0)}, fieldReader{t, dev(t, l, 1)}, fieldReader{t, dev(t, l, 2)}, fieldReader{t, dev(t, l, 3)}
		got(dev(t, l, 1).GetName()).want(t, "5090 name", "NVIDIA GeForce RTX 5090")
		got(dev(t, l, 2).GetName()).want(t, "B200 name", "NVIDIA B200")
		got(dev(t, l, 2).GetNumFans()).want(t, "B200 fans", 0)
		got(dev(t, l, 1).GetBrand()).want(t, "5090 brand", nvml.BRAND_GEFORCE)

		pro.want("pro ECC mode", nvml.FI_DEV_ECC_CURRENT, 0, nvml.SUCCESS, 1)
		pro.want("pro SBE", nvml.FI_DEV_ECC_SBE_VOL_TOTAL, 0, nvml.SUCCESS, 0)
		pro.want("pro remap pending", nvml.FI_DEV_REMAPPED_PENDING, 0, nvml.SUCCESS, 0)
		pro.want("pro NVLink count", nvml.FI_DEV_NVLINK_LINK_COUNT, 0, nvml.ERROR_NOT_SUPPORTED, 0)
		pro.want("pro retired pages", nvml.FI_DEV_RETIRED_SBE, 0, nvml.ERROR_NOT_SUPPORTED, 0)
		pro.want("pro PCIe correctable", nvml.FI_DEV_PCIE_COUNT_CORRECTABLE_ERRORS, 0, nvml.SUCCESS, 0)
		pro.want("pro HW slowdown ns", nvml.FI_DEV_CLOCKS_EVENT_REASON_HW_THERM_SLOWDOWN, 0, nvml.SUCCESS, 0)
		pro.want("pro recovery action", nvml.FI_DEV_GET_GPU_RECOVERY_ACTION, 0, nvml.SUCCESS, 0)
		pro.want("pro C2C", nvml.FI_DEV_C2C_LINK_COUNT, 0, nvml.ERROR_NOT_SUPPORTED, 0)

		g5090.want("5090 ECC mode", nvml.FI_DEV_ECC_CURRENT, 0, nvml.ERROR_NOT_SUPPORTED, 0)
		g5090.want("5090 SBE", nvml.FI_DEV_ECC_SBE_VOL_TOTAL, 0, nvml.ERROR_NOT_SUPPORTED, 0)
		g5090.want("5090 remap pending (phantom)", nvml.FI_DEV_REMAPPED_PENDING, 0, nvml.SUCCESS, 0)
		g5090.want("5090 NVLink", nvml.FI_DEV_NVLINK_LINK_COUNT, 0, nvml.ERROR_NOT_SUPPORTED, 0)
		g5090.want("5090 PCIe", nvml.FI_DEV_PCIE_COUNT_NAKS_RECEIVED, 0, nvml.SUCCESS, 0)

		b200.want("B200 links", nvml.FI_DEV_NVLINK_LINK_COUNT, 0, nvml.SUCCESS, 18)
		for link := uint32(0); link < 18; link++ {
			b200.want("B200 link state", nvml.FI_DEV_NVLINK_GET_STATE, link, nvml.SUCCESS, nvml.NVLINK_STATE_ACTIVE)
		}
		b200.want("B200 link version", nvml.FI_DEV_NVLINK_GET_VERSION, 17, nvml.SUCCESS, uint64(nvml.NVLINK_VERSION_5_0))
		b200.want("B200 link speed", nvml.FI_DEV_NVLINK_GET_SPEED, 0, nvml.SUCCESS, 53125)
		b200.want("B200 link 18", nvml.FI_DEV_NVLINK_GET_STATE, 18, nvml.ERROR_INVALID_ARGUMENT, 0)
		b200.want("B200 symbol errors", nvml.FI_DEV_NVLINK_COUNT_SYMBOL_ERRORS, 0, nvml.SUCCESS, 0)
		b200.want("B200 C2C", nvml.FI_DEV_C2C_LINK_COUNT, 0, nvml.ERROR_NOT_SUPPORTED, 0)
		gb200.want("GB200 C2C", nvml.FI_DEV_C2C_LINK_COUNT, 0, nvml.SUCCESS, 2)
		gb200.want("GB200 C2C status", nvml.FI_DEV_C2C_LINK_GET_STATUS, 1, nvml.SUCCESS, 1)
		gb200.want("GB200 C2C link 2", nvml.FI_DEV_C2C_LINK_GET_STATUS, 2, nvml.ERROR_INVALID_ARGUMENT, 0)

		// Value types: counters are 64-bit, modes and flags 32-bit.
		a := b200.read([]uint32{nvml.FI_DEV_ECC_DBE_VOL_TOTAL, nvml.FI_DEV_REMAPPED_FAILURE}, 0)
		if a[0].typ != uint32(nvml.VALUE_TYPE_UNSIGNED_LONG_LONG) || a[1].typ != uint32(nvml.VALUE_TYPE_UNSIGNED_INT) {
			t.Errorf("value types %d %d", a[0].typ, a[1].typ)
		}

		// Getters.
		st, r := dev(t, l, 2).GetNvLinkState(5)
		ok(t, r, "B200 GetNvLinkState")
		if st != nvml.FEATURE_ENABLED {
			t.Errorf("link 5 state %d", st)
		}
		wantRet(t, ret(dev(t, l, 0).GetNvLinkState(0)), nvml.ERROR_NOT_SUPPORTED, "pro GetNvLinkState")
		if _, r := dev(t, l, 2).GetNvLinkErrorCounter(0, nvml.NVLINK_ERROR_DL_CRC_FLIT); r != nvml.ERROR_NOT_SUPPORTED {
			t.Errorf("B200 legacy NVLink error counter: %v, want NOT_SUPPORTED", r)
		}
		h, r := dev(t, l, 2).GetRowRemapperHistogram()
		ok(t, r, "B200 histogram")
		if h.Max != 64 {
			t.Errorf("histogram %+v", h)
		}
		wantRet(t, ret(dev(t, l, 1).GetRowRemapperHistogram()), nvml.ERROR_NOT_SUPPORTED, "5090 histogram")
		rs, r := dev(t, l, 2).GetRepairStatus()
		ok(t, r, "B200 repair status")
		if rs.BChannelRepairPending != 0 {
			t.Errorf("repair %+v", rs)
		}
		wantRet(t, ret(dev(t, l, 0).GetRepairStatus()), nvml.ERROR_NOT_SUPPORTED, "pro repair status")
		// The fabric's original call (all R535 has): no health mask.
		fi, r := dev(t, l, 2).GetGpuFabricInfo()
		ok(t, r, "B200 original fabric call")
		if fi.State != nvml.GPU_FABRIC_STATE_COMPLETED || fi.Status != 0 || fi.CliqueId != 32766 || fi.ClusterUuid[15] != 0x5a {
			t.Errorf("fabric info %+v", fi)
		}
		wantRet(t, ret(dev(t, l, 0).GetGpuFabricInfo()), nvml.ERROR_NOT_SUPPORTED, "pro original fabric call")
	})
}

// The scenario verbs: raise, remap, link down/up/flap, fail field by name,
// and the packed BER encoding.
func TestHealthVerbs(t *testing.T) {
	t.Parallel()
	simulate(t, opts{scenario: `
gpus 3
gpu all class b200
gpu 2 class h100
gpu 0 ecc_sbe 5
at 0 gpu 0 raise ecc_sbe 10
at 1 gpu 0 raise ecc_dbe_vol 2
at 0 gpu 0 remap pending
at 0 gpu 0 link 4 down
at 0 gpu 0 link 5 flap 2 over 400ms
at 0 gpu 0 nvlink6_symbol_ber 2e-11
at 0 gpu 0 nvlink_rx_errors 3
gpu 0 fail field pcie_lcrc no_permission
gpu 1 unrepairable 1
gpu 1 sram_threshold 1
gpu 1 ecc_current 0
gpu 2 nvlink2_dl_crc_flit 9
gpu 1 clkev_hw_thermal 1.5
`}, func(c clock, l nvml.Interface) {
		g0, g1, g2 := fieldReader{t, dev(t, l, 0)}, fieldReader{t, dev(t, l, 1)}, fieldReader{t, dev(t, l, 2)}
		g0.want("SBE vol raised", nvml.FI_DEV_ECC_SBE_VOL_TOTAL, 0, nvml.SUCCESS, 15)
		g0.want("SBE agg raised", nvml.FI_DEV_ECC_SBE_AGG_TOTAL, 0, nvml.SUCCESS, 15)
		g0.want("DBE before", nvml.FI_DEV_ECC_DBE_VOL_TOTAL, 0, nvml.SUCCESS, 0)
		g0.want("remap pending", nvml.FI_DEV_REMAPPED_PENDING, 0, nvml.SUCCESS, 1)
		g0.want("link 4 down", nvml.FI_DEV_NVLINK_GET_STATE, 4, nvml.SUCCESS, nvml.NVLINK_STATE_INACTIVE)
		g0.want("link 3 up", nvml.FI_DEV_NVLINK_GET_STATE, 3, nvml.SUCCESS, nvml.NVLINK_STATE_ACTIVE)
		g0.want("symbol BER packed", nvml.FI_DEV_NVLINK_COUNT_SYMBOL_BER, 6, nvml.SUCCESS, 2<<8|11)
		g0.want("rx errors link 0", nvml.FI_DEV_NVLINK_COUNT_RCV_ERRORS, 0, nvml.SUCCESS, 3)
		g0.want("rx errors all links", nvml.FI_DEV_NVLINK_COUNT_RCV_ERRORS, 0xffffffff, nvml.SUCCESS, 54)
		g0.want("injected refusal", nvml.FI_DEV_PCIE_COUNT_LCRC_ERROR, 0, nvml.ERROR_NO_PERMISSION, 0)
		g0.want("other PCIe field", nvml.FI_DEV_PCIE_COUNT_BAD_TLP, 0, nvml.SUCCESS, 0)
		g1.want("ECC off: SBE refused", nvml.FI_DEV_ECC_SBE_VOL_TOTAL, 0, nvml.ERROR_NOT_SUPPORTED, 0)
		g1.want("ECC off: mode", nvml.FI_DEV_ECC_CURRENT, 0, nvml.SUCCESS, 0)
		g1.want("clock-event ns", nvml.FI_DEV_CLOCKS_EVENT_REASON_HW_THERM_SLOWDOWN, 0, nvml.SUCCESS, 1_500_000_000)
		um, r := dev(t, l, 1).GetUnrepairableMemoryFlag_v1()
		ok(t, r, "unrepairable")
		if um.BUnrepairableMemory != 1 {
			t.Errorf("unrepairable %+v", um)
		}
		sr, r := dev(t, l, 1).GetSramEccErrorStatus()
		ok(t, r, "SRAM")
		if sr.BThresholdExceeded != 1 {
			t.Errorf("SRAM %+v", sr)
		}
		g2.want("H100 NVLink5 counters", nvml.FI_DEV_NVLINK_COUNT_SYMBOL_ERRORS, 0, nvml.ERROR_NOT_SUPPORTED, 0)
		g2.want("H100 link version", nvml.FI_DEV_NVLINK_GET_VERSION, 0, nvml.SUCCESS, uint64(nvml.NVLINK_VERSION_4_0))
		got(dev(t, l, 2).GetNvLinkErrorCounter(2, nvml.NVLINK_ERROR_DL_CRC_FLIT)).want(t, "H100 CRC flit", 9)

		// link 5 flaps: down at 0 and 200 ms, up at 100 and 300 ms
		c.sleepUntil(150 * time.Millisecond)
		g0.want("link 5 back up", nvml.FI_DEV_NVLINK_GET_STATE, 5, nvml.SUCCESS, nvml.NVLINK_STATE_ACTIVE)
		c.sleepUntil(1100 * time.Millisecond)
		g0.want("DBE raised", nvml.FI_DEV_ECC_DBE_VOL_TOTAL, 0, nvml.SUCCESS, 2)
		g0.want("flaps recovered", nvml.FI_DEV_NVLINK_COUNT_LINK_RECOVERY_SUCCESSFUL_EVENTS, 5, nvml.SUCCESS, 2)
		g0.want("flaps counted", nvml.FI_DEV_NVLINK_COUNT_LINK_RECOVERY_EVENTS, 5, nvml.SUCCESS, 2)
		g0.want("flaps only on link 5", nvml.FI_DEV_NVLINK_COUNT_LINK_RECOVERY_EVENTS, 4, nvml.SUCCESS, 0)
	})
}

// A bad health statement is one clear line.
func TestHealthScenarioErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, scn, want string }{
		{"class", "gpu 0 class rtx-9999\n", "unknown GPU class"},
		{"link", "at 1 gpu 0 link 99 down\n", "bad NVLink link"},
		{"group", "gpu 0 health ecc|warp\n", "bad health groups"},
		{"raise", "gpu 0 raise nosuch 1\n", "expected: [at T] gpu SEL raise"},
		{"field", "gpu 0 fail field nosuch not_supported\n", "bad field id"},
		{"remap", "gpu 0 remap sideways\n", "expected: [at T] gpu SEL remap"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			out := runChildAs(t, "TestHealthScenarioErrorsChild", opts{scenario: tc.scn})
			if !strings.Contains(out, tc.want) {
				t.Errorf("output lacks %q:\n%s", tc.want, out)
			}
		})
	}
}

// TestHealthScenarioErrorsChild is run by TestHealthScenarioErrors: Init
// fails with UNKNOWN and the parser's line is on stderr.
func TestHealthScenarioErrorsChild(t *testing.T) {
	if !child(t) {
		t.Skip("run by TestHealthScenarioErrors")
	}
	l := newLib(t)
	if r := l.Init(); r != nvml.ERROR_UNKNOWN {
		t.Fatalf("Init %v, want UNKNOWN (scenario error)", r)
	}
}

// The shipped B200 stories play as their comments say.
func TestHealthScenariosShipped(t *testing.T) {
	t.Parallel()
	t.Run("ecc", func(t *testing.T) {
		t.Parallel()
		runChildAs(t, "TestB200ECCStory", opts{scenarioFile: shipped(t, "b200-ecc.scn"), env: []string{"SIMNVML_TIME_OFFSET=33"}})
	})
	t.Run("nvlink", func(t *testing.T) {
		t.Parallel()
		runChildAs(t, "TestB200NVLinkStory", opts{scenarioFile: shipped(t, "b200-nvlink.scn"), env: []string{"SIMNVML_TIME_OFFSET=22"}})
	})
}

func TestB200ECCStory(t *testing.T) {
	if !child(t) {
		t.Skip("run by TestHealthScenariosShipped")
	}
	l := openLib(t)
	g0, g1 := fieldReader{t, dev(t, l, 0)}, fieldReader{t, dev(t, l, 1)}
	g0.want("SBE vol", nvml.FI_DEV_ECC_SBE_VOL_TOTAL, 0, nvml.SUCCESS, 60)
	g0.want("DBE vol", nvml.FI_DEV_ECC_DBE_VOL_TOTAL, 0, nvml.SUCCESS, 1)
	g0.want("remap pending", nvml.FI_DEV_REMAPPED_PENDING, 0, nvml.SUCCESS, 1)
	g0.want("remap cor", nvml.FI_DEV_REMAPPED_COR, 0, nvml.SUCCESS, 1)
	g0.want("remap unc", nvml.FI_DEV_REMAPPED_UNC, 0, nvml.SUCCESS, 1)
	g1.want("healthy SBE", nvml.FI_DEV_ECC_SBE_VOL_TOTAL, 0, nvml.SUCCESS, 0)
	g1.want("healthy remap", nvml.FI_DEV_REMAPPED_PENDING, 0, nvml.SUCCESS, 0)
}

func TestB200NVLinkStory(t *testing.T) {
	if !child(t) {
		t.Skip("run by TestHealthScenariosShipped")
	}
	l := openLib(t)
	g0, g1 := fieldReader{t, dev(t, l, 0)}, fieldReader{t, dev(t, l, 1)}
	g0.want("link 3 down", nvml.FI_DEV_NVLINK_GET_STATE, 3, nvml.SUCCESS, nvml.NVLINK_STATE_INACTIVE)
	g0.want("link 2 up", nvml.FI_DEV_NVLINK_GET_STATE, 2, nvml.SUCCESS, nvml.NVLINK_STATE_ACTIVE)
	g0.want("recoveries ok", nvml.FI_DEV_NVLINK_COUNT_LINK_RECOVERY_SUCCESSFUL_EVENTS, 3, nvml.SUCCESS, 3)
	g0.want("recoveries failed", nvml.FI_DEV_NVLINK_COUNT_LINK_RECOVERY_FAILED_EVENTS, 3, nvml.SUCCESS, 1)
	g0.want("recoveries all", nvml.FI_DEV_NVLINK_COUNT_LINK_RECOVERY_EVENTS, 3, nvml.SUCCESS, 4)
	g0.want("rx errors", nvml.FI_DEV_NVLINK_COUNT_RCV_ERRORS, 3, nvml.SUCCESS, 12)
	g0.want("symbol BER", nvml.FI_DEV_NVLINK_COUNT_SYMBOL_BER, 3, nvml.SUCCESS, 4<<8|11)
	g1.want("healthy link", nvml.FI_DEV_NVLINK_GET_STATE, 3, nvml.SUCCESS, nvml.NVLINK_STATE_ACTIVE)
	g1.want("healthy recoveries", nvml.FI_DEV_NVLINK_COUNT_LINK_RECOVERY_EVENTS, 0xffffffff, nvml.SUCCESS, 0)
}

// TestFabricVersions: fabric_versions says which fabric calls and structs
// the driver knows. A call none of whose versions it knows is not exported
// (dlsym does not find it, and calling it would kill the process, as with
// a real driver that lacks it: it is not called); the versioned call
// answers the v2 and v3 structs by their version field, each with the
// fields it has, and a struct version the driver does not know
// ARGUMENT_VERSION_MISMATCH.
func TestFabricVersions(t *testing.T) {
	if child(t) {
		versions := os.Getenv(envWant)
		knows := func(v string) bool { return versions == "" || slices.Contains(strings.Fields(versions), v) }
		l := openLib(t)
		d := dev(t, l, 0)
		exported := func(fn string, vs ...string) bool {
			err := l.Extensions().LookupSymbol(fn)
			if want := slices.ContainsFunc(vs, knows); (err == nil) != want {
				t.Fatalf("%s exported %v, want %v (it takes %v)", fn, err == nil, want, vs)
			}
			return err == nil
		}
		answer := func(v string) nvml.Return {
			if knows(v) {
				return nvml.SUCCESS
			}
			return nvml.ERROR_ARGUMENT_VERSION_MISMATCH
		}
		if exported("nvmlDeviceGetGpuFabricInfo_v4", "v4") {
			f4, r := d.GetGpuFabricInfo_v4()
			if wantRet(t, r, nvml.SUCCESS, "v4"); f4.NumCliques != 1 || f4.Cliques[0].Id != 32766 || f4.HealthMask != 0x51aa || f4.HealthSummary != 1 || f4.State != 3 {
				t.Errorf("v4 %+v", f4)
			}
		}
		if exported("nvmlDeviceGetGpuFabricInfoV", "v3", "v2") {
			f3, r := d.GetGpuFabricInfoV().V3()
			if wantRet(t, r, answer("v3"), "V with v3"); r == nvml.SUCCESS &&
				(f3.Version != nvml.STRUCT_VERSION(f3, 3) || f3.CliqueId != 32766 || f3.HealthMask != 0x51aa || f3.HealthSummary != 1 || f3.State != 3) {
				t.Errorf("V with v3 %+v", f3)
			}
			f2, r := d.GetGpuFabricInfoV().V2()
			if wantRet(t, r, answer("v2"), "V with v2"); r == nvml.SUCCESS &&
				(f2.Version != nvml.STRUCT_VERSION(f2, 2) || f2.CliqueId != 32766 || f2.HealthMask != 0x51aa || f2.State != 3 || f2.ClusterUuid[0] != 0x5a) {
				t.Errorf("V with v2 %+v", f2)
			}
		}
		if exported("nvmlDeviceGetGpuFabricInfo", "v1") {
			f1, r := d.GetGpuFabricInfo()
			if wantRet(t, r, nvml.SUCCESS, "original"); f1.CliqueId != 32766 || f1.State != 3 {
				t.Errorf("original %+v", f1)
			}
		}
		return
	}
	t.Parallel()
	for _, versions := range []string{"", "v4 v3 v2 v1", "v2 v1", "v1", "v4 v3"} {
		name := strings.ReplaceAll(versions, " ", "_")
		if name == "" {
			name = "default"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			scn := "gpu all class b200\n"
			if versions != "" {
				scn = "fabric_versions " + versions + "\n" + scn
			}
			runChildAs(t, "TestFabricVersions", opts{scenario: scn, env: []string{envWant + "=" + versions}})
		})
	}
}

// TestFabricCallTheDriverLacks: a fabric call the driver does not export
// (fabric_versions) kills its caller, as a symbol a real driver lacks does:
// a regression that calls one without looking it up first dies here too.
func TestFabricCallTheDriverLacks(t *testing.T) {
	if child(t) {
		d := dev(t, openLib(t), 0)
		_, r := d.GetGpuFabricInfoV().V2()
		t.Errorf("the versioned fabric call of an R535 returned %d", r)
		return
	}
	t.Parallel()
	out := runChild(t, opts{scenario: "fabric_versions v1\ngpu all class b200\n", wantFail: true})
	if !strings.Contains(out, "SIGSEGV") {
		t.Errorf("the child did not die of the missing call:\n%s", out)
	}
}
