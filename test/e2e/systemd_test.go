package e2e

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestSystemdNotify runs the logger as systemd would (Type=notify with a
// watchdog) and checks READY after the first row of every GPU, WATCHDOG pings
// every half WatchdogSec (never closer, never as far apart as the timeout),
// and STOPPING at shutdown; at a 10 s interval too (one ping per tick let
// systemd kill the logger at intervals of half WatchdogSec and more).
func TestSystemdNotify(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"default interval", nil},
		{"interval longer than WatchdogSec", []string{"--interval", "10"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			testSystemdNotify(t, tc.args)
		})
	}
}

func testSystemdNotify(t *testing.T, args []string) {
	sock := filepath.Join(t.TempDir(), "notify.sock")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var mu sync.Mutex
	var msgs []string
	var pings []time.Time
	var dir string
	rowsAtReady := []int{-1, -1}
	go func() {
		buf := make([]byte, 4096)
		for {
			n, _, err := conn.ReadFromUnix(buf)
			if err != nil {
				return
			}
			at := time.Now()
			mu.Lock()
			msg := string(buf[:n])
			msgs = append(msgs, msg)
			if strings.Contains(msg, "WATCHDOG=1") {
				pings = append(pings, at)
			}
			if strings.Contains(msg, "READY=1") && dir != "" {
				// Counted as READY arrives: rows written later cannot hide
				// an early READY.
				for gpu := range rowsAtReady {
					m, _ := filepath.Glob(filepath.Join(dir, "gpu"+strconv.Itoa(gpu)+"-*deep-*.csv"))
					if len(m) > 0 {
						rowsAtReady[gpu] = rowCount(m[0])
					} else {
						rowsAtReady[gpu] = 0
					}
				}
			}
			mu.Unlock()
		}
	}()
	got := func() string {
		mu.Lock()
		defer mu.Unlock()
		return strings.Join(msgs, "\n")
	}
	// WATCHDOG_USEC=2s: pings are due every second. WATCHDOG_PID must be
	// ours, which we only know after start: leave it unset (then any PID is
	// fine).
	const watchdogSec = 2 * time.Second
	logDir := t.TempDir()
	mu.Lock()
	dir = logDir
	mu.Unlock()
	p := start(t, opts{scenario: "gpus 2\n", dir: logDir, args: args,
		env: []string{"NOTIFY_SOCKET=" + sock, "WATCHDOG_USEC=" + strconv.FormatInt(watchdogSec.Microseconds(), 10)}})
	p.waitFor("READY=1", 15*time.Second, func() bool { return strings.Contains(got(), "READY=1") })
	mu.Lock()
	if rowsAtReady[0] < 1 || rowsAtReady[1] < 1 {
		t.Errorf("READY came before every GPU's first row: rows per GPU at READY %v", rowsAtReady)
	}
	mu.Unlock()
	p.waitFor("6 watchdog pings", 30*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(pings) >= 6
	})
	p.stop()
	mu.Lock()
	for i := 1; i < len(pings); i++ {
		// The logger pings once half the timeout has passed; the socket
		// adds scheduling jitter, hence 0.45 s, not 0.5 s.
		if d := pings[i].Sub(pings[i-1]); d < watchdogSec*45/100 || d >= watchdogSec {
			t.Errorf("pings %d and %d are %v apart; want about WatchdogSec/2 = %v, always below %v", i-1, i, d, watchdogSec/2, watchdogSec)
		}
	}
	mu.Unlock()
	time.Sleep(100 * time.Millisecond)
	if !strings.Contains(got(), "STOPPING=1") {
		t.Errorf("no STOPPING=1; got:\n%s", got())
	}
}

// TestUnitFileVerifies runs systemd-analyze verify on the shipped unit where
// systemd is installed, alone and with each shipped drop-in and both (the
// verify loads gpu-telemetry.service.d/ next to the unit). Where
// systemd-analyze can rate a unit offline, it also checks the network each
// combination may use: the unit alone no IP sockets and no IP traffic, a
// drop-in with a TCP listener IP sockets and loopback allowed, the unix
// sockets always.
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
	for _, dropIns := range [][]string{nil, {"atop.conf"}, {"metrics.conf"}, {"atop.conf", "metrics.conf"}, {"fan-guard.conf"}} {
		t.Run(strings.Join(append([]string{"unit"}, dropIns...), "+"), func(t *testing.T) {
			dir := t.TempDir()
			// Point ExecStart at the binary under test so verify can check it exists.
			text := strings.ReplaceAll(string(unit), "/usr/local/bin/gpu-telemetry", binPath)
			path := filepath.Join(dir, "gpu-telemetry.service")
			if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
			for _, d := range dropIns {
				b, err := os.ReadFile(filepath.Join(repo, "deploy", "gpu-telemetry.service.d", d))
				if err != nil {
					t.Fatal(err)
				}
				if err := os.MkdirAll(path+".d", 0o755); err != nil {
					t.Fatal(err)
				}
				// fan-guard.conf's ExecStopPost= names the binary as ExecStart= does.
				b = []byte(strings.ReplaceAll(string(b), "/usr/local/bin/gpu-telemetry", binPath))
				if err := os.WriteFile(filepath.Join(path+".d", d), b, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			// verify runs man for the unit's Documentation=man:gpu-telemetry(8):
			// give it the page the binary prints (the package installs it).
			man := filepath.Join(dir, "man", "man8")
			if err := os.MkdirAll(man, 0o755); err != nil {
				t.Fatal(err)
			}
			page, err := exec.Command(binPath, "--help-man").Output()
			if err != nil {
				t.Fatalf("gpu-telemetry --help-man: %v", err)
			}
			if err := os.WriteFile(filepath.Join(man, "gpu-telemetry.8"), page, 0o644); err != nil {
				t.Fatal(err)
			}
			verify := exec.Command(sa, "verify", path)
			verify.Env = append(os.Environ(), "MANPATH="+filepath.Dir(man))
			out, err := verify.CombinedOutput()
			if err != nil || len(out) > 0 {
				t.Errorf("systemd-analyze verify: %v\n%s", err, out)
			}
			sec, err := exec.Command(sa, "security", "--offline=true", path).CombinedOutput()
			if err != nil {
				t.Logf("no offline security rating (%v): network rules not checked\n%s", err, sec)
				return
			}
			tcp := slices.Contains(dropIns, "atop.conf") || slices.Contains(dropIns, "metrics.conf")
			for _, c := range []struct {
				setting string
				allowed bool // ✗ in the rating: the service may use it
			}{
				{"RestrictAddressFamilies=~AF_UNIX ", true},
				{"RestrictAddressFamilies=~AF_(INET|INET6) ", tcp},
				{"RestrictAddressFamilies=~AF_NETLINK ", false},
				{"RestrictAddressFamilies=~AF_PACKET ", false},
			} {
				mark := map[bool]string{true: "✗ ", false: "✓ "}[c.allowed]
				if !strings.Contains(string(sec), mark+c.setting) {
					t.Errorf("want %q in the security rating:\n%s", mark+c.setting, sec)
				}
			}
			// IPAddressDeny=any alone: no IP traffic at all (✓); the drop-ins
			// allow loopback only.
			ip := regexp.MustCompile(`✓ IPAddressDeny=`)
			if tcp {
				ip = regexp.MustCompile(`IPAddressDeny= +Service defines IP address allow list with only localhost entries`)
			}
			if !ip.Match(sec) {
				t.Errorf("want %q in the security rating:\n%s", ip, sec)
			}
		})
	}
}
