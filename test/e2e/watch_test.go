package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
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
	t.Setenv("PATH", fakeSSH(t, p)+string(os.PathListSeparator)+os.Getenv("PATH"))
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
	// It asks for the events as the local view does (GPU 1's hang is one).
	if len(d.Events) == 0 {
		t.Errorf("no events.log lines through ssh")
	}
}

// fakeSSH writes an ssh into a directory of its own and returns the
// directory, for PATH. It drops ssh's options and the host and runs the
// remote command here (its first word, gpu-telemetry, is the binary under
// test) against p's socket; the host "nowhere" is one it cannot resolve.
func fakeSSH(t *testing.T, p *proc) string {
	dir := t.TempDir()
	script := `#!/bin/sh
while [ $# -gt 0 ]; do
	case "$1" in
	-o) shift 2 ;;
	--) shift; break ;;
	-*) shift ;;
	*) break ;;
	esac
done
if [ "$1" = nowhere ]; then
	echo "ssh: Could not resolve hostname nowhere: Name or service not known" >&2
	exit 255
fi
shift 2
exec "` + binPath + `" "$@" --socket "` + p.socketPath() + `"
`
	if err := os.WriteFile(filepath.Join(dir, "ssh"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestTopFleetInTmux (issue 40): top with two --host, through the fake
// ssh, in a real terminal: the fleet page puts the host ssh cannot reach
// first and the one with a hung GPU under it; Home, Down, Up, j, k and End
// select a host, Enter opens the selected one's view (its GPU 1 hung), q
// or Esc comes back to the page, and q there quits. With one --host, top
// is that host's view.
func TestTopFleetInTmux(t *testing.T) {
	t.Parallel()
	tmux := testutil.NeedTool(t, "tmux", "tmux")
	p := start(t, opts{scenario: "@hang"})
	p.waitForRows(0, 6, 10*time.Second)
	dir := fakeSSH(t, p)
	session := "gt-fleet-" + strconv.Itoa(os.Getpid())
	sock := t.TempDir() + "/tmux.sock"
	run := func(args ...string) string {
		out, err := exec.Command(tmux, append([]string{"-S", sock}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("tmux %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	run("new-session", "-d", "-s", session, "-x", "120", "-y", "20", "sh")
	t.Cleanup(func() { exec.Command(tmux, "-S", sock, "kill-server").Run() })
	run("send-keys", "-t", session, "PATH="+dir+":$PATH TERM=xterm-256color "+binPath+" top --host node-b --host nowhere; echo top-exited-$?", "Enter")
	var screen string
	shows := func(what string, want ...string) {
		t.Helper()
		for end := time.Now().Add(15 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			screen = run("capture-pane", "-p", "-t", session)
			missing := slices.IndexFunc(want, func(w string) bool { return !strings.Contains(screen, w) })
			if missing < 0 {
				return
			}
			if time.Now().After(end) {
				t.Fatalf("gave up waiting for %s: no %q on the screen:\n%s", what, want[missing], screen)
			}
		}
	}
	shows("the fleet page", "2 hosts", "Could not resolve hostname nowhere", "GPU 1 hung")
	lines := strings.Split(screen, "\n")
	if len(lines) < 4 || !strings.Contains(lines[2], "nowhere  NO LINK") || !strings.Contains(lines[3], "node-b   FAILING") {
		t.Fatalf("not the unreachable host first, then the one with a hung GPU:\n%s", screen)
	}
	run("send-keys", "-t", session, "Home")
	shows("the first host selected", "> nowhere")
	run("send-keys", "-t", session, "Down")
	shows("node-b selected", "> node-b")
	for _, k := range []struct{ key, host string }{{"Up", "nowhere"}, {"j", "node-b"}, {"k", "nowhere"}, {"End", "node-b"}} {
		run("send-keys", "-t", session, k.key)
		shows(k.host+" selected after "+k.key, "> "+k.host)
	}
	run("send-keys", "-t", session, "Enter")
	shows("node-b's own view", "GPU 1 HUNG", "q quit")
	run("send-keys", "-t", session, "q")
	shows("back on the fleet page", "Enter open the host's view", "> node-b")
	run("send-keys", "-t", session, "Enter")
	shows("node-b's own view again", "GPU 1 HUNG", "q quit")
	run("send-keys", "-t", session, "Escape")
	shows("back on the fleet page after Esc", "Enter open the host's view", "> node-b")
	run("send-keys", "-t", session, "q")
	shows("top to exit", "top-exited-0")
	if strings.Contains(screen, "Enter open") {
		t.Errorf("the fleet page left behind after q:\n%s", screen)
	}
	// One --host is that host's view at once.
	run("send-keys", "-t", session, "clear; PATH="+dir+":$PATH TERM=xterm-256color "+binPath+" top --host node-b; echo top-exited-again-$?", "Enter")
	shows("node-b's view", "GPU 1 HUNG", "q quit")
	run("send-keys", "-t", session, "q")
	shows("top --host to exit", "top-exited-again-0")
}
