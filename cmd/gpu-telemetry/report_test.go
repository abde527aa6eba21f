package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestReportCommand(t *testing.T) {
	incident := filepath.Join("..", "..", "report", "testdata", "incident")
	html := filepath.Join(t.TempDir(), "r.html")
	for _, tc := range []struct {
		name   string
		args   []string
		code   int
		stdout string
		stderr string
	}{
		{"recorded incident", []string{"report", "--log-dir", incident, "--last", "--html", html}, 0,
			"Xid 62: Internal micro-controller halt", "wrote " + html},
		{"one GPU", []string{"report", "--log-dir", incident, "--gpu", "1", "--at", "2026-11-30T19:08:17.623Z"}, 0,
			"gpu1-deep-2026-11-30.csv: 170 rows", ""},
		{"missing dir", []string{"report", "--log-dir", "/nonexistent/gpu-telemetry"}, 1, "", "log dir /nonexistent/gpu-telemetry does not exist"},
		{"bad --at", []string{"report", "--log-dir", incident, "--at", "yesterday"}, 2, "", `--at "yesterday": want RFC 3339`},
		{"two choices", []string{"report", "--log-dir", incident, "--last", "--at", "2026-11-30 19:08:17"}, 2, "", "can't be used together"},
		{"negative window", []string{"report", "--log-dir", incident, "--before=-5s"}, 2, "", "must not be negative"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			code := runReport(tc.args[1:], &out, &errb)
			if code != tc.code {
				t.Fatalf("exit %d, want %d; stderr: %s", code, tc.code, errb.String())
			}
			if !strings.Contains(out.String(), tc.stdout) {
				t.Errorf("stdout lacks %q:\n%s", tc.stdout, out.String())
			}
			if !strings.Contains(errb.String(), tc.stderr) {
				t.Errorf("stderr lacks %q:\n%s", tc.stderr, errb.String())
			}
		})
	}
	if b, err := os.ReadFile(html); err != nil || !bytes.Contains(b, []byte("<svg")) {
		t.Errorf("HTML not written: %v", err)
	}
}
