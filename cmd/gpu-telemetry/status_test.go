package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpu-telemetry/gpu-telemetry/internal/counters"
	"github.com/gpu-telemetry/gpu-telemetry/internal/testutil"
	"github.com/gpu-telemetry/gpu-telemetry/live"
	"github.com/gpu-telemetry/gpu-telemetry/live/control"
	"github.com/gpu-telemetry/gpu-telemetry/live/livetest"
	"github.com/gpu-telemetry/gpu-telemetry/reading"
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
			{"history too long", []string{"--socket", gone, "--json", "--history", "11m"}, 3, `"error": "--history 11m0s: want a duration from 1s to 10m0s"`, "gpu-telemetry status: --history 11m0s: want a duration from 1s to 10m0s"},
			{"history not a duration", []string{"--history", "soon"}, 3, "", "--history: "},
			{"too many events", []string{"--json", "--events", "501"}, 3, `"error": "--events 501`, "--events 501: want a number of lines from 1 to 500"},
			{"history without --json", []string{"--history", "1m"}, 3, "", "--history and --events need --json"},
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

// TestStatusJSONKeepsTheDocument: status --json prints the daemon's
// document as it came, indented: its keys in the document's order and its
// integers exact. Decoding it into an any and encoding that again sorted
// the keys and rounded 2^53+1 bytes to 2^53.
func TestStatusJSONKeepsTheDocument(t *testing.T) {
	v := livetest.View()
	v.GPUs[0].Sample.Values[reading.VRAMUsedBytes] = reading.Some[uint64](1<<53 + 1)
	sock := filepath.Join(t.TempDir(), "control.sock")
	srv, err := control.Listen(control.Config{Path: sock, Counters: counters.New()}, livetest.Board(v))
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	served := make(chan struct{})
	go func() { srv.Serve(ctx); close(served) }()
	defer func() { stop(); <-served }()

	doc, err := json.Marshal(live.NewDoc(v))
	if err != nil {
		t.Fatal(err)
	}
	var want bytes.Buffer
	if err := json.Indent(&want, doc, "", "  "); err != nil {
		t.Fatal(err)
	}
	want.WriteByte('\n')
	var stdout, stderr bytes.Buffer
	if code := runStatus([]string{"--socket", sock, "--json"}, &stdout, &stderr); code != live.CheckCritical {
		t.Errorf("exit %d, want %d (GPU 1 hung); stderr %s", code, live.CheckCritical, stderr.String())
	}
	got, exp := strings.Split(stdout.String(), "\n"), strings.Split(want.String(), "\n")
	for i := range max(len(got), len(exp)) {
		if i >= len(got) || i >= len(exp) || got[i] != exp[i] {
			t.Errorf("status --json differs from the document the daemon sent at line %d:\n%s", i+1, strings.Join(got[max(i-3, 0):min(i+3, len(got))], "\n"))
			break
		}
	}
	testutil.Contains(t, "status --json", stdout.String(), `"memory_used_bytes": 9007199254740993,`)
}
