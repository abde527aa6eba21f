package snapshot

import (
	"strings"
	"testing"
	"time"
)

// TestParseName reads back what baseName (and CreateNew's collision suffix)
// write; follow-ups and boot logs are not incidents.
func TestParseName(t *testing.T) {
	at := time.Date(2026, 11, 30, 23, 59, 58, 123e6, time.Local)
	tests := []struct {
		name string
		ok   bool
		want Name
	}{
		{baseName("crash", at, 3) + ".log", true, Name{"crash", at, 3}},
		{baseName("spike", at, 12) + ".log", true, Name{"spike", at, 12}},
		{baseName("crash", at, -1) + ".log", true, Name{"crash", at, -1}},
		{baseName("crash", at, 3) + "-2.log", true, Name{"crash", at, 3}},
		{followUpName(baseName("crash", at, 3), 10*time.Second) + ".log", false, Name{}},
		{"boot-20261130-235958.123.log", false, Name{}},
		{"crash-20261130-235958-gpu3.log", false, Name{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := ParseName(tc.name, time.Local)
			if ok != tc.ok || got.Kind != tc.want.Kind || !got.Time.Equal(tc.want.Time) || got.GPU != tc.want.GPU {
				t.Errorf("got %+v %v, want %+v %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}

// TestParseHeader reads back the fields of a header writeHeader wrote.
func TestParseHeader(t *testing.T) {
	at := time.Date(2026, 11, 30, 23, 59, 58, 123e6, time.FixedZone("CET", 3600))
	for _, h := range []Header{
		{Title: "GPU CRASH DETECTED", Time: at, GPUIndex: 3, GPUName: "NVIDIA H100", Reason: "Xid 79: GPU has fallen off the bus (kmsg)"},
		{Title: "KERNEL EVENT", Time: at, GPUIndex: -1, Reason: "AER"},
		{Title: "GPU CRASH DETECTED", Time: at, GPUIndex: 0, Reason: "GPU_LOST", Action: "power_cycle: warm reboot did not recover it (xid79 in the previous boot)"},
	} {
		var b strings.Builder
		writeHeader(&b, &h)
		b.WriteString("Reason: not the header's\n")
		got, ok := ParseHeader(b.String())
		if !ok || got.Title != h.Title || !got.Time.Equal(h.Time) || got.GPUIndex != h.GPUIndex || got.Reason != h.Reason || got.Action != h.Action {
			t.Errorf("read back %+v %v from:\n%s", got, ok, b.String())
		}
	}
	if _, ok := ParseHeader("=== GPU CRASH DETECTED ===\nTime: n/a\n"); ok {
		t.Errorf("a header without a time read as one")
	}
}

// TestParseFollowUpName reads back what followUpName writes, whole seconds
// or not (the report once parsed these with a pattern of its own, which
// missed "+1m30.5s"), and nothing else.
func TestParseFollowUpName(t *testing.T) {
	at := time.Date(2026, 11, 30, 23, 59, 58, 123e6, time.Local)
	incident := baseName("crash", at, 3) + ".log"
	for _, off := range []time.Duration{10 * time.Second, 300 * time.Second, 1500 * time.Millisecond, 90500 * time.Millisecond} {
		inc, label, ok := ParseFollowUpName(followUpName(incident, off) + ".log")
		if d, err := time.ParseDuration(strings.TrimPrefix(label, "+")); !ok || inc != incident || err != nil || d != off {
			t.Errorf("%v: read back %q %q %v", off, inc, label, ok)
		}
	}
	for _, name := range []string{incident, "boot-20261130-235958.123.log", strings.TrimSuffix(incident, ".log") + "+10s", strings.TrimSuffix(incident, ".log") + "+x.log"} {
		if _, _, ok := ParseFollowUpName(name); ok {
			t.Errorf("%s read as a follow-up", name)
		}
	}
}
