package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestXidSubcommand(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		code       int
		stdoutHas  string
		stderrHas  string
		stdoutNone bool
	}{
		{"known code", []string{"46"}, 0, "Xid 46: GPU stopped processing", "", false},
		{"decodes the text after the code", []string{"149", "NETIR_LINK_EVT", "Fatal", "XC0", "i0", "Link", "01", "(0x021425c6", "0x00000000)"}, 0, "link fatal", "", false},
		{"whole kernel line", []string{"[ 12.5] NVRM: Xid (PCI:0000:4b:00): 154, GPU recovery action changed from 0x0 (None) to 0x3 (Drain P2P)"}, 0, "query the GPU's recovery action again", "", false},
		{"unknown code", []string{"999"}, 1, "unknown Xid", "", false},
		{"list", []string{"--list"}, 0, "172  none given", "", false},
		{"help", []string{"--help"}, 0, "usage: gpu-telemetry xid", "", false},
		{"no argument", nil, 2, "", "needs an Xid number", true},
		{"garbage", []string{"abc"}, 2, "", "neither an Xid number", true},
		{"negative", []string{"-5"}, 2, "", "not an Xid number", true},
		{"list with extra", []string{"--list", "3"}, 2, "", "takes no arguments", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			if got := runXid(tt.args, &out, &errb); got != tt.code {
				t.Errorf("exit %d, want %d (stderr %q)", got, tt.code, errb.String())
			}
			if !strings.Contains(out.String(), tt.stdoutHas) {
				t.Errorf("stdout %q lacks %q", out.String(), tt.stdoutHas)
			}
			if !strings.Contains(errb.String(), tt.stderrHas) {
				t.Errorf("stderr %q lacks %q", errb.String(), tt.stderrHas)
			}
			if tt.stdoutNone && out.Len() != 0 {
				t.Errorf("bad input printed to stdout: %q", out.String())
			}
			if tt.stderrHas != "" && strings.Count(strings.TrimSpace(strings.SplitN(errb.String(), "usage:", 2)[0]), "\n") != 0 {
				t.Errorf("error is more than one line: %q", errb.String())
			}
		})
	}
}
