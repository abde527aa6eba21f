package main

import (
	"io"
	"path/filepath"
	"testing"
)

// TestStatusAndTopArguments: status and top share socketFlags; bad flags and
// a daemon that is not there are "unknown" (3), as monitoring checks expect.
func TestStatusAndTopArguments(t *testing.T) {
	gone := filepath.Join(t.TempDir(), "control.sock")
	t.Run("status", func(t *testing.T) {
		checkCLI(t, runStatus, []cliCase{
			{"help", []string{"--help"}, 0, "Usage: gpu-telemetry status", ""},
			{"unknown flag", []string{"--verbose"}, 3, "", "unknown flag --verbose"},
			{"argument", []string{"now"}, 3, "", "unexpected argument now"},
			{"socket without a path", []string{"--socket"}, 3, "", "--socket: expected string value"},
			{"socket off", []string{"--socket", "none"}, 3, "", "needs the daemon's socket path"},
			{"empty socket", []string{"--socket="}, 3, "", "needs the daemon's socket path"},
			{"no daemon", []string{"--socket", gone, "--json"}, 3, "", "cannot ask the daemon at " + gone},
		})
	})
	t.Run("top", func(t *testing.T) {
		top := func(args []string, _, stderr io.Writer) int { return runTop(args, stderr) }
		checkCLI(t, top, []cliCase{
			{"help", []string{"-h"}, 0, "", "Usage: gpu-telemetry top"},
			{"unknown flag", []string{"--json"}, 3, "", "unknown flag --json"},
			{"socket off", []string{"--socket=none"}, 3, "", "needs the daemon's socket path"},
		})
	})
}
