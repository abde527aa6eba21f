package main

import (
	"io"
	"path/filepath"
	"testing"
)

// TestStatusAndTopArguments: status and top share socketFlags; bad flags and
// a daemon that is not there are "unknown" (3), never a crash or a hang.
func TestStatusAndTopArguments(t *testing.T) {
	gone := filepath.Join(t.TempDir(), "control.sock")
	t.Run("status", func(t *testing.T) {
		checkCLI(t, runStatus, []cliCase{
			{"help", []string{"--help"}, 0, "usage: gpu-telemetry status", ""},
			{"unknown argument", []string{"--verbose"}, 3, "", `unknown argument "--verbose"`},
			{"socket off", []string{"--socket", "none"}, 3, "", "needs the daemon's socket path"},
			{"empty socket", []string{"--socket="}, 3, "", "needs the daemon's socket path"},
			{"no daemon", []string{"--socket", gone, "--json"}, 3, "", "cannot ask the daemon at " + gone},
		})
	})
	t.Run("top", func(t *testing.T) {
		top := func(args []string, _, stderr io.Writer) int { return runTop(args, stderr) }
		checkCLI(t, top, []cliCase{
			{"help", []string{"-h"}, 0, "", "usage: gpu-telemetry top"},
			{"unknown argument", []string{"--json"}, 3, "", `unknown argument "--json"`},
			{"socket off", []string{"--socket=none"}, 3, "", "needs the daemon's socket path"},
		})
	})
}
