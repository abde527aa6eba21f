package reading

import (
	"errors"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

var pciTests = []struct {
	name string
	in   string
	want string // String() of the result; empty: must be refused
}{
	{"NVML form", "00000000:4B:00.0", "0000:4b:00.0"},
	{"lspci -D form", "0000:4b:00.0", "0000:4b:00.0"},
	{"kernel Xid form", "PCI:0000:4b:00", "0000:4b:00.0"},
	{"kernel form, prefix in lower case", "pci:0000:4b:00", "0000:4b:00.0"},
	{"older driver without PCI prefix", "0000:01:00", "0000:01:00.0"},
	{"mixed case", "0000:4B:1f.0", "0000:4b:1f.0"},
	{"domain above 0xffff from NVML (VMD)", "00010000:01:00.0", "10000:01:00.0"},
	{"domain above 0xffff from the kernel", "PCI:10000:01:00", "10000:01:00.0"},
	{"nonzero domain", "00000002:C1:00.0", "0002:c1:00.0"},
	{"function 7", "00000000:C1:1F.7", "0000:c1:1f.7"},
	{"largest", "FFFFFFFF:FF:1F.7", "ffffffff:ff:1f.7"},
	{"empty", "", ""},
	{"garbage", "hello", ""},
	{"no domain", "4b:00.0", ""},
	{"short domain", "00:4b:00", ""},
	{"nine-digit domain", "000000000:4B:00.0", ""},
	{"bus one digit", "0000:4:00", ""},
	{"bus three digits", "0000:04b:00", ""},
	{"device above 0x1f", "00000000:4B:20.0", ""},
	{"function 8", "00000000:4B:00.8", ""},
	{"function two digits", "0000:4b:00.00", ""},
	{"empty function", "0000:4b:00.", ""},
	{"not hex", "0000:4g:00", ""},
	{"extra part", "0000:4b:00:00", ""},
	{"sign in domain", "+000:4b:00", ""},
	{"prefix only", "PCI:", ""},
	{"shell text", "00000000:4B:00.0;reboot", ""},
	{"option", "-vvv", ""},
	{"surrounding spaces", " 0000:4b:00.0", ""},
	{"trailing newline", "00000000:4B:00.0\n", ""},
}

func TestParsePCIAddr(t *testing.T) {
	for _, tt := range pciTests {
		t.Run(tt.name, func(t *testing.T) {
			a, err := ParsePCIAddr(tt.in)
			if tt.want == "" {
				if err == nil {
					t.Fatalf("ParsePCIAddr(%q) = %v; want it refused", tt.in, a)
				}
				if !errors.Is(err, ErrPCIAddr) || !strings.Contains(err.Error(), strconv.Quote(tt.in)) {
					t.Errorf("error %q does not wrap ErrPCIAddr or does not name the input", err)
				}
				return
			}
			if err != nil || a.String() != tt.want {
				t.Errorf("ParsePCIAddr(%q) = %v, %v; want %s", tt.in, a, err, tt.want)
			}
		})
	}
}

// TestPCIAddrFormsAgree: the three spellings of one GPU's address are one value.
func TestPCIAddrFormsAgree(t *testing.T) {
	var got []PCIAddr
	for _, s := range []string{"00000000:4B:00.0", "0000:4b:00.0", "PCI:0000:4b:00", "0000:4b:00"} {
		a, err := ParsePCIAddr(s)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, a)
	}
	for _, a := range got[1:] {
		if a != got[0] {
			t.Errorf("%+v != %+v", a, got[0])
		}
	}
	want := PCIAddr{Domain: 0, Bus: 0x4b, Device: 0, Function: 0}
	if got[0] != want {
		t.Errorf("got %+v, want %+v", got[0], want)
	}
	if s := want.NVML(); s != "00000000:4B:00.0" {
		t.Errorf("NVML() = %q", s)
	}
	f7 := PCIAddr{Bus: 0x4b, Function: 7}
	if f7.Slot() != want || f7 == want {
		t.Errorf("Slot() of %v = %v", f7, f7.Slot())
	}
}

// lspciAddress is what may reach lspci and setpci command lines.
var lspciAddress = regexp.MustCompile(`^[0-9a-f]{4,8}:[0-9a-f]{2}:[01][0-9a-f]\.[0-7]$`)

func FuzzParsePCIAddr(f *testing.F) {
	for _, tt := range pciTests {
		f.Add(tt.in)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, err := ParsePCIAddr(s)
		if err != nil {
			if a != (PCIAddr{}) {
				t.Errorf("ParsePCIAddr(%q) failed but returned %+v", s, a)
			}
			return
		}
		if a.Device > 0x1f || a.Function > 7 {
			t.Errorf("ParsePCIAddr(%q) = %+v: field out of range", s, a)
		}
		str := a.String()
		if !lspciAddress.MatchString(str) {
			t.Errorf("String() = %q, not a strict lspci address", str)
		}
		for _, form := range []string{str, a.NVML()} {
			if b, err := ParsePCIAddr(form); err != nil || b != a {
				t.Errorf("ParsePCIAddr(%q) = %+v, %v; want %+v (round trip of %q)", form, b, err, a, s)
			}
		}
	})
}
