package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/internal/testutil"
	"github.com/gpu-telemetry/gpu-telemetry/live/top"
)

// TestStatusWatchStreams (issue 40): `status --json --watch` against the
// daemon on simulated GPUs prints one document a line, about a second
// apart, and ends quietly, exit 0, when its reader closes the pipe.
func TestStatusWatchStreams(t *testing.T) {
	t.Parallel()
	p := start(t, opts{scenario: "@healthy-8gpu"})
	p.waitForRows(0, 6, 10*time.Second)
	cmd := exec.Command(binPath, "status", "--socket", p.socketPath(), "--json", "--watch")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr testutil.LogBuf
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(nil, 16<<20)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	var times []time.Time
	for i := range 3 {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("the stream ended after %d documents; stderr %s", i, stderr.String())
			}
			var d struct {
				statusDoc
				Time time.Time `json:"time"`
			}
			if err := json.Unmarshal([]byte(l), &d); err != nil || len(d.GPUs) != 8 {
				t.Fatalf("document %d (%v): %.300s", i, err, l)
			}
			times = append(times, d.Time)
		case <-time.After(10 * time.Second):
			t.Fatalf("no document %d within 10 s; stderr %s", i, stderr.String())
		}
	}
	if !times[0].Before(times[1]) || !times[1].Before(times[2]) {
		t.Errorf("documents' times %v: not one after another", times)
	}
	out.Close() // the reader leaves: the next write fails with EPIPE
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("status --watch after its reader left: %v (want exit 0); stderr %q", err, stderr.String())
		}
		if stderr.String() != "" {
			t.Errorf("status --watch said on leaving: %q", stderr.String())
		}
	case <-time.After(10 * time.Second):
		t.Errorf("status --watch still running 10 s after its reader left")
	}
}

// TestTopHostOverFakeSSH (issue 40): top --host's source, through an ssh
// in PATH that runs the command here against the daemon on simulated GPUs,
// gets the daemon's documents, as top on that host would. Not parallel:
// it sets PATH.
func TestTopHostOverFakeSSH(t *testing.T) {
	p := start(t, opts{scenario: "@hang"})
	p.waitForRows(0, 6, 10*time.Second)
	dir := t.TempDir()
	// Drops ssh's options and the host; runs the remote command (its
	// first word, gpu-telemetry, is the binary under test) with the
	// daemon's socket.
	script := `#!/bin/sh
while [ $# -gt 0 ]; do
	case "$1" in
	-o) shift 2 ;;
	--) shift; break ;;
	-*) shift ;;
	*) break ;;
	esac
done
shift 2
exec "` + binPath + `" "$@" --socket "` + p.socketPath() + `"
`
	if err := os.WriteFile(filepath.Join(dir, "ssh"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	r := top.SSH("gpu-node-remote")
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan struct{})
	go func() { r.Run(ctx); close(ran) }()
	defer func() { cancel(); <-ran }()
	// hang.scn: GPU 1 hangs at 3 s; the view sees it through ssh.
	p.waitFor("GPU 1 hung in a document through the fake ssh", 15*time.Second, func() bool {
		d, err := r.Fetch()
		return err == nil && len(d.GPUs) == 2 && d.GPUs[1].State == "hung"
	})
	d, _ := r.Fetch()
	if d.GPUs[0].State != "ok" || d.Host.Version == "" || !strings.HasPrefix(d.GPUs[0].UUID, "GPU-") {
		t.Errorf("document through ssh: %+v", d.Host)
	}
}
