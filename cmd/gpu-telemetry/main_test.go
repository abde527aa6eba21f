package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/internal/counters"
	"github.com/gpu-telemetry/gpu-telemetry/internal/testutil"
	"github.com/gpu-telemetry/gpu-telemetry/live"
	"github.com/gpu-telemetry/gpu-telemetry/live/control"
)

func TestIntervalParsing(t *testing.T) {
	cases := []struct {
		in   string
		want time.Duration
		err  bool
	}{
		{"0.1", 100 * time.Millisecond, false},
		{"1", time.Second, false},
		{"100ms", 100 * time.Millisecond, false},
		{"1m30s", 90 * time.Second, false},
		{" 2.5 ", 2500 * time.Millisecond, false},
		{"fast", 0, true},
		{"", 0, true},
		{"NaN", 0, true},
		{"1e300", 0, true},
	}
	for _, c := range cases {
		var iv Interval
		err := iv.UnmarshalText([]byte(c.in))
		if (err != nil) != c.err || (!c.err && time.Duration(iv) != c.want) {
			t.Errorf("%q: got %v, %v; want %v, err=%v", c.in, time.Duration(iv), err, c.want, c.err)
		}
	}
}

// TestRunExitCodes: bad input is one line and exit 2, before anything is
// written or created: the log dir a refused run was given is never made.
func TestRunExitCodes(t *testing.T) {
	// Never touch the system's log dir, lock file or socket from a test.
	dir := t.TempDir()
	logs := filepath.Join(dir, "logs")
	gone := filepath.Join(dir, "nonexistent", "dir") // the socket's and the lock file's, made by no case
	safe := func(args []string, stdout, stderr io.Writer) int {
		return run(append([]string{"--log-dir", logs, "--lock-file", dir + "/lock", "--socket", dir + "/control.sock"}, args...), stdout, stderr)
	}
	file := filepath.Join(dir, "a-file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	// bind failed with "invalid argument" and exit 1, after the log dir was made
	long := filepath.Join(dir, strings.Repeat("s", 100)+".sock")
	checkCLI(t, safe, []cliCase{
		{"help", []string{"--help"}, 0, "--interval=100ms", ""},
		{"version", []string{"--version"}, 0, "gpu-telemetry ", ""},
		{"zero interval", []string{"--interval", "0"}, 2, "", "--interval 0s: must be > 0"},
		{"negative interval", []string{"--interval", "-1"}, 2, "", "gpu-telemetry: --interval -1s: must be > 0 and at most 1h"},
		{"negative interval joined", []string{"--interval=-0.5"}, 2, "", "--interval -500ms: must be > 0"},
		{"interval over an hour", []string{"--interval", "61m"}, 2, "", "--interval 1h1m0s"},
		{"bad interval", []string{"--interval", "soon"}, 2, "", `--interval: "soon" is neither seconds (0.1) nor a duration (100ms)`},
		{"interval without a value", []string{"--interval"}, 2, "", "--interval"},
		{"negative deadline", []string{"--deadline", "-1s"}, 2, "", "--deadline -1s: must be between 0 (automatic) and 1h"},
		{"spike threshold", []string{"--spike-threshold", "101"}, 2, "", "--spike-threshold 101"},
		{"negative spike threshold", []string{"--spike-threshold", "-3"}, 2, "", "--spike-threshold"},
		{"retention", []string{"--retention-days", "0"}, 2, "", "--retention-days 0"},
		{"negative expected GPUs", []string{"--expect-gpus", "-1"}, 2, "", "gpu-telemetry: --expect-gpus -1: must be between 0 and 1024"},
		{"too many expected GPUs", []string{"--expect-gpus", "100000"}, 2, "", "--expect-gpus 100000: must be between 0 and 1024"},
		{"expected GPUs not a number", []string{"--expect-gpus", "eight"}, 2, "", "--expect-gpus"},
		{"host with a space", []string{"--host", "gpu node"}, 2, "", `--host "gpu node": must be 1-253 letters`},
		{"fsync", []string{"--fsync-interval", "0"}, 2, "", "--fsync-interval"},
		{"follow-ups", []string{"--follow-ups", "10s,-1s"}, 2, "", "--follow-ups"},
		{"empty gpu selector", []string{"--gpu", "0,,1"}, 2, "", "--gpu: empty GPU selector"},
		{"log level", []string{"--log-level", "chatty"}, 2, "", "--log-level"},
		{"unknown flag", []string{"--fan-curve"}, 2, "", "--fan-curve"},
		{"metrics address without a port", []string{"--metrics-listen", "127.0.0.1"}, 2, "", "--metrics-listen 127.0.0.1: "},
		{"metrics port not a number", []string{"--metrics-listen", "127.0.0.1:http9"}, 2, "", "--metrics-listen 127.0.0.1:http9: port"},
		{"web config without metrics", []string{"--web.config.file", "/etc/web.yml"}, 2, "", "--web.config.file: needs --metrics-listen"},
		{"no workload without metrics", []string{"--metrics-no-workload"}, 2, "", "gpu-telemetry: --metrics-no-workload: needs --metrics-listen"},
		{"log dir under a file", []string{"--log-dir", filepath.Join(file, "logs")}, 2, "", "--log-dir " + filepath.Join(file, "logs") + ": not a directory"},
		{"socket group that does not exist", []string{"--socket-group", "nosuchgroup"}, 2, "", "gpu-telemetry: --socket-group nosuchgroup: no such group"},
		{"web config that does not exist", []string{"--metrics-listen", "127.0.0.1:0", "--web.config.file", "/nonexistent.yml"}, 2, "",
			"gpu-telemetry: --web.config.file /nonexistent.yml: open /nonexistent.yml: no such file or directory"},
		{"socket in a directory that does not exist", []string{"--socket", gone + "/x.sock"}, 2, "",
			"gpu-telemetry: --socket " + gone + "/x.sock: directory " + gone + " does not exist"},
		{"socket in a file", []string{"--socket", filepath.Join(file, "x.sock")}, 2, "", "--socket " + filepath.Join(file, "x.sock") + ": " + file + " is not a directory"},
		{"socket path too long for a unix socket", []string{"--socket", long}, 2, "",
			"gpu-telemetry: --socket " + long + ": " + strconv.Itoa(len(long)) + " bytes long; a unix socket path may be at most " + strconv.Itoa(control.MaxPath) + " here"},
		{"lock file in a directory that does not exist", []string{"--lock-file", gone + "/x.pid"}, 2, "",
			"gpu-telemetry: --lock-file " + gone + "/x.pid: directory " + gone + " does not exist"},
	})
	if _, err := os.Stat(logs); err == nil {
		t.Errorf("a run refused for bad input created its log dir %s", logs)
	}
	if _, err := os.Stat(filepath.Dir(gone)); err == nil {
		t.Errorf("a run refused for bad input created %s", filepath.Dir(gone))
	}
}

func TestHelpShowsDefaults(t *testing.T) {
	var b bytes.Buffer
	run([]string{"--help"}, &b, io.Discard)
	help := strings.Join(strings.Fields(b.String()), " ") // undo line wrapping
	for _, d := range []string{"Default: 100ms", "Default: /var/log/gpu-telemetry", "Default: 15", "Default: /run/gpu-telemetry.pid",
		"Default: 14", "Default: 500", "Default: /dev/kmsg", "Default: 10s,60s,300s"} {
		if !strings.Contains(help, d) {
			t.Errorf("--help lacks %q", d)
		}
	}
}

func TestLockContention(t *testing.T) {
	path := t.TempDir() + "/lock"
	l, err := takeLock("--lock-file", path)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Unlock()
	_, err = takeLock("--lock-file", path)
	if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "pid ") {
		t.Errorf("second lock: %v", err)
	}
}

