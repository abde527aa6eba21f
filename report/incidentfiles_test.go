package report

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/internal/testutil"
)

// TestHeadlineAndFiles: the report names the incident by the headline of its
// last snapshot (its worst events), says what it began with, and lists every
// snapshot and follow-up of it, not those of another GPU or incident.
func TestHeadlineAndFiles(t *testing.T) {
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS("testdata/incident")); err != nil {
		t.Fatal(err)
	}
	crashes := filepath.Join(dir, "crashes")
	headline := "GPU 0: GSP RPC Timeout (Xid 119), then GPU has fallen off the bus (Xid 79); started with Internal micro-controller halt (Xid 62)"
	for name, body := range map[string]string{
		"crash-20261130-190819.623-gpu0.log": "=== GPU CRASH DETECTED ===\nTime: 2026-11-30T19:08:19.623Z\nGPU: 0 x (y)\nReason: Xid 119: GSP RPC Timeout (kmsg)\n" +
			"Headline: GPU 0: GSP RPC Timeout (Xid 119); started with Internal micro-controller halt (Xid 62)\n\n",
		"crash-20261130-190821.623-gpu0.log": "=== GPU CRASH DETECTED ===\nTime: 2026-11-30T19:08:21.623Z\nGPU: 0 x (y)\nReason: Xid 79: GPU has fallen off the bus (kmsg)\n" +
			"Headline: " + headline + "\n\n",
		"crash-20261130-190822.700-gpu1.log": "=== GPU CRASH DETECTED ===\nTime: 2026-11-30T19:08:22.700Z\nGPU: 1 x (y)\nReason: Xid 13\n\n",
		"crash-20261130-170000.000-gpu0.log": "=== GPU CRASH DETECTED ===\nTime: 2026-11-30T17:00:00.000Z\nGPU: 0 x (y)\nReason: Xid 13\n\n",
	} {
		if err := os.WriteFile(filepath.Join(crashes, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	rep, err := Build(Options{Dir: dir, GPU: -1, Before: 60 * time.Second, After: 10 * time.Second, Loc: time.UTC})
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := rep.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	text := b.String()
	testutil.Contains(t, "report", text,
		"Incident: 2026-11-30 19:08:17.623 UTC, "+headline+"\n",
		"Began:    Xid 62: Internal micro-controller halt (nvml)\n",
		"Snapshot:  crashes/crash-20261130-190817.623-gpu0.log (19:08:17.623, Xid 62",
		"Snapshot:  crashes/crash-20261130-190819.623-gpu0.log (19:08:19.623, Xid 119",
		"Snapshot:  crashes/crash-20261130-190821.623-gpu0.log (19:08:21.623, Xid 79",
		"Follow-up: crashes/crash-20261130-190817.623-gpu0+5s.log",
	)
	for _, not := range []string{"gpu1.log", "170000.000"} {
		if strings.Contains(text, not) {
			t.Errorf("report names %s, of another GPU or incident:\n%s", not, text)
		}
	}
	if i, j := strings.Index(text, "190821.623-gpu0.log"), strings.Index(text, "+5s.log"); i > j {
		t.Errorf("the +5s follow-up is listed before the snapshot 4 s after the incident's start")
	}
	b.Reset()
	if err := rep.WriteHTML(&b); err != nil {
		t.Fatal(err)
	}
	testutil.Contains(t, "HTML", b.String(), "<h1>gpu-telemetry report: "+strings.ReplaceAll(headline, "'", "&#39;"), "<h2>Snapshots of this incident</h2>")
}

// The report's headline carries the repair action the incident's last
// crash snapshot names.
func TestReportShowsTheAction(t *testing.T) {
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS("testdata/incident")); err != nil {
		t.Fatal(err)
	}
	crashes := filepath.Join(dir, "crashes")
	for name, body := range map[string]string{
		"crash-20261130-190819.623-gpu0.log": "=== GPU CRASH DETECTED ===\nTime: 2026-11-30T19:08:19.623Z\nGPU: 0 x (y)\nReason: Xid 119: GSP RPC Timeout (kmsg)\n" +
			"Action: reset_gpu: Xid 119 GSP RPC Timeout: NVIDIA's resolution RESET_GPU\n\n",
		"crash-20261130-190821.623-gpu0.log": "=== GPU CRASH DETECTED ===\nTime: 2026-11-30T19:08:21.623Z\nGPU: 0 x (y)\nReason: Xid 79: GPU has fallen off the bus (kmsg)\n" +
			"Action: reboot: Xid 79 GPU has fallen off the bus: NVIDIA's resolution RESTART_BM\n\n",
	} {
		if err := os.WriteFile(filepath.Join(crashes, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	rep, err := Build(Options{Dir: dir, GPU: -1, Before: 60 * time.Second, After: 10 * time.Second, Loc: time.UTC})
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := rep.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	testutil.Contains(t, "report", b.String(), "\nAction:   reboot: Xid 79 GPU has fallen off the bus: NVIDIA's resolution RESTART_BM\n")
	b.Reset()
	if err := rep.WriteHTML(&b); err != nil {
		t.Fatal(err)
	}
	testutil.Contains(t, "HTML", b.String(), "<p>Repair action: reboot: Xid 79 GPU has fallen off the bus: NVIDIA&#39;s resolution RESTART_BM</p>")
}
