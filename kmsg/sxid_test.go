package kmsg

import "testing"

func TestParseSXid(t *testing.T) {
	for _, tc := range []struct {
		name, msg string
		ok        bool
		sw, code  int
		bus, text string
	}{
		{"non-fatal", "nvidia-nvswitch3: SXid (PCI:0000:05:00.0): 12028, Non-fatal, Link 32 egress non-posted PRIV error (First)", true, 3, 12028, "0000:05:00.0", "Non-fatal, Link 32 egress non-posted PRIV error (First)"},
		{"fatal, two-digit switch", "nvidia-nvswitch11: SXid (PCI:0000:c5:00.0): 20034, Fatal, Link 04 LTSSM Fault Up", true, 11, 20034, "0000:c5:00.0", "Fatal, Link 04 LTSSM Fault Up"},
		{"code only", "nvidia-nvswitch0: SXid (PCI:0000:06:00.0): 22013", true, 0, 22013, "0000:06:00.0", ""},
		{"a GPU's Xid", "NVRM: Xid (PCI:0000:4b:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.", false, 0, 0, "", ""},
		{"quoted in other text", "audit: exe=\"nvidia-nvswitch3: SXid (PCI:0000:05:00.0): 12028\"", false, 0, 0, "", ""},
		{"no switch number", "nvidia-nvswitch: SXid (PCI:0000:05:00.0): 12028, x", false, 0, 0, "", ""},
		{"no domain", "nvidia-nvswitch3: SXid (PCI:05:00.0): 12028, x", false, 0, 0, "", ""},
		{"code not a number", "nvidia-nvswitch3: SXid (PCI:0000:05:00.0): 12x28, x", false, 0, 0, "", ""},
		{"code too long", "nvidia-nvswitch3: SXid (PCI:0000:05:00.0): 1234567, x", false, 0, 0, "", ""},
		{"other nvswitch line", "nvidia-nvswitch3: probe of 0000:05:00.0 succeeded", false, 0, 0, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, ok := ParseSXid(tc.msg)
			if ok != tc.ok {
				t.Fatalf("ok = %v, want %v (%+v)", ok, tc.ok, r)
			}
			if !ok {
				return
			}
			if r.Switch != tc.sw || r.Code != tc.code || r.Bus.String() != tc.bus || r.Text != tc.text {
				t.Errorf("got switch %d code %d bus %s text %q, want %d %d %s %q", r.Switch, r.Code, r.Bus, r.Text, tc.sw, tc.code, tc.bus, tc.text)
			}
		})
	}
}

func FuzzParseSXid(f *testing.F) {
	f.Add("nvidia-nvswitch3: SXid (PCI:0000:05:00.0): 12028, Non-fatal, Link 32")
	f.Fuzz(func(t *testing.T, msg string) {
		if r, ok := ParseSXid(msg); ok && (r.Code < 0 || r.Switch < 0) {
			t.Errorf("%q: %+v", msg, r)
		}
	})
}
