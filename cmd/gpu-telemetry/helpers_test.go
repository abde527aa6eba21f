package main

import (
	"bytes"
	"io"
	"strings"
	"testing"
)

// cliCase is one run of a command: its arguments, the exit status it must
// return, and text its stdout and stderr must contain ("" for anything). A
// failing case whose stderr text runs into "\nusage:" expects the command's
// usage text after its one-line error; no other failing run may print more
// than one line.
type cliCase struct {
	name   string
	args   []string
	code   int
	stdout string
	stderr string
}

// checkCLI runs each case through run (a command's run function), each a
// subtest. Beyond the case's own checks it holds every command to the rule
// for bad input: a run that fails prints nothing to stdout unless the case
// expects it, and says why on one line of stderr, all of its stderr unless
// the case expects a usage text to follow.
func checkCLI(t *testing.T, run func(args []string, stdout, stderr io.Writer) int, cases []cliCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			if got := run(tc.args, &out, &errb); got != tc.code {
				t.Errorf("exit %d, want %d (stderr %q)", got, tc.code, errb.String())
			}
			if !strings.Contains(out.String(), tc.stdout) {
				t.Errorf("stdout %q lacks %q", out.String(), tc.stdout)
			}
			if !strings.Contains(errb.String(), tc.stderr) {
				t.Errorf("stderr %q lacks %q", errb.String(), tc.stderr)
			}
			if tc.code == 0 {
				return
			}
			if tc.stdout == "" && out.Len() != 0 {
				t.Errorf("failed run printed to stdout: %q", out.String())
			}
			why := errb.String()
			if strings.Contains(tc.stderr, "\nusage:") {
				why, _, _ = strings.Cut(why, "\nusage:")
			}
			if strings.Contains(strings.TrimSpace(why), "\n") {
				t.Errorf("error is more than one line: %q", errb.String())
			}
		})
	}
}
