package main

import (
	"bytes"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

func TestReportCommand(t *testing.T) {
	incident := filepath.Join("..", "..", "report", "testdata", "incident")
	html := filepath.Join(t.TempDir(), "r.html")
	nope := filepath.Join(t.TempDir(), "crashes", "nope.log")
	tmp := t.TempDir()
	fifo := filepath.Join(tmp, "crash-20261130-190817.623-gpu0.log")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	checkCLI(t, runReport, []cliCase{
		{"recorded incident", []string{"--log-dir", incident, "--last", "--html", html}, 0,
			"Xid 62: Internal micro-controller halt", "wrote " + html},
		{"one GPU", []string{"--log-dir", incident, "--gpu", "1", "--at", "2026-11-30T19:08:17.623Z"}, 0,
			"gpu1-deep-2026-11-30.csv: 170 rows", ""},
		{"missing dir", []string{"--log-dir", "/nonexistent/gpu-telemetry"}, 1, "", "log dir /nonexistent/gpu-telemetry does not exist"},
		{"bad --at", []string{"--log-dir", incident, "--at", "yesterday"}, 2, "", `--at "yesterday": want RFC 3339`},
		{"two choices", []string{"--log-dir", incident, "--last", "--at", "2026-11-30 19:08:17"}, 2, "", "can't be used together"},
		{"negative window", []string{"--log-dir", incident, "--before=-5s"}, 2, "", "must not be negative"},
		{"incident file that does not exist", []string{"--log-dir", incident, "--incident", nope}, 2, "",
			"gpu-telemetry report: --incident " + nope + ": the file does not exist"},
		// Read, /dev/zero took 11 GB until killed and a FIFO waited forever.
		{"incident that is a device", []string{"--log-dir", incident, "--incident", "/dev/zero"}, 2, "",
			"gpu-telemetry report: --incident /dev/zero: not a regular file (a crash snapshot is one)"},
		{"incident that is a FIFO", []string{"--log-dir", incident, "--incident", fifo}, 2, "",
			"gpu-telemetry report: --incident " + fifo + ": not a regular file (a crash snapshot is one)"},
		{"incident that is a directory", []string{"--log-dir", incident, "--incident", tmp}, 2, "",
			"gpu-telemetry report: --incident " + tmp + ": not a regular file (a crash snapshot is one)"},
	})
	if b, err := os.ReadFile(html); err != nil || !bytes.Contains(b, []byte("<svg")) {
		t.Errorf("HTML not written: %v", err)
	}
}
