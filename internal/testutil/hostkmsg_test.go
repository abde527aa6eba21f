package testutil

import "testing"

// TestAlarming: the lines a test may write into the host's kernel log, and
// those it may not: the driver's Xid and NVRM lines in any case, with or
// without a prefix, and a GPU off the bus however it is said.
func TestAlarming(t *testing.T) {
	Check(t, "Alarming", Alarming, []Case[string, string]{
		{"a tagged test line", "gpu-telemetry-kmsg-test-1-2 one", ""},
		{"a stand-in for a driver line", "gpu-telemetry-replay-1-2: stands in for driver code 79 on 0000:01:00", ""},
		{"the clock marker", "gpu-telemetry: kmsg clock check (dmesg_time offset estimate)", ""},
		{"an Xid line", "<4>NVRM: Xid (PCI:0000:01:00): 79, pid=1, name=x, GPU has fallen off the bus.", "nvrm"},
		{"an Xid after a tag", "tag two: NVRM: Xid (PCI:0000:4b:00): 79, pid=1, name=x, test", "nvrm"},
		{"Xid without NVRM", "tag Xid 79 on 0000:01:00", "xid"},
		{"lower case", "tag nvrm: something", "nvrm"},
		{"off the bus, no prefix", "GPU 0000:01:00.0 has fallen off the bus", "fallen off the bus"},
	})
}
