package e2e

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestSystemdNotify runs the logger as systemd would (Type=notify with a
// watchdog) and checks READY after the first rows, WATCHDOG pings, and
// STOPPING at shutdown.
func TestSystemdNotify(t *testing.T) {
	t.Parallel()
	sock := filepath.Join(t.TempDir(), "notify.sock")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var mu sync.Mutex
	var msgs []string
	go func() {
		buf := make([]byte, 4096)
		for {
			n, _, err := conn.ReadFromUnix(buf)
			if err != nil {
				return
			}
			mu.Lock()
			msgs = append(msgs, string(buf[:n]))
			mu.Unlock()
		}
	}()
	got := func() string {
		mu.Lock()
		defer mu.Unlock()
		return strings.Join(msgs, "\n")
	}
	// WATCHDOG_USEC=1s: pings are due every 500 ms. WATCHDOG_PID must be ours,
	// which we only know after start: leave it unset (then any PID is fine).
	p := start(t, opts{env: []string{"NOTIFY_SOCKET=" + sock, "WATCHDOG_USEC=1000000"}})
	p.waitFor("READY=1", 15*time.Second, func() bool { return strings.Contains(got(), "READY=1") })
	if rowCount(p.csvFile(0)) < 1 {
		t.Errorf("READY before the first row was written")
	}
	p.waitFor("watchdog pings", 15*time.Second, func() bool { return strings.Count(got(), "WATCHDOG=1") >= 3 })
	p.stop()
	time.Sleep(100 * time.Millisecond)
	if !strings.Contains(got(), "STOPPING=1") {
		t.Errorf("no STOPPING=1; got:\n%s", got())
	}
}

// TestUnitFileVerifies runs systemd-analyze verify on the shipped unit where
// systemd is installed.
func TestUnitFileVerifies(t *testing.T) {
	t.Parallel()
	sa, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze not installed")
	}
	unit, err := os.ReadFile(filepath.Join(repo, "deploy", "gpu-telemetry.service"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	// Point ExecStart at the binary under test so verify can check it exists.
	text := strings.ReplaceAll(string(unit), "/usr/local/bin/gpu-telemetry", binPath)
	path := filepath.Join(dir, "gpu-telemetry.service")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(sa, "verify", path).CombinedOutput()
	if err != nil {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
}
