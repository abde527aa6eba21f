package xid

import "testing"

func TestDecodeNVLink5(t *testing.T) {
	tests := []struct {
		name        string
		code        int
		text        string
		ok          bool
		unit        string
		r575        bool
		link        int
		linkDown    bool
		reason      uint32
		severity    string
		bucket      string
		investigate string
	}{
		{"link down, peer side (R570 line)", 149, "NETIR_LINK_EVT  Fatal   XC0 i0 Link 01 (0x021425c6 0x00000000 0x00000000 0x00000000 0x00000000 0x00000000)",
			true, "NETIR_LINK_EVT", false, 1, true, 0x21, "link fatal", "RESET_GPU", "INVESTIGATE_PEER_DEVICE"},
		{"link down, another peer reason", 149, "NETIR_LINK_EVT Fatal XC0 i0 Link 09 (0x025525c6 0x00000000 0x00000000 0x00000000 0x00000000 0x00000000)",
			true, "NETIR_LINK_EVT", false, 9, true, 0x25, "link fatal", "RESET_GPU", "INVESTIGATE_PEER_DEVICE"},
		{"link down by software", 149, "NETIR_LINK_EVT Fatal XC0 i0 Link 00 (0x016415c6 0x00000000)",
			true, "NETIR_LINK_EVT", false, 0, true, 0x16, "link fatal", "RESET_GPU", "INVESTIGATE_SW_USER"},
		{"link down whose immediate bucket is IGNORE is still link fatal", 149, "NETIR_LINK_EVT Fatal XC0 i0 Link 02 (0x028001c6 0x00000000)",
			true, "NETIR_LINK_EVT", false, 2, true, 0x28, "link fatal", "IGNORE", "INVESTIGATE_HOST"},
		{"link down with a reason the table lacks is link fatal", 149, "NETIR_LINK_EVT Fatal XC0 i0 Link 02 (0x03f001c6 0x00000000)",
			true, "NETIR_LINK_EVT", false, 2, true, 0x3f, "link fatal", "RESET_GPU", ""},
		{"link down, R575 layout", 149, "NETIR_LINK_DOWN Fatal XC0 i0 Link 05 (0x01000011 0x00000000 0x00000000 0x00000000 0x00000000 0x00000000 0x00000000)",
			true, "NETIR_LINK_DOWN", true, 5, true, 0x10, "link fatal", "RESET_GPU", "INVESTIGATE_SW_USER_LINK_SI"},
		{"NETIR interrupt is link fatal whatever the status", 149, "NETIR_INT Fatal XC0 i0 Link 04 (0x00000018 0x00001234)",
			true, "NETIR_INT", true, 4, false, 0, "link fatal", "RESET_GPU", "SYMPATHETIC_REPORT_SOLO"},
		{"BER event is not fatal", 149, "NETIR_BER_EVENT Nonfatal XC0 i0 Link 04 (0x00000226 0x00000002)",
			true, "NETIR_BER_EVENT", false, 4, false, 0, "non-fatal", "IGNORE", "INVESTIGATE_LINK_SI_AND_CABLES"},
		{"MFDE event fatal", 149, "NETIR_MFDE_EVENT Fatal XC0 i0 Link 04 (0x00000246 0x00000005)",
			true, "NETIR_MFDE_EVENT", false, 4, false, 0, "fatal", "RESET_GPU", "CONTACT_SUPPORT"},
		{"SAW fatal status", 144, "SAW_MVB Fatal XC0 i0 Link 03 (0x00000021 0x00000002 0x00000000 0x00000000 0x00000000 0x00000000)",
			true, "SAW_MVB", false, 3, false, 0, "fatal", "RESET_GPU", "CONTACT_SUPPORT"},
		{"SAW quiet status, R575 layout", 144, "SAW_MVB Nonfatal XC0 i0 Link 03 (0x00000001 0x00000004)",
			true, "SAW_MVB", true, 3, false, 0, "non-fatal", "IGNORE", "IGNORE"},
		{"RLW remap waits for Xid 154", 145, "RLW_REMAP Nonfatal XC1 i0 Link 07 (0x00000082 0x00000004)",
			true, "RLW_REMAP", false, 7, false, 0, "non-fatal", "XID_154_EVAL", "CHECK_NVLINK_FAILURE_FLOW"},
		{"RLW RX pipe not promoted", 145, "RLW_RXPIPE Nonfatal XC0 i0 Link 07 (0x000000c2 0x00000001)",
			true, "RLW_RXPIPE", false, 7, false, 0, "non-fatal unless promoted", "IGNORE", "CONTACT_SUPPORT"},
		{"RLW RX pipe promoted (bit 10 before R575)", 145, "RLW_RXPIPE Fatal XC0 i0 Link 07 (0x000004c2 0x00000001)",
			true, "RLW_RXPIPE", false, 7, false, 0, "fatal", "RESET_GPU", "CONTACT_SUPPORT"},
		{"RLW RX pipe promoted (bit 7 from R575)", 145, "RLW_RXPIPE Fatal XC0 i0 Link 07 (0x00000086 0x00000002)",
			true, "RLW_RXPIPE", true, 7, false, 0, "fatal", "RESET_GPU", "CONTACT_SUPPORT"},
		{"TLW RX pipe 1 fatal, R575 layout", 146, "TLW_RX_PIPE1 Fatal XC0 i0 Link 10 (0x0000000b 0x00000004)",
			true, "TLW_RX_PIPE1", true, 10, false, 0, "fatal", "RESET_GPU", "CONTACT_SUPPORT"},
		{"MSE watchdog is fatal", 150, "MSE_WATCHDOG Fatal XC0 i0 Link 00 (0x00000000 0x00000000)",
			true, "MSE_WATCHDOG", false, 0, false, 0, "fatal", "RESET_GPU", "CONTACT_SUPPORT"},
		{"MSE degraded all ones is fatal", 150, "MSE Fatal (0x00000000 0xffffffff)",
			true, "MSE", false, -1, false, 0, "fatal", "RESET_GPU", "CONTACT_SUPPORT"},
		{"bracketed registers of older drivers", 149, "NETIR_LINK_EVT Fatal XC 1 i 2 Link 01 [0x021425c6]",
			true, "NETIR_LINK_EVT", false, 1, true, 0x21, "link fatal", "RESET_GPU", "INVESTIGATE_PEER_DEVICE"},
		{"status the table lacks", 144, "SAW_MVB Fatal XC0 i0 Link 03 (0x00000021 0x00000040)", false, "", false, 0, false, 0, "", "", ""},
		{"unit bits the table lacks", 145, "RLW_XYZ Fatal (0x000003e2 0x00000001)", false, "", false, 0, false, 0, "", "", ""},
		{"no status where one is needed", 144, "SAW_MVB Fatal (0x00000021)", false, "", false, 0, false, 0, "", "", ""},
		{"no registers", 149, "NETIR_LINK_EVT Fatal XC0 i0 Link 01", false, "", false, 0, false, 0, "", "", ""},
		{"garbage registers", 149, "NETIR_LINK_EVT (zz 0x1)", false, "", false, 0, false, 0, "", "", ""},
		{"not an NVLink 5 Xid", 74, "NETIR_LINK_EVT (0x021425c6 0x0)", false, "", false, 0, false, 0, "", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, ok := DecodeNVLink5(tt.code, tt.text)
			if ok != tt.ok {
				t.Fatalf("DecodeNVLink5(%d, %q) ok = %v, want %v (%+v)", tt.code, tt.text, ok, tt.ok, d)
			}
			if !ok {
				if d != (NVLink5{}) {
					t.Errorf("not ok but returned %+v", d)
				}
				return
			}
			if d.Unit != tt.unit || d.R575 != tt.r575 || d.Link != tt.link || d.LinkDown != tt.linkDown || d.Reason != tt.reason {
				t.Errorf("got unit %q r575 %v link %d linkDown %v reason %#x; want %q %v %d %v %#x",
					d.Unit, d.R575, d.Link, d.LinkDown, d.Reason, tt.unit, tt.r575, tt.link, tt.linkDown, tt.reason)
			}
			if d.Severity != tt.severity || d.Bucket != tt.bucket || d.Investigate != tt.investigate {
				t.Errorf("got %q %q %q; want %q %q %q", d.Severity, d.Bucket, d.Investigate, tt.severity, tt.bucket, tt.investigate)
			}
		})
	}
}

