package xid

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/gpu-telemetry/gpu-telemetry/internal/testutil"
)

// hopperBlackwell is every code NVIDIA's catalog (analyzing-xid-catalog.html,
// read 2026-11-30) marks YES under "Applies to H100", "Applies to B100" or
// "Applies to GB200", transcribed from the catalog by hand. Each must have an
// entry. Codes marked NO for all three (unused, A100-only, DLA) are not here.
var hopperBlackwell = []int{
	8, 11, 13, 14, 25, 31, 32, 37, 38, 39, 40, 41, 43, 44, 45, 46, 48, 54, 60, 62, 63, 64,
	66, 67, 68, 69, 70, 71, 72, 74, 75, 76, 77, 78, 79, 80, 82, 83, 84, 85, 86, 88, 89,
	92, 94, 95, 96, 97, 98, 99, 100, 101, 102, 103, 104, 105, 106, 107, 108, 109, 110,
	119, 120, 121, 126, 127, 128, 129, 130, 131, 132, 133, 134, 135, 136, 137, 139, 140,
	141, 142, 143, 144, 145, 146, 147, 148, 149, 150, 151, 154, 155, 156, 157, 158, 159,
	160, 161, 162, 163, 164, 165, 166, 167, 168, 169, 170, 171, 172,
}

// noBucket are the codes for which the catalog gives no immediate action.
var noBucket = []int{162, 163, 164, 165, 166, 167, 168, 169, 170, 171, 172}

// TestEveryHopperBlackwellXidHasAnEntry is the catalog's table test: every
// Xid NVIDIA lists for Hopper or Blackwell has an entry, which
// TestEveryEntryIsComplete holds to the standard.
func TestEveryHopperBlackwellXidHasAnEntry(t *testing.T) {
	for _, code := range hopperBlackwell {
		if _, ok := Lookup(code); !ok {
			t.Errorf("Lookup(%d): not in catalog", code)
		}
	}
}

// TestEveryEntryIsComplete: every entry, the Hopper/Blackwell ones and the
// others (Xid 61, 74, 93), has its code, mnemonic, name, description, action
// and class, and a bucket exactly where NVIDIA gives one.
func TestEveryEntryIsComplete(t *testing.T) {
	for _, code := range Codes() {
		t.Run(fmt.Sprintf("xid%d", code), func(t *testing.T) {
			in, _ := Lookup(code)
			if in.Code != code {
				t.Errorf("Code = %d, want %d", in.Code, code)
			}
			for field, v := range map[string]string{
				"Mnemonic": in.Mnemonic, "Name": in.Name, "Description": in.Description, "Action": in.Action,
			} {
				if strings.TrimSpace(v) == "" {
					t.Errorf("%s is empty", field)
				}
			}
			if in.Class == ClassUnknown || in.Class.String() == "unknown" {
				t.Errorf("Class = %v, want a known class", in.Class)
			}
			if slices.Contains(noBucket, code) {
				if in.Bucket != "" {
					t.Errorf("Bucket = %q; NVIDIA gives none, so none may be invented", in.Bucket)
				}
				if !strings.Contains(in.Description, "no resolution bucket") {
					t.Errorf("Description %q does not say that NVIDIA gives no bucket", in.Description)
				}
			} else if in.Bucket == "" {
				t.Errorf("Bucket is empty; NVIDIA gives one")
			}
		})
	}
}

