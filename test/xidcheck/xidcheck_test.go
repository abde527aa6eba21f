// Package xidcheck holds the tests of xidcheck.sh, the step of make test
// that fails when the tests left a new "NVRM: Xid" line in the host's
// kernel log. The script is run on a stand-in dmesg ($DMESG) that prints
// the logs of each case.
package xidcheck

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// xidcheck runs xidcheck.sh verb with dmesg printing log (or, when fail is
// set, failing with it on stderr) and returns its exit code and output.
func xidcheck(t *testing.T, dir, verb, log string, fail, ci bool) (int, string, string) {
	t.Helper()
	out := filepath.Join(dir, "dmesg.out")
	if err := os.WriteFile(out, []byte(log), 0o644); err != nil {
		t.Fatal(err)
	}
	stub := "#!/bin/sh\ncat " + out + "\n"
	if fail {
		stub = "#!/bin/sh\ncat " + out + " >&2\nexit 1\n"
	}
	dmesg := filepath.Join(dir, "dmesg")
	if err := os.WriteFile(dmesg, []byte(stub), 0o755); err != nil {
		t.Fatal(err)
	}
	ciEnv := "CI="
	if ci {
		ciEnv = "CI=true"
	}
	cmd := exec.Command("sh", "xidcheck.sh", verb, filepath.Join(dir, "state"))
	cmd.Env = append(os.Environ(), "DMESG="+dmesg, ciEnv)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if _, ok := err.(*exec.ExitError); err != nil && !ok {
		t.Fatal(err)
	}
	return cmd.ProcessState.ExitCode(), stdout.String(), stderr.String()
}

const (
	before = "[    1.000000] Linux version 6.1\n" +
		"[   20.500000] NVRM: Xid (PCI:0000:01:00): 79, pid=1, name=x, GPU has fallen off the bus.\n" +
		"[   30.000000] gpu-telemetry-kmsg-test-1-2 one\n"
	newXid  = "[   40.250000] NVRM: Xid (PCI:0000:01:00): 13, pid=1, name=gpu-telemetry-replay-3-4, Graphics Exception\n"
	standIn = "[   40.500000] gpu-telemetry-replay-3-4 stands in for driver code 79\n"
)

// xidCase is a row of TestXidcheck: the logs dmesg prints at the mark and
// at the check (or, fail, its error on both), CI=true or not, the exit
// codes wanted and what the check says.
type xidCase struct {
	name       string
	mark, now  string
	fail, ci   bool
	markCode   int
	code       int
	want, lack []string // in the check's output (stdout and stderr)
}

// TestXidcheck: the check fails on, and names, an "NVRM: Xid" line logged
// after the mark, whatever the ring dropped meanwhile, and on none before
// it; an unreadable log is said in one line and skipped, except under
// CI=true as root.
func TestXidcheck(t *testing.T) {
	tests := []xidCase{
		{name: "no new Xid: the earlier runs' one is not counted", mark: before, now: before + standIn,
			want: []string{"no NVRM: Xid line logged", "1 from before them"}},
		{name: "a new Xid fails, named", mark: before, now: before + standIn + newXid, code: 1,
			want: []string{"1 NVRM: Xid line(s) logged", "name=gpu-telemetry-replay-3-4, Graphics Exception"},
			lack: []string{"GPU has fallen off the bus"}},
		{name: "the ring dropped the records before the mark: the new Xid still fails", mark: before, now: newXid, code: 1,
			want: []string{"ring dropped records", "1 NVRM: Xid line(s) logged"}},
		{name: "the ring dropped records, no new Xid", mark: before, now: standIn,
			want: []string{"ring dropped records", "no NVRM: Xid line logged", "1 from before them"}},
		{name: "an empty log at the mark", mark: "", now: newXid, code: 1,
			want: []string{"1 NVRM: Xid line(s) logged"}, lack: []string{"ring dropped"}},
		{name: "dmesg unreadable: said in one line, skipped", fail: true,
			mark: "dmesg: read kernel buffer failed: Operation not permitted\n"},
	}
	if os.Getuid() == 0 {
		tests = append(tests, xidCase{name: "dmesg unreadable under CI=true as root fails", fail: true, ci: true, markCode: 1,
			mark: "dmesg: read kernel buffer failed: Operation not permitted\n"})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			code, stdout, stderr := xidcheck(t, dir, "mark", tt.mark, tt.fail, tt.ci)
			if code != tt.markCode {
				t.Fatalf("mark: exit %d, want %d\n%s%s", code, tt.markCode, stdout, stderr)
			}
			if tt.fail {
				// One line says why; the check after it is skipped quietly.
				if lines := strings.Count(stderr, "\n"); lines != 1 || !strings.Contains(stderr, "Operation not permitted") {
					t.Errorf("mark of an unreadable log said %q, want one line with dmesg's reason", stderr)
				}
				if tt.ci {
					return
				}
			}
			code, stdout, stderr = xidcheck(t, dir, "check", tt.now, tt.fail, tt.ci)
			out := stdout + stderr
			if code != tt.code {
				t.Errorf("check: exit %d, want %d\n%s", code, tt.code, out)
			}
			for _, w := range tt.want {
				if !strings.Contains(out, w) {
					t.Errorf("check's output lacks %q:\n%s", w, out)
				}
			}
			for _, l := range tt.lack {
				if strings.Contains(out, l) {
					t.Errorf("check's output holds %q:\n%s", l, out)
				}
			}
			if tt.fail && out != "" {
				t.Errorf("check of an unreadable log said %q again", out)
			}
		})
	}
}
