package top

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/live"
)

// fakeSSH is an ssh for PATH: it records its arguments in calls, drops its
// options and the host, checks the command is the watch, and plays
// <host>.jsonl (then waits to be killed, as a live stream does, or exits
// with <host>.exit when there is one); a host without a file is one ssh
// cannot resolve.
const fakeSSH = `#!/bin/sh
dir=$(dirname "$0")
echo "$@" >> "$dir/calls"
while [ $# -gt 0 ]; do
	case "$1" in
	-o) shift 2 ;;
	--) shift; break ;;
	-*) shift ;;
	*) break ;;
	esac
done
host=$1
shift
if [ "$*" != "gpu-telemetry status --json --watch --history 10m --events 200" ]; then
	echo "fake ssh: unexpected command: $*" >&2
	exit 2
fi
if [ ! -f "$dir/$host.jsonl" ]; then
	echo "ssh: Could not resolve hostname $host: Name or service not known" >&2
	exit 255
fi
cat "$dir/$host.jsonl"
if [ -f "$dir/$host.exit" ]; then
	exit $(cat "$dir/$host.exit")
fi
exec sleep 600
`

// withFakeSSH puts fakeSSH first in PATH and returns its directory, where
// the hosts' streams go (stream).
func withFakeSSH(t *testing.T) string {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "ssh"), []byte(fakeSSH), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	return dir
}

// stream writes host's stream of docs for fakeSSH.
func stream(t *testing.T, dir, host string, docs ...live.Doc) {
	t.Helper()
	var b []byte
	for _, d := range docs {
		line, err := json.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		b = append(append(b, line...), '\n')
	}
	if err := os.WriteFile(filepath.Join(dir, host+".jsonl"), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// running runs r until the test ends, and says when Run returned.
func running(t *testing.T, r *Remote) (stop func() time.Duration) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { r.Run(ctx); close(done) }()
	stop = func() time.Duration {
		start := time.Now()
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("Run did not return after its context ended")
		}
		return time.Since(start)
	}
	t.Cleanup(func() { stop() })
	return stop
}

func answered(t *testing.T, r *Remote) {
	t.Helper()
	select {
	case <-r.Answered():
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: no document nor failure", r.Host())
	}
}

// TestRemoteThroughFakeSSH: top --host's source runs ssh from PATH in
// batch mode with the watch command, and Fetch gives the latest document
// of the stream, as the local socket's would; quitting kills ssh.
func TestRemoteThroughFakeSSH(t *testing.T) {
	dir := withFakeSSH(t)
	first, second := hostDoc("node-a", 2, ""), hostDoc("node-a", 2, "hung")
	second.Time = second.Time.Add(time.Second)
	stream(t, dir, "node-a", first, second)
	r := SSH("node-a")
	stop := running(t, r)
	answered(t, r)
	var d live.Doc
	waitUntilTrue(t, "the second document", func() bool {
		var err error
		d, err = r.Fetch()
		return err == nil && d.Time.Equal(second.Time)
	})
	if d.Host.Name != "node-a" || len(d.GPUs) != 2 || d.GPUs[1].State != "hung" {
		t.Errorf("document %+v", d.Host)
	}
	calls, _ := os.ReadFile(filepath.Join(dir, "calls"))
	if want := "-T -o BatchMode=yes -- node-a gpu-telemetry status --json --watch --history 10m --events 200\n"; string(calls) != want {
		t.Errorf("ssh ran with %q, want %q", calls, want)
	}
	if took := stop(); took > 3*time.Second {
		t.Errorf("quitting took %v", took)
	}
}

// TestRemoteSaysWhyAndRetries: a host ssh cannot reach is Fetch's error,
// with ssh's own words, and ssh is run again after the backoff; a daemon
// that is not running there is said in its own words (the error line of
// status --json --watch).
func TestRemoteSaysWhyAndRetries(t *testing.T) {
	dir := withFakeSSH(t)
	r := SSH("nowhere")
	r.minWait, r.maxWait = 10*time.Millisecond, 20*time.Millisecond
	running(t, r)
	answered(t, r)
	_, err := r.Fetch()
	if err == nil || !strings.Contains(err.Error(), "nowhere: ssh: Could not resolve hostname nowhere: Name or service not known (ssh exit status 255); again in") {
		t.Errorf("Fetch: %v", err)
	}
	waitUntilTrue(t, "ssh run again", func() bool {
		calls, _ := os.ReadFile(filepath.Join(dir, "calls"))
		return strings.Count(string(calls), "\n") >= 3
	})

	os.WriteFile(filepath.Join(dir, "nodaemon.jsonl"), []byte(`{"schema_version":2,"error":"cannot ask the daemon at /run/gpu-telemetry/control.sock: no socket there"}`+"\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "nodaemon.exit"), []byte("3"), 0o644)
	r = SSH("nodaemon")
	running(t, r)
	answered(t, r)
	if _, err := r.Fetch(); err == nil || !strings.Contains(err.Error(), "nodaemon: cannot ask the daemon at /run/gpu-telemetry/control.sock: no socket there; again in") {
		t.Errorf("Fetch: %v", err)
	}
}

// TestFleetOverFakeSSH: three hosts through the fake ssh (one healthy,
// one with a hung GPU, one unreachable) on the fleet page, the worst first.
func TestFleetOverFakeSSH(t *testing.T) {
	dir := withFakeSSH(t)
	stream(t, dir, "node-ok", hostDoc("node-ok", 8, ""))
	stream(t, dir, "node-hung", hostDoc("node-hung", 8, "hung"))
	var hosts []HostState
	for _, h := range []string{"node-ok", "node-hung", "node-gone"} {
		r := SSH(h)
		running(t, r)
		answered(t, r)
		d, at, err := r.Latest()
		hosts = append(hosts, HostState{Name: r.Host(), Doc: d, At: at, Err: err})
	}
	fs := RenderFleet(hosts, time.Now(), 120, 10, "")
	if got := strings.Join(fs.Order, " "); got != "node-gone node-hung node-ok" {
		t.Errorf("order %s", got)
	}
	page := strings.Join(fs.Lines, "\n")
	for _, w := range []string{"> node-gone  NO LINK", "node-hung  FAILING     7/8", "GPU 1 hung", "node-ok    ok          8/8", "Could not resolve hostname node-gone"} {
		if !strings.Contains(page, w) {
			t.Errorf("page lacks %q:\n%s", w, page)
		}
	}
}

func TestCheckHost(t *testing.T) {
	for _, ok := range []string{"gpu-node-07", "user@host", "10.0.0.7", "[::1]", "host.example.com", "fe80::1", "my_user@gpu_07"} {
		if err := CheckHost(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	// $ ` ; | and the like: a ProxyCommand with %h hands the name to
	// /bin/sh (OpenSSH before 9.6).
	for _, bad := range []string{"", "-oProxyCommand=sh", "a b", "a\tb", "a\nb", "a\x00b", "a\x7fb",
		"$(touch x)", "a`id`", "a;id", "a|id", "a&id", "a>x", "'a'", "\"a\"", "a\\b", "a*", "h/x", "h%h", "hôte"} {
		if err := CheckHost(bad); err == nil {
			t.Errorf("%q taken", bad)
		}
	}
}

// waitUntilTrue polls cond for up to 10 s.
func waitUntilTrue(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}
