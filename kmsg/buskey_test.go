package kmsg

import "testing"

var busKeyTests = []struct {
	name string
	in   string
	want string // empty: must be refused
}{
	{"kernel Xid form", "PCI:0000:4b:00", "0000:4b:00"},
	{"kernel form, prefix in lower case", "pci:0000:4b:00", "0000:4b:00"},
	{"older driver without PCI prefix", "0000:01:00", "0000:01:00"},
	{"NVML form", "00000000:4B:00.0", "0000:4b:00"},
	{"lspci -D form", "0000:4b:00.0", "0000:4b:00"},
	{"mixed case", "0000:4B:1f.0", "0000:4b:1f"},
	{"surrounding spaces", "  00000000:4B:00.0\n", "0000:4b:00"},
	{"domain above 0xffff from NVML", "00010000:01:00.0", "10000:01:00"},
	{"domain above 0xffff from the kernel", "PCI:10000:01:00", "10000:01:00"},
	{"nonzero domain", "00000002:C1:00.0", "0002:c1:00"},
	{"function 7", "0000:4b:00.7", "0000:4b:00"},
	{"empty", "", ""},
	{"garbage", "hello", ""},
	{"no domain", "4b:00.0", ""},
	{"short domain", "00:4b:00", ""},
	{"domain too long", "000000000:4b:00", ""},
	{"bus one digit", "0000:4:00", ""},
	{"bus three digits", "0000:04b:00", ""},
	{"device beyond 0x1f", "0000:4b:20", ""},
	{"function 8", "0000:4b:00.8", ""},
	{"function two digits", "0000:4b:00.00", ""},
	{"empty function", "0000:4b:00.", ""},
	{"not hex", "0000:4g:00", ""},
	{"extra part", "0000:4b:00:00", ""},
	{"sign in domain", "+000:4b:00", ""},
	{"prefix only", "PCI:", ""},
	{"MIG suffix is not part of the address", "PCI:0000:4b:00 GPU-I:05", ""},
}

func TestBusKey(t *testing.T) {
	for _, tt := range busKeyTests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := BusKey(tt.in)
			if tt.want == "" {
				if ok {
					t.Errorf("BusKey(%q) = %q, true; want it refused", tt.in, got)
				}
				return
			}
			if !ok || got != tt.want {
				t.Errorf("BusKey(%q) = %q, %v; want %q, true", tt.in, got, ok, tt.want)
			}
		})
	}
}

func TestBusKeyKernelMatchesNVML(t *testing.T) {
	kernel, ok1 := BusKey("PCI:0000:4b:00")
	nvml, ok2 := BusKey("00000000:4B:00.0")
	if !ok1 || !ok2 || kernel != nvml {
		t.Errorf("kernel key %q (%v) and NVML key %q (%v) should be equal", kernel, ok1, nvml, ok2)
	}
}
