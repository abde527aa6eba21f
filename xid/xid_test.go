package xid

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite golden files under testdata/")

// required are the codes the daemon's reports lean on; each must stay covered.
var required = []int{13, 31, 43, 45, 48, 61, 62, 63, 64, 68, 69, 74, 79, 92, 94, 95,
	109, 119, 120, 121, 140, 143, 144, 145, 146, 147, 148, 149, 150, 154, 155}

func TestLookupRequiredCodesComplete(t *testing.T) {
	for _, code := range required {
		t.Run(fmt.Sprintf("xid%d", code), func(t *testing.T) {
			in, ok := Lookup(code)
			if !ok {
				t.Fatalf("Lookup(%d): not in catalog", code)
			}
			if in.Code != code {
				t.Errorf("Code = %d, want %d", in.Code, code)
			}
			for field, v := range map[string]string{
				"Mnemonic": in.Mnemonic, "Name": in.Name, "Description": in.Description,
				"Action": in.Action, "Bucket": in.Bucket,
			} {
				if strings.TrimSpace(v) == "" {
					t.Errorf("%s is empty", field)
				}
			}
			if in.Class == ClassUnknown || in.Class.String() == "unknown" {
				t.Errorf("Class = %v, want a known class", in.Class)
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
	for _, code := range []int{-1, 0, 1, 42, 999, 1 << 30} {
		if in, ok := Lookup(code); ok {
			t.Errorf("Lookup(%d) = %+v, true; want ok=false", code, in)
		}
	}
}

func TestDescribe(t *testing.T) {
	tests := []struct {
		name string
		code int
		want string
	}{
		{"known", 79, "Xid 79: GPU has fallen off the bus"},
		{"GSP", 119, "Xid 119: GSP RPC Timeout"},
		{"unknown", 999, "Xid 999: unknown Xid"},
		{"zero", 0, "Xid 0: unknown Xid"},
		{"negative", -3, "Xid -3: unknown Xid"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Describe(tt.code); got != tt.want {
				t.Errorf("Describe(%d) = %q, want %q", tt.code, got, tt.want)
			}
		})
	}
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
	tests := []struct {
		name string
		c    Class
		want string
	}{
		{"application", ClassApplication, "application error"},
		{"driver", ClassDriver, "driver/firmware error"},
		{"memory", ClassMemory, "memory error"},
		{"interconnect", ClassInterconnect, "interconnect error"},
		{"hardware", ClassHardware, "hardware/bus error"},
		{"informational", ClassInformational, "informational"},
		{"zero", ClassUnknown, "unknown"},
		{"out of range", Class(200), "unknown"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.c.String(); got != tt.want {
				t.Errorf("String() = %q, want %q", got, tt.want)
			}
		})
	}
}

// TestCatalogGolden pins the whole catalog, so an edit to any entry shows up
// in review as a diff of testdata/catalog.golden (rewrite with -update).
func TestCatalogGolden(t *testing.T) {
	var b strings.Builder
	for _, code := range Codes() {
		in, _ := Lookup(code)
		fmt.Fprintf(&b, "%d\t%s\t%s\t%s\t%s\n\t%s\n\t%s\n",
			in.Code, in.Mnemonic, in.Bucket, in.Class, in.Name, in.Description, in.Action)
	}
	golden := filepath.Join("testdata", "catalog.golden")
	if *update {
		if err := os.WriteFile(golden, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("read golden file (run with -update to create it): %v", err)
	}
	if got := b.String(); got != string(want) {
		t.Errorf("catalog differs from %s; run go test -update and review the diff\ngot:\n%s", golden, got)
	}
}
