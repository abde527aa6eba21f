package fleet

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/internal/testutil"
)

// systemdTool is one of systemd's programs under /lib/systemd (not on
// PATH), or the test is skipped (fails under CI) without it.
func systemdTool(t *testing.T, name, pkg string) string {
	t.Helper()
	for _, dir := range []string{"/lib/systemd", "/usr/lib/systemd"} {
		if p := filepath.Join(dir, name); fileExists(p) {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s missing under CI (apt-get install %s)", name, pkg)
	}
	t.Skipf("%s not installed (Debian package %s)", name, pkg)
	return ""
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// TestEventsShippedByJournalUpload runs the journal's own shipping path end
// to end on loopback: the logger runs under a systemd-journald of its own
// (in a private mount namespace, so the host's journal is not touched) with
// its stderr a journal stream, as under systemd; systemd-journal-upload
// sends that journal over HTTP to systemd-journal-remote, which writes a
// journal file. The Xids played on the simulated GPU arrive there with
// their structured fields: MESSAGE_ID of the Xid type, GPU_EVENT, XID,
// XID_NAME, GPU_UUID, GPU_INDEX, GPU_BUS_ID, the host, the incident and
// the snapshot, at priority critical.
func TestEventsShippedByJournalUpload(t *testing.T) {
	journald := systemdTool(t, "systemd-journald", "systemd")
	remote := systemdTool(t, "systemd-journal-remote", "systemd-journal-remote")
	upload := systemdTool(t, "systemd-journal-upload", "systemd-journal-remote")
	journalctl := needTool(t, "journalctl", "systemd")
	systemdCat := needTool(t, "systemd-cat", "systemd")
	unshare := needTool(t, "unshare", "util-linux")
	if out, err := exec.Command(unshare, "-m", "--propagation", "private", "true").CombinedOutput(); err != nil {
		t.Skipf("no mount namespace for a journald of the test's own here (%v: %s)", err, bytes.TrimSpace(out))
	}
	built(t)
	work := t.TempDir()

	// The receiving side: journal-remote on a loopback port the kernel
	// picked, handed over as a socket (as systemd's socket activation does).
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	lf, err := ln.(*net.TCPListener).File()
	if err != nil {
		t.Fatal(err)
	}
	received := filepath.Join(work, "remote.journal")
	rcmd := exec.Command("sh", "-c", `export LISTEN_PID=$$ LISTEN_FDS=1; exec "$0" --listen-http=-3 --split-mode=none -o "$1"`, remote, received)
	rcmd.ExtraFiles = []*os.File{lf}
	rlog := &testutil.LogBuf{}
	rcmd.Stdout, rcmd.Stderr = rlog, rlog
	if err := rcmd.Start(); err != nil {
		t.Fatal(err)
	}
	lf.Close()
	ln.Close()
	t.Cleanup(func() {
		rcmd.Process.Kill()
		rcmd.Wait()
		if t.Failed() {
			t.Logf("systemd-journal-remote:\n%s", tail(rlog.String(), 4000))
		}
	})

	// The host's side, in a mount namespace of its own: a journald on
	// tmpfs, the logger under it, then journal-upload once the Xids are in.
	logDir := filepath.Join(work, "log")
	kmsg := filepath.Join(work, "kmsg")
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(kmsg, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(work, "host.sh")
	if err := os.WriteFile(script, []byte(`set -eu
mount -t tmpfs none /run/systemd 2>/dev/null || { mkdir -p /run/systemd && mount -t tmpfs none /run/systemd; }
mkdir -p /run/log /run/systemd/journal
mount -t tmpfs none /run/log
if [ -d /var/log/journal ]; then mount -t tmpfs none /var/log/journal; fi
"$JOURNALD" & jpid=$!
trap 'kill $lpid $jpid 2>/dev/null || true' EXIT
i=0; while [ ! -S /run/systemd/journal/stdout ]; do i=$((i+1)); [ $i -lt 100 ] || { echo "journald never listened"; exit 1; }; sleep 0.1; done
# As under systemd: stderr a journal stream, JOURNAL_STREAM naming it.
"$SYSTEMD_CAT" -t gpu-telemetry sh -c 'JOURNAL_STREAM=$(stat -L -c %d:%i /proc/self/fd/2) exec "$@"' sh "$LOGGER" \
  --log-dir "$LOGDIR" --lock-file "$WORK/lock" --socket "$WORK/control.sock" --kmsg "$KMSG" --follow-ups 2s --host "$HOST" & lpid=$!
i=0; until "$JOURNALCTL" -D /run/log/journal -q GPU_EVENT=Xid XID=79 | grep -q .; do
  i=$((i+1)); [ $i -lt 300 ] || { echo "no Xid 79 in the journal"; "$JOURNALCTL" -D /run/log/journal -q -n 50; exit 1; }; sleep 0.1
done
"$UPLOAD" --url="$URL" -D /run/log/journal --follow=no
`), 0o644); err != nil {
		t.Fatal(err)
	}
	hcmd := exec.Command(unshare, "-m", "--propagation", "private", "sh", script)
	hcmd.Env = append(os.Environ(), "JOURNALD="+journald, "SYSTEMD_CAT="+systemdCat, "JOURNALCTL="+journalctl, "UPLOAD="+upload,
		"LOGGER="+binary, "LOGDIR="+logDir, "WORK="+work, "KMSG="+kmsg, "HOST="+testHost, "URL=http://"+ln.Addr().String(),
		"LD_LIBRARY_PATH="+filepath.Dir(testutil.SimLib(simDir, false)),
		"SIMNVML_SCENARIO="+filepath.Join(repo, "test", "fleet", "testdata", "ship.scn"), "SIMNVML_KMSG="+kmsg, "TZ=UTC")
	done := make(chan error, 1)
	var hout bytes.Buffer
	hcmd.Stdout, hcmd.Stderr = &hout, &hout
	if err := hcmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- hcmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("the host's side: %v\n%s", err, tail(hout.String(), 4000))
		}
	case <-time.After(90 * time.Second):
		hcmd.Process.Kill()
		t.Fatalf("the host's side did not finish:\n%s", tail(hout.String(), 4000))
	}

	// What journal-remote wrote, read back by journalctl.
	var entries []map[string]any
	if !waitFor(20*time.Second, func() bool {
		out, err := exec.Command(journalctl, "--file", received, "-o", "json", "SYSLOG_IDENTIFIER=gpu-telemetry", "GPU_EVENT=Xid").Output()
		if err != nil {
			return false
		}
		entries = entries[:0]
		sc := bufio.NewScanner(bytes.NewReader(out))
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var e map[string]any
			if json.Unmarshal(sc.Bytes(), &e) == nil {
				entries = append(entries, e)
			}
		}
		return len(entries) >= 2
	}) {
		t.Fatalf("the Xid entries never reached journal-remote's file (%d); host side:\n%s", len(entries), tail(hout.String(), 4000))
	}
	sum := sha256.Sum256([]byte("gpu-telemetry events.log Xid"))
	xidID := hex.EncodeToString(sum[:16])
	got := map[string]bool{}
	for _, e := range entries {
		f := func(k string) string { s, _ := e[k].(string); return s }
		got[f("XID")] = true
		for k, want := range map[string]string{"MESSAGE_ID": xidID, "GPU_INDEX": "0", "GPU_TELEMETRY_HOST": testHost, "GPU_EVENT": "Xid"} {
			if f(k) != want {
				t.Errorf("Xid %s entry: %s=%q, want %q", f("XID"), k, f(k), want)
			}
		}
		for _, k := range []string{"GPU_UUID", "GPU_BUS_ID", "XID_NAME", "GPU_EVENT_LEVEL", "GPU_TELEMETRY_SOURCE", "MESSAGE"} {
			if f(k) == "" {
				t.Errorf("Xid %s entry lacks %s: %v", f("XID"), k, e)
			}
		}
		if f("GPU_TELEMETRY_DUPLICATE_OF") == "" && (f("PRIORITY") != "2" || f("GPU_TELEMETRY_INCIDENT") == "" || !strings.HasPrefix(f("GPU_TELEMETRY_SNAPSHOT"), filepath.Join(logDir, "crashes")+"/")) {
			t.Errorf("Xid %s entry: priority %s, incident %q, snapshot %q; want critical, with the incident and its crash snapshot",
				f("XID"), f("PRIORITY"), f("GPU_TELEMETRY_INCIDENT"), f("GPU_TELEMETRY_SNAPSHOT"))
		}
	}
	if !got["48"] || !got["79"] {
		t.Errorf("journal-remote got Xids %v, want 48 and 79", got)
	}
	t.Logf("%d Xid entries crossed systemd-journal-upload to systemd-journal-remote", len(entries))
}
