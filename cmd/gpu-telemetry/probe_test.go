package main

import "testing"

// TestProbeArguments: bad arguments are exit 2 with one line, before the
// probe goes near the driver (the measuring itself is tested end to end).
func TestProbeArguments(t *testing.T) {
	checkCLI(t, runProbe, []cliCase{
		{"help", []string{"--help"}, 0, "Usage: gpu-telemetry probe", ""},
		{"zero interval", []string{"--interval", "0"}, 2, "", "--interval must be > 0 and at most 1h"},
		{"interval over an hour", []string{"--interval", "61m"}, 2, "", "--interval must be > 0 and at most 1h"},
		{"interval not a duration", []string{"--interval", "soon"}, 2, "", `--interval: "soon" is neither seconds`},
		{"too few calls", []string{"--calls", "9"}, 2, "", "--calls must be 10..100000"},
		{"too many calls", []string{"--calls", "100001"}, 2, "", "--calls must be 10..100000"},
		{"negative deadline", []string{"--deadline=-1s"}, 2, "", "--deadline must be >= 0"},
		{"argument", []string{"extra"}, 2, "", "unexpected argument extra"},
		{"unknown flag", []string{"--bogus"}, 2, "", "unknown flag --bogus"},
	})
}
