package main

import "testing"

func TestXidSubcommand(t *testing.T) {
	checkCLI(t, runXid, []cliCase{
		{"known code", []string{"46"}, 0, "Xid 46: GPU stopped processing", ""},
		{"decodes the text after the code", []string{"149", "NETIR_LINK_EVT", "Fatal", "XC0", "i0", "Link", "01", "(0x021425c6", "0x00000000)"}, 0, "link fatal", ""},
		{"whole kernel line", []string{"[ 12.5] NVRM: Xid (PCI:0000:4b:00): 154, GPU recovery action changed from 0x0 (None) to 0x3 (Drain P2P)"}, 0, "query the GPU's recovery action again", ""},
		{"unknown code", []string{"999"}, 1, "unknown Xid", ""},
		{"list", []string{"--list"}, 0, "172  none given", ""},
		{"help", []string{"--help"}, 0, "usage: gpu-telemetry xid", ""},
		{"no argument", nil, 2, "", "needs an Xid number, a kernel log line or --list\nusage: gpu-telemetry xid"},
		{"garbage", []string{"abc"}, 2, "", "neither an Xid number"},
		{"negative", []string{"-5"}, 2, "", "not an Xid number"},
		{"list with extra", []string{"--list", "3"}, 2, "", "takes no arguments"},
	})
}
