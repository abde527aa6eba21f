package main

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// TestHelpAndVersionOnStdout: help and the version go to stdout with exit
// 0 (so that `gpu-telemetry --help | less` shows them), for the logger and
// every command, by --help, -h and `gpu-telemetry help COMMAND` alike.
func TestHelpAndVersionOnStdout(t *testing.T) {
	cases := [][]string{{"--help"}, {"-h"}, {"help"}, {"--version"}, {"help", "help"}, {"help", "--help"}, {"help", "-h"}}
	for _, c := range commands {
		if c.name != "help" {
			cases = append(cases, []string{c.name, "--help"}, []string{"help", c.name})
		}
	}
	for _, args := range cases {
		var out, errb bytes.Buffer
		if code := run(args, &out, &errb); code != 0 || out.Len() == 0 || errb.Len() != 0 {
			t.Errorf("gpu-telemetry %s: exit %d, %d bytes on stdout, stderr %q; want 0, the text on stdout, nothing on stderr",
				strings.Join(args, " "), code, out.Len(), errb.String())
		}
	}
	var a, b bytes.Buffer
	run([]string{"status", "--help"}, &a, &b)
	run([]string{"help", "status"}, &b, &b)
	if a.String() != b.String() {
		t.Errorf("`help status` differs from `status --help`")
	}
}

// TestTopHelpListsEveryCommand: the top-level help names every command,
// each of which runs (an unknown one is refused with the list).
func TestTopHelpListsEveryCommand(t *testing.T) {
	var out bytes.Buffer
	run([]string{"--help"}, &out, &out)
	for _, name := range []string{"status", "check", "top", "ack", "report", "xid", "probe", "fan-guard", "help"} {
		if !strings.Contains(out.String(), "\n  "+name+" ") {
			t.Errorf("the top-level help does not list %q:\n%s", name, out.String())
		}
		if _, ok := lookupCommand(name); !ok {
			t.Errorf("%q is not dispatched", name)
		}
	}
	checkCLI(t, run, []cliCase{
		{"unknown command", []string{"stauts"}, 2, "", `gpu-telemetry: unknown command "stauts" (commands: ` + commandNames() + ";"},
		{"help for an unknown command", []string{"help", "stat"}, 2, "", `gpu-telemetry help: unknown command "stat" (commands: ` + commandNames() + ")"},
		{"help for two commands", []string{"help", "status", "top"}, 2, "", "gpu-telemetry help: one command at most"},
	})
}

// TestStatusJSONFalseIsText: --json=false (the last word wins) asks for
// the text answer, so an error is not a JSON document.
func TestStatusJSONFalseIsText(t *testing.T) {
	gone := filepath.Join(t.TempDir(), "control.sock")
	for _, args := range [][]string{
		{"--json=false", "--socket", gone},
		{"--json", "--json=false", "--socket", gone},
	} {
		var out, errb bytes.Buffer
		runStatus(args, &out, &errb)
		if strings.Contains(out.String(), `"error"`) {
			t.Errorf("status %s: stdout %q is a JSON document; want text", strings.Join(args, " "), out.String())
		}
	}
}

// TestStatusJSONIsAlwaysJSON: `status --json` prints one JSON document
// whatever happens, so that a script can parse it: an error object (with
// the schema version) when the daemon cannot be asked or a flag is bad.
func TestStatusJSONIsAlwaysJSON(t *testing.T) {
	gone := filepath.Join(t.TempDir(), "control.sock")
	for _, args := range [][]string{
		{"--json", "--socket", gone},
		{"--socket", gone, "--json"},
		{"--json", "--socket", "none"},
		{"--json", "--bogus"},
		{"--json", "extra"},
		{"--json=true", "--bogus"},
		{"--socket", gone, "--json=1"},
		{"--json=false", "--json", "--socket", gone},
	} {
		var out, errb bytes.Buffer
		code := runStatus(args, &out, &errb)
		var doc struct {
			SchemaVersion int    `json:"schema_version"`
			Error         string `json:"error"`
		}
		if err := json.Unmarshal(out.Bytes(), &doc); err != nil || doc.Error == "" || doc.SchemaVersion == 0 || code != 3 {
			t.Errorf("status %s: exit %d, stdout %q (%v); want 3 and a JSON error document", strings.Join(args, " "), code, out.String(), err)
		}
		if !strings.Contains(errb.String(), strings.TrimPrefix(doc.Error, "gpu-telemetry status: ")) {
			t.Errorf("status %s: stderr %q does not say what the document says (%q)", strings.Join(args, " "), errb.String(), doc.Error)
		}
	}
}
