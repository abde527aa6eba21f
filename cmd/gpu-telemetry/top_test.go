package main

import (
	"bufio"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/gpu-telemetry/gpu-telemetry/live"
	"github.com/gpu-telemetry/gpu-telemetry/live/livetest"
)

// fakeDaemon answers each request line on a socket of its own with the
// status document, or with an error to a line with options when refuse is
// set (a daemon older than issue 40); it returns the socket's path and the
// lines it was sent.
func fakeDaemon(t *testing.T, refuse bool) (string, func() []string) {
	t.Helper()
	dir, err := os.MkdirTemp("", "gt")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "control.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	doc, err := json.Marshal(live.NewDoc(livetest.View()))
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var lines []string
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			line, _ := bufio.NewReader(c).ReadString('\n')
			line = strings.TrimSuffix(line, "\n")
			mu.Lock()
			lines = append(lines, line)
			mu.Unlock()
			if refuse && line != "status" {
				c.Write([]byte(`{"error":"unknown request"}` + "\n"))
			} else {
				c.Write(append(doc, '\n'))
			}
			c.Close()
		}
	}()
	return sock, func() []string { mu.Lock(); defer mu.Unlock(); return slices.Clone(lines) }
}

// TestTopSourceAsks: top asks for the history on its first request and the
// events on every one; a daemon that refuses the options is asked for the
// plain document from then on, and every fetch still gets one.
func TestTopSourceAsks(t *testing.T) {
	for _, tc := range []struct {
		name   string
		refuse bool
		want   []string
	}{
		{"new daemon", false, []string{"status history=10m0s events=200", "status events=200", "status events=200"}},
		{"older daemon", true, []string{"status history=10m0s events=200", "status", "status", "status"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sock, sent := fakeDaemon(t, tc.refuse)
			src := &localSource{path: sock}
			for range 3 {
				d, err := src.fetch()
				if err != nil || len(d.GPUs) != 2 {
					t.Fatalf("fetch: %d GPUs, %v", len(d.GPUs), err)
				}
			}
			if got := sent(); !slices.Equal(got, tc.want) {
				t.Errorf("sent %q, want %q", got, tc.want)
			}
		})
	}
}
