package reading

import "testing"

// TestSelector: the ways an operator names a GPU, one implementation for
// the daemon, probe and report.
func TestSelector(t *testing.T) {
	const uuid, bus = "GPU-5a3c1e2f-0b4d-4e6f-8a9b-0c1d2e3f4a5b", "00000000:4B:00.0"
	for _, tc := range []struct {
		sel   string
		ok    bool
		index int
		match bool
	}{
		{"0", true, 0, false},
		{"12", true, 12, false},
		{"999", true, 999, false},
		{"1234", true, -1, false}, // a UUID prefix, not an index
		{"-1", false, -1, false},
		{uuid, true, -1, true},
		{"gpu-5A3C1E2F-0B4D-4E6F-8A9B-0C1D2E3F4A5B", true, -1, true},
		{"GPU-5a3c1e2f", true, -1, true},
		{"5a3c1e2f", true, -1, true},
		{"5a3c", true, -1, true},
		{"5a3", false, -1, false},
		{"GPU-", false, -1, false},
		{"GPU-9e8d", true, -1, false},
		{"0000:4b:00.0", true, -1, true},
		{"PCI:0000:4b:00", true, -1, true},
		{"4b:00.1", true, -1, false}, // no domain: not a bus id (ParsePCIAddr), and no UUID starts so
		{"00000000:4C:00.0", true, -1, false},
	} {
		s, ok := ParseSelector(tc.sel)
		if ok != tc.ok || s.Index != tc.index || (ok && s.Matches(uuid, bus) != tc.match) {
			t.Errorf("%q: ok %v index %d matches %v; want %v %d %v", tc.sel, ok, s.Index, s.Matches(uuid, bus), tc.ok, tc.index, tc.match)
		}
	}
	if s, _ := ParseSelector("5a3c"); s.Matches("", "") || s.Exact(uuid) {
		t.Errorf("a prefix matches an unknown board, or is taken for the whole UUID")
	}
	if s, ok := ParseSelector("12345678"); !ok || s.IsIndex() || !s.Matches("GPU-12345678-0b4d", "") {
		t.Errorf("a UUID that begins with 8 digits is not named by them: %+v", s)
	}
	if s, _ := ParseSelector(uuid); !s.Exact(uuid) {
		t.Errorf("the whole UUID is not exact")
	}
}
