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
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/live"
	"github.com/gpu-telemetry/gpu-telemetry/live/livetest"
)

// fakeDaemon answers each request line on a socket of its own with the
// status document, or with an error to a line with options when refuse is
// set (a daemon older than issue 40); it returns the socket's path and the
// lines it was sent.
func fakeDaemon(t *testing.T, refuse bool) (string, func() []string) {
	t.Helper()
	return scriptedDaemon(t, func(_ int, line string, doc []byte) []byte {
		if refuse && line != "status" {
			return []byte(`{"error":"unknown request"}`)
		}
		return doc
	})
}

// scriptedDaemon answers the n-th request line (from 0) on a socket of its
// own with what answer returns (given the status document); it returns
// the socket's path and the lines it was sent.
func scriptedDaemon(t *testing.T, answer func(n int, line string, doc []byte) []byte) (string, func() []string) {
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
			n := len(lines) - 1
			mu.Unlock()
			c.Write(append(answer(n, line, doc), '\n'))
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

// TestTopSourceFallsBackOnlyForAnOlderDaemon: a failed request (busy, a
// daemon restarting) is the fetch's error and the next asks with the
// options again, history included (the charts re-seed); only a daemon
// that does not know the options is asked for the plain document, for
// optionsRetry, then with the options again, history included. (Before,
// one busy answer switched top to plain documents for good.)
func TestTopSourceFallsBackOnlyForAnOlderDaemon(t *testing.T) {
	const older = `{"error":"unknown request \"status events=200\" (want status or ping)"}`
	answers := map[int]string{
		0: `{"error":"busy: too many connections"}`,
		3: older,
		5: `{"error":"busy: too many connections"}`,
		8: older,
	}
	sock, sent := scriptedDaemon(t, func(n int, _ string, doc []byte) []byte {
		if a, ok := answers[n]; ok {
			return []byte(a)
		}
		return doc
	})
	now := time.Unix(1_800_000_000, 0)
	src := &localSource{path: sock, now: func() time.Time { return now }}
	for i, step := range []struct {
		after time.Duration
		fails bool
	}{
		{0, true},                 // busy
		{time.Second, false},      // history again
		{time.Second, false},      // events only
		{time.Second, false},      // refused, then the plain document
		{time.Second, true},       // plain: busy
		{optionsRetry, false},     // the options again, with the history
		{time.Second, false},      // events only
		{time.Second, false},      // refused again: plain
		{optionsRetry - 1, false}, // plain still
	} {
		now = now.Add(step.after)
		d, err := src.fetch()
		if (err != nil) != step.fails || err == nil && len(d.GPUs) != 2 {
			t.Errorf("fetch %d: %d GPUs, %v; want failed %v", i, len(d.GPUs), err, step.fails)
		}
	}
	h, e, p := "status history=10m0s events=200", "status events=200", "status"
	want := []string{h, h, e, e, p, p, h, e, e, p, p}
	if got := sent(); !slices.Equal(got, want) {
		t.Errorf("sent\n%q\nwant\n%q", got, want)
	}
}
