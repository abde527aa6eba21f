package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/gpu-telemetry/gpu-telemetry/internal/counters"
	"github.com/gpu-telemetry/gpu-telemetry/live"
	"github.com/gpu-telemetry/gpu-telemetry/live/control"
	"github.com/gpu-telemetry/gpu-telemetry/live/livetest"
)

// lines is a stdout that takes n lines, then fails as a closed pipe does.
type lines struct {
	n   int
	got [][]byte
}

func (l *lines) Write(p []byte) (int, error) {
	if len(l.got) == l.n {
		return 0, syscall.EPIPE
	}
	l.got = append(l.got, append([]byte(nil), p...))
	return len(p), nil
}

// TestStatusWatch: status --json --watch prints the daemon's document as
// one compact line at a time, and ends quietly (exit 0) when its stdout is
// closed.
func TestStatusWatch(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "control.sock")
	srv, err := control.Listen(control.Config{Path: sock, Counters: counters.New()}, livetest.Board(livetest.View()))
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	served := make(chan struct{})
	go func() { srv.Serve(ctx); close(served) }()
	defer func() { stop(); <-served }()

	out := &lines{n: 2}
	var stderr strings.Builder
	if code := runStatus([]string{"--socket", sock, "--json", "--watch"}, out, &stderr); code != 0 || stderr.Len() != 0 {
		t.Errorf("exit %d, stderr %q; want 0 and nothing", code, stderr.String())
	}
	if len(out.got) != 2 {
		t.Fatalf("%d lines", len(out.got))
	}
	for i, l := range out.got {
		var d live.Doc
		if err := json.Unmarshal(l, &d); err != nil || d.SchemaVersion != live.SchemaVersion || len(d.GPUs) != 2 ||
			strings.Count(string(l), "\n") != 1 || !strings.HasSuffix(string(l), "}\n") {
			t.Errorf("line %d (%v): %.200q", i, err, l)
		}
	}
}

// TestWatchAndHostArguments: --watch is for --json; a daemon that is not
// there is one JSON line; a bad --host is refused before ssh runs, and a
// host ssh cannot reach is one line before any screen is taken.
func TestWatchAndHostArguments(t *testing.T) {
	gone := filepath.Join(t.TempDir(), "control.sock")
	t.Run("status", func(t *testing.T) {
		checkCLI(t, runStatus, []cliCase{
			{"watch without json", []string{"--socket", gone, "--watch"}, 3, "", "gpu-telemetry status: --watch needs --json"},
			{"no daemon", []string{"--socket", gone, "--json", "--watch"}, 3, `{"schema_version":2,"error":"cannot ask the daemon at ` + gone, "cannot ask the daemon at " + gone + ": no socket there"},
		})
	})
	// An ssh for PATH that cannot resolve any host, and records that it ran.
	dir := t.TempDir()
	ran := filepath.Join(dir, "ran")
	script := "#!/bin/sh\necho \"$@\" >> " + ran + "\necho \"ssh: Could not resolve hostname: Name or service not known\" >&2\nexit 255\n"
	if err := os.WriteFile(filepath.Join(dir, "ssh"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	t.Run("top", func(t *testing.T) {
		checkCLI(t, runTop, []cliCase{
			{"empty host", []string{"--host="}, 2, "", "gpu-telemetry top: --host: empty host name"},
			{"option as host", []string{"--host=-oProxyCommand=sh"}, 2, "", "begins with '-'"},
			{"blank in host", []string{"--host", "a b"}, 2, "", "blanks or control characters"},
			{"control character in host", []string{"--host", "a\x1bb"}, 2, "", "blanks or control characters"},
			{"one bad among good", []string{"--host", "a", "--host", "b\n"}, 2, "", "blanks or control characters"},
			{"shell metacharacter in host", []string{"--host", "h$(id)"}, 2, "", "gpu-telemetry top: --host: host name \"h$(id)\" has a character other than letters, digits and . _ : @ [ ] -\n"},
		})
		if _, err := os.Stat(ran); err == nil {
			t.Errorf("ssh ran for a bad host name")
		}
		checkCLI(t, runTop, []cliCase{
			{"unreachable", []string{"--host", "nowhere"}, 1, "", "gpu-telemetry top: nowhere: ssh: Could not resolve hostname: Name or service not known (ssh exit status 255)"},
		})
	})
}