func TestLookupMeanings(t *testing.T) {
	tests := []struct {
		name     string
		code     int
		nameHas  string // case-insensitive substring of Name
		mnemonic string
		bucket   string
		class    Class
	}{
		{"graphics exception is the application", 13, "graphics engine exception", "ROBUST_CHANNEL_GR_EXCEPTION", "RESTART_APP", ClassApplication},
		{"page fault", 31, "page fault", "ROBUST_CHANNEL_FIFO_ERROR_MMU_ERR_FLT", "RESTART_APP", ClassApplication},
		{"preemptive cleanup follows other errors", 45, "preemptive cleanup, due to previous errors", "ROBUST_CHANNEL_PREEMPTIVE_REMOVAL", "WORKFLOW_XID_45", ClassInformational},
		{"double bit ECC", 48, "double bit ecc", "ROBUST_CHANNEL_GPU_ECC_DBE", "WORKFLOW_XID_48", ClassMemory},
		{"micro-controller halt", 62, "internal micro-controller halt", "PMU_HALT_ERROR", "RESET_GPU", ClassDriver},
		{"row remap event needs nothing now", 63, "remapping event", "INFOROM_DRAM_RETIREMENT_EVENT", "IGNORE", ClassMemory},
		{"fallen off the bus", 79, "gpu has fallen off the bus", "ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS", "RESTART_BM", ClassHardware},
		{"uncontained memory error", 95, "uncontained", "ROBUST_CHANNEL_UNCONTAINED_ERROR", "RESET_GPU", ClassMemory},
		{"GSP RPC timeout", 119, "gsp rpc timeout", "GSP_RPC_TIMEOUT", "RESET_GPU", ClassDriver},
		{"GSP error", 120, "gsp error", "GSP_ERROR", "RESET_GPU", ClassDriver},
		{"ECC escape", 140, "ecc unrecovered", "UNRECOVERABLE_ECC_ERROR_ESCAPE", "RESET_GPU", ClassMemory},
		{"NVLink 5 NETIR", 149, "netir", "NVLINK_NETIR_ERROR", "WORKFLOW_NVLINK5_ERR", ClassInterconnect},
		{"recovery action changed", 154, "gpu recovery action changed", "GPU_RECOVERY_ACTION_CHANGED", "XID_154", ClassInformational},
		{"NVLink SW defined", 155, "sw defined", "NVLINK_SW_DEFINED_ERROR", "RESET_GPU", ClassInterconnect},
		{"GPU timeout resets", 46, "gpu stopped processing", "ROBUST_CHANNEL_GPU_TIMEOUT_ERROR", "RESET_GPU", ClassDriver},
		{"link training failed", 136, "link training failed", "ALI_TRAINING_FAIL", "RESET_GPU", ClassInterconnect},
		{"resource retirement event", 156, "resource retirement event", "RESOURCE_RETIREMENT_EVENT", "RESET_GPU", ClassHardware},
		{"GPU fatal timeout", 158, "gpu fatal timeout", "GPU_FATAL_TIMEOUT", "RESET_GPU", ClassDriver},
		{"CHI non-data", 159, "chi non-data", "ROBUST_CHANNEL_CHI_NON_DATA_ERROR", "CHECK_UVM", ClassInterconnect},
		{"key rotation restarts the VM", 151, "key rotation", "ROBUST_CHANNEL_KEY_ROTATION_ERROR", "RESTART_VM", ClassDriver},
		{"aux power", 54, "auxiliary power", "SILENT_RUNNING_PWR_REDUCED_CLOCKING", "CHECK_MECHANICALS", ClassHardware},
		{"PCIe fatal timeout has no bucket", 167, "pcie fatal timeout", "PCIE_FATAL_TIMEOUT", "", ClassHardware},
		{"SEC2 halt has no bucket", 169, "micro-controller halt", "SEC2_HALT_ERROR", "", ClassDriver},
		{"DRAM detail of Xid 48", 171, "dram", "UNCORRECTABLE_DRAM_ERROR", "", ClassMemory},
		{"SRAM detail of Xid 48", 172, "sram", "UNCORRECTABLE_SRAM_ERROR", "", ClassMemory},
		{"copy engine 19", 135, "ce19", "ROBUST_CHANNEL_CE19_ERROR", "RESTART_APP", ClassApplication},
		{"copy engine 0", 39, "copy engine exception", "ROBUST_CHANNEL_CE0_ERROR", "RESTART_APP", ClassApplication},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in, ok := Lookup(tt.code)
			if !ok {
				t.Fatalf("Lookup(%d): not in catalog", tt.code)
			}
			if !strings.Contains(strings.ToLower(in.Name), tt.nameHas) {
				t.Errorf("Name = %q, want it to contain %q", in.Name, tt.nameHas)
			}
			if in.Mnemonic != tt.mnemonic {
				t.Errorf("Mnemonic = %q, want %q", in.Mnemonic, tt.mnemonic)
			}
			if in.Bucket != tt.bucket {
				t.Errorf("Bucket = %q, want %q", in.Bucket, tt.bucket)
			}
			if in.Class != tt.class {
				t.Errorf("Class = %v, want %v", in.Class, tt.class)
			}
		})
	}
}

