package snapshot

import (
	"regexp"
	"testing"
)

func TestPCIAddress(t *testing.T) {
	tests := []struct {
		name, in, want string
		wantErr        bool
	}{
		{"nvml form", "00000000:4B:00.0", "0000:4b:00.0", false},
		{"short domain", "0000:4b:00.0", "0000:4b:00.0", false},
		{"wide domain (VMD)", "00010000:01:00.0", "10000:01:00.0", false},
		{"function 7", "00000000:C1:1F.7", "0000:c1:1f.7", false},
		{"device above 0x1f", "00000000:4B:20.0", "", true},
		{"function 8", "00000000:4B:00.8", "", true},
		{"no domain", "4B:00.0", "", true},
		{"empty", "", "", true},
		{"shell text", "00000000:4B:00.0;reboot", "", true},
		{"option", "-vvv", "", true},
		{"trailing newline", "00000000:4B:00.0\n", "", true},
		{"nine-digit domain", "000000000:4B:00.0", "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := pciAddress(tt.in)
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Errorf("pciAddress(%q) = %q, %v; want %q, error %v", tt.in, got, err, tt.want, tt.wantErr)
			}
		})
	}
}

// lspciAddress is what may reach lspci and setpci.
var lspciAddress = regexp.MustCompile(`^[0-9a-f]{4,8}:[0-9a-f]{2}:[01][0-9a-f]\.[0-7]$`)

func FuzzPCIAddress(f *testing.F) {
	for _, s := range []string{"00000000:4B:00.0", "0000:4b:00.0", "-s", "00000000:4B:00.0 x", "ffffffff:ff:1f.7"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		got, err := pciAddress(in)
		if err != nil {
			return
		}
		if !lspciAddress.MatchString(got) {
			t.Fatalf("pciAddress(%q) = %q, not a strict lspci address", in, got)
		}
	})
}
