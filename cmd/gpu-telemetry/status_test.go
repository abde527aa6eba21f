package main

import (
	"net"
	"path/filepath"
	"testing"
)

// TestStatusAndTopArguments: status and top share socketFlags. For status,
// a monitoring check, bad flags and a daemon that is not there are
// "unknown" (3), as monitoring systems expect (2 would read as critical);
// top has the usual 2 for bad flags and 1 for no daemon.
func TestStatusAndTopArguments(t *testing.T) {
	gone := filepath.Join(t.TempDir(), "control.sock")
	// A socket file nobody listens on (a daemon killed without cleaning up).
	deaf := filepath.Join(t.TempDir(), "deaf.sock")
	l, err := net.Listen("unix", deaf)
	if err != nil {
		t.Fatal(err)
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	l.Close()
	t.Run("status", func(t *testing.T) {
		checkCLI(t, runStatus, []cliCase{
			{"help", []string{"--help"}, 0, "Usage: gpu-telemetry status", ""},
			{"unknown flag", []string{"--verbose"}, 3, "", "unknown flag --verbose"},
			{"argument", []string{"now"}, 3, "", "unexpected argument now"},
			{"socket without a path", []string{"--socket"}, 3, "", "--socket: expected string value"},
			{"socket off", []string{"--socket", "none"}, 3, "", "needs the daemon's socket path"},
			{"empty socket", []string{"--socket="}, 3, "", "needs the daemon's socket path"},
			{"no daemon", []string{"--socket", gone}, 3, "", "cannot ask the daemon at " + gone + ": no socket there: is the logger running (systemctl status gpu-telemetry), or was it started with another --socket?"},
			{"no daemon, JSON", []string{"--socket", gone, "--json"}, 3, `"error": "cannot ask the daemon at ` + gone, "cannot ask the daemon at " + gone},
			{"nothing listening", []string{"--socket", deaf}, 3, "", "cannot ask the daemon at " + deaf + ": nothing listens on it"},
		})
	})
	t.Run("top", func(t *testing.T) {
		checkCLI(t, runTop, []cliCase{
			{"help", []string{"-h"}, 0, "Usage: gpu-telemetry top", ""},
			{"unknown flag", []string{"--json"}, 2, "", "unknown flag --json"},
			{"socket off", []string{"--socket=none"}, 2, "", "needs the daemon's socket path"},
			{"no daemon", []string{"--socket", gone}, 1, "", "gpu-telemetry top: cannot ask the daemon at " + gone + ": no socket there"},
		})
	})
}