func TestLookupUnknown(t *testing.T) {
	for _, code := range []int{-1, 0, 1, 42, 152, 173, 999, 1 << 30} {
		if in, ok := Lookup(code); ok {
			t.Errorf("Lookup(%d) = %+v, true; want ok=false", code, in)
		}
	}
}

func TestDescribe(t *testing.T) {
	testutil.Check(t, "Describe", Describe, []testutil.Case[int, string]{
		{Name: "known", In: 79, Want: "Xid 79: GPU has fallen off the bus"},
		{Name: "GSP", In: 119, Want: "Xid 119: GSP RPC Timeout"},
		{Name: "unknown", In: 999, Want: "Xid 999: unknown Xid"},
		{Name: "zero", In: 0, Want: "Xid 0: unknown Xid"},
		{Name: "negative", In: -3, Want: "Xid -3: unknown Xid"},
	})
}

func TestCodesSortedAndComplete(t *testing.T) {
	codes := Codes()
	if len(codes) != len(catalog) {
		t.Fatalf("Codes() has %d codes, catalog %d", len(codes), len(catalog))
	}
	for i := 1; i < len(codes); i++ {
		if codes[i-1] >= codes[i] {
			t.Fatalf("Codes() not strictly ascending at %d: %v", i, codes)
		}
	}
}

func TestClassString(t *testing.T) {
	testutil.Check(t, "Class.String", Class.String, []testutil.Case[Class, string]{
		{Name: "application", In: ClassApplication, Want: "application error"},
		{Name: "driver", In: ClassDriver, Want: "driver/firmware error"},
		{Name: "memory", In: ClassMemory, Want: "memory error"},
		{Name: "interconnect", In: ClassInterconnect, Want: "interconnect error"},
		{Name: "hardware", In: ClassHardware, Want: "hardware/bus error"},
		{Name: "informational", In: ClassInformational, Want: "informational"},
		{Name: "zero", In: ClassUnknown, Want: "unknown"},
		{Name: "out of range", In: Class(200), Want: "unknown"},
	})
}

// TestCatalogGolden pins the whole catalog, so an edit to any entry shows up
// in review as a diff of testdata/catalog.golden (rewrite with -update).
func TestCatalogGolden(t *testing.T) {
	var b strings.Builder
	for _, code := range Codes() {
		in, _ := Lookup(code)
		fmt.Fprintf(&b, "%d\t%s\t%s / %s\t%s\t%s\n\t%s\n\t%s\n",
			in.Code, in.Mnemonic, in.BucketOrNone(), cmp.Or(in.Investigate, "-"), in.Class, in.Name, in.Description, in.Action)
	}
	testutil.Golden(t, "catalog.golden", []byte(b.String()))
}

// TestPagingXids: the Xids that page are in the catalog, none is an
// application's or one NVIDIA says to ignore, and the ones the catalog
// answers with a node restart or GPU reset among the reference set
// (nvidia_gpu_exporter's critical Xids 48, 62, 64, 74, 79, 95, 119, 120)
// are all there.
func TestPagingXids(t *testing.T) {
	p := Paging()
	if !slices.IsSorted(p) {
		t.Errorf("Paging() %v is not sorted", p)
	}
	for _, c := range p {
		in, ok := Lookup(c)
		if !ok || in.Class == ClassApplication || in.Bucket == "IGNORE" {
			t.Errorf("Xid %d pages: %+v", c, in)
		}
	}
	for _, c := range []int{48, 62, 64, 74, 79, 95, 119, 120} {
		if !slices.Contains(p, c) {
			t.Errorf("Xid %d does not page", c)
		}
	}
	for _, c := range []int{13, 31, 43, 63, 92} {
		if slices.Contains(p, c) {
			t.Errorf("Xid %d pages", c)
		}
	}
}