// TestLockNeverThroughALink: a link at the lock path (planted to have root
// write its PID into a file of the system) is refused, and its target is
// left as it was.
func TestLockNeverThroughALink(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lock")
	planted := testutil.PlantLink(t, path, "root's file\n", false)
	if l, err := takeLock("--lock-file", path); err == nil {
		l.Unlock()
		t.Errorf("took a lock through a link")
	}
	planted.Check(t)
}

// TestUntrustedDirsRefused: a log dir, socket directory or lock file
// directory that others can write, or with a link where the daemon writes
// by name, is bad input (one line, exit 2) and nothing is written there.
func TestUntrustedDirsRefused(t *testing.T) {
	dir := t.TempDir()
	open := filepath.Join(dir, "open")
	if err := os.Mkdir(open, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(open, 0o777); err != nil {
		t.Fatal(err)
	}
	linked := filepath.Join(dir, "linked")
	if err := os.Mkdir(linked, 0o755); err != nil {
		t.Fatal(err)
	}
	planted := testutil.PlantLink(t, filepath.Join(linked, "events.log"), "root's file\n", false)
	safe := func(args []string, stdout, stderr io.Writer) int {
		return run(append([]string{"--log-dir", filepath.Join(dir, "logs"), "--lock-file", dir + "/lock", "--socket", dir + "/control.sock"}, args...), stdout, stderr)
	}
	checkCLI(t, safe, []cliCase{
		{"world-writable log dir", []string{"--log-dir", open}, 2, "", "gpu-telemetry: --log-dir " + open + ": " + open + " is writable by every user (mode 0777)"},
		{"log dir to be made in a world-writable dir", []string{"--log-dir", open + "/logs"}, 2, "", "--log-dir " + open + "/logs: " + open + " is writable by every user"},
		{"socket in a world-writable dir", []string{"--socket", open + "/x.sock"}, 2, "", "gpu-telemetry: --socket " + open + "/x.sock: " + open + " is writable by every user"},
		{"lock file in a world-writable dir", []string{"--lock-file", open + "/x.pid"}, 2, "", "gpu-telemetry: --lock-file " + open + "/x.pid: " + open + " is writable by every user"},
		{"events.log a link", []string{"--log-dir", linked}, 2, "", "gpu-telemetry: --log-dir " + linked + ": " + linked + "/events.log is a symbolic link"},
	})
	if names := testutil.Entries(t, open); len(names) != 0 {
		t.Errorf("refused runs wrote %q in %s", names, open)
	}
	planted.Check(t)
}

// TestLockFileInTheLogDirByAnotherPath: --lock-file naming the log dir's
// own lock file by another spelling (relative, through a link) is one lock,
// not a second logger; another logger on the same log dir is still refused.
func TestLockFileInTheLogDirByAnotherPath(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "logs")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(dir, filepath.Join(root, "link")); err != nil {
		t.Fatal(err)
	}
	for _, lockFile := range []string{
		filepath.Join(dir, logDirLock),
		filepath.Join(root, "link", logDirLock),
		filepath.Join(dir, ".", logDirLock),
	} {
		unlock, _, err := takeLocks(lockFile, dir)
		if err != nil {
			t.Fatalf("--lock-file %s --log-dir %s: %v", lockFile, dir, err)
		}
		_, _, err = takeLocks(filepath.Join(root, "other.pid"), dir)
		if err == nil || !strings.Contains(err.Error(), "--log-dir") {
			t.Errorf("a second logger on %s with another --lock-file: %v, want refused by the --log-dir lock", dir, err)
		}
		unlock()
	}
}

// TestMetricsPortTakenCarriesOn: a --metrics-listen address that cannot be
// bound at run time (in use here; EAFNOSUPPORT under a unit without AF_INET)
// is logged once and counted, and the listeners start anyway: the logger
// must not stop recording for want of a scrape endpoint.
func TestMetricsPortTakenCarriesOn(t *testing.T) {
	held := testutil.TakenAddr(t)
	var lb bytes.Buffer
	log := slog.New(slog.NewTextHandler(&lb, nil))
	cli := &CLI{Socket: "none", MetricsListen: held}
	board := live.NewBoard(nil, func() live.Host { return live.Host{} })
	reg := counters.New()
	stop, err := startListeners(context.Background(), cli, board, nil, log, reg)
	if err != nil {
		t.Fatalf("a taken metrics port stopped the start: %v", err)
	}
	stop()
	if n := counter(reg, "listen_failures"); n != 1 {
		t.Errorf("listen_failures %d, want 1", n)
	}
	if n := strings.Count(lb.String(), "cannot listen"); n != 1 {
		t.Errorf("%d log lines about the taken port, want 1:\n%s", n, lb.String())
	}
}