// TestNVLink5LinkDownAlwaysFatal: every link-down reason NVIDIA lists, in
// both layouts, decodes as link fatal and asks for draining and a reset.
func TestNVLink5LinkDownAlwaysFatal(t *testing.T) {
	for _, u := range nvl5Units {
		if !u.byReason {
			continue
		}
		for _, row := range u.rows {
			for _, intr := range []uint32{row.key<<20 | u.v1Bits, row.key<<20 | u.v2Bits} {
				d, ok := DecodeNVLink5(149, "X Fatal Link 00 (0x"+hex32(intr)+" 0x00000000)")
				if !ok || d.Severity != "link fatal" || !d.LinkDown {
					t.Errorf("reason %#x IntrInfo %#x: %+v, %v; want link fatal", row.key, intr, d, ok)
				}
				if a := d.Action(); a[:len("Link fatal")] != "Link fatal" {
					t.Errorf("reason %#x: action %q does not start with Link fatal", row.key, a)
				}
			}
		}
	}
}

// TestNVLink5UnitsAreDistinct guards the transcription: no two units of one
// Xid share their bits in the same layout unless they share their rows too.
func TestNVLink5UnitsAreDistinct(t *testing.T) {
	for i, a := range nvl5Units {
		for _, b := range nvl5Units[i+1:] {
			if a.xid != b.xid {
				continue
			}
			if a.v2Bits == b.v2Bits && a.v2 != b.v2 {
				t.Errorf("Xid %d: %s and %s share R575 bits %#x", a.xid, a.v2, b.v2, a.v2Bits)
			}
			if a.v1Bits == b.v1Bits && a.v1 != b.v1 && a.xid != 150 {
				t.Errorf("Xid %d: %s and %s share pre-R575 bits %#x", a.xid, a.v1, b.v1, a.v1Bits)
			}
		}
		if len(a.rows) == 0 {
			t.Errorf("Xid %d %s has no rows", a.xid, a.v1)
		}
	}
}
