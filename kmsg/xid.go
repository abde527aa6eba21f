package kmsg

import (
	"strconv"
	"strings"

	"github.com/gpu-telemetry/gpu-telemetry/reading"
	"github.com/gpu-telemetry/gpu-telemetry/xid"
)

// XidReport is one Xid line of the NVIDIA kernel driver, taken apart.
type XidReport struct {
	Bus         reading.PCIAddr // the GPU's PCI address (function 0: the line carries none)
	Code        int             // the Xid number
	PID         int             // process the driver blamed; 0 when absent or '<unknown>'
	ProcessName string          // its name; empty when absent or <unknown>
	Text        string          // the rest of the message, after the code and pid/name

	// RecoveryAction is, for Xid 154 only, the new recovery action: the hex
	// value after "to" (0 none, 1 GPU reset, 2 node reboot, 3 drain P2P,
	// 4 drain and reset; see xid.RecoveryActionName). Absent when the line
	// carries no such value.
	RecoveryAction reading.Opt[uint64]
}

// xidMarker is what the driver prints before every Xid. The "NVRM: " part
// keeps NVSwitch "SXid (" lines and other drivers' text from matching.
const xidMarker = "NVRM: Xid ("

// ParseXid picks an Xid report out of a kernel log message. It understands
// the forms the driver has printed over the years:
//
//	NVRM: Xid (PCI:0000:4b:00): 119, pid=1234, name=python3, Timeout after 45s ...
//	NVRM: Xid (PCI:0000:01:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.
//	NVRM: Xid (PCI:0000:01:00): 154, GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset Required)
//	NVRM: Xid (PCI:0000:3b:00 GPU-I:05 GPU-CI:02): 31, pid=..., name=..., ...
//	NVRM: Xid (0000:01:00): 13, 0005 00000000 ...
//
// The marker may sit anywhere in msg (a syslog or dmesg prefix is fine), or
// msg may start with "Xid (". ok is false when msg is not an Xid line or its
// address or code is malformed.
//
// For Xid 154 the new action is read by xid.ParseRecovery: the hex number
// after the last "to", never the words in parentheses, which differ between
// drivers ("GPU Reset Required", "PF FLR").
func ParseXid(msg string) (XidReport, bool) {
	var s string
	if i := strings.Index(msg, xidMarker); i >= 0 {
		s = msg[i+len(xidMarker):]
	} else if strings.HasPrefix(msg, "Xid (") {
		s = msg[len("Xid ("):]
	} else {
		return XidReport{}, false
	}

	closing := strings.IndexByte(s, ')')
	if closing < 0 {
		return XidReport{}, false
	}
	attr := strings.Fields(s[:closing])
	if len(attr) == 0 {
		return XidReport{}, false
	}
	bus, err := reading.ParsePCIAddr(attr[0])
	if err != nil {
		return XidReport{}, false
	}
	// MIG attribution (GPU-I:05, GPU-CI:02) may follow the address.
	for _, a := range attr[1:] {
		if !strings.HasPrefix(a, "GPU-") {
			return XidReport{}, false
		}
	}

	s = s[closing+1:]
	if !strings.HasPrefix(s, ":") {
		return XidReport{}, false
	}
	s = strings.TrimLeft(s[1:], " ")
	n := 0
	for n < len(s) && s[n] >= '0' && s[n] <= '9' {
		n++
	}
	// Xid numbers are small; the bound keeps Atoi far from overflow.
	if n == 0 || n > 6 {
		return XidReport{}, false
	}
	code, _ := strconv.Atoi(s[:n])
	s = s[n:]
	if s != "" && s[0] != ',' {
		return XidReport{}, false
	}
	s = strings.TrimLeft(strings.TrimPrefix(s, ","), " ")

	r := XidReport{Bus: bus, Code: code}
	if pid, found := strings.CutPrefix(s, "pid="); found {
		pid, s, _ = strings.Cut(pid, ",")
		r.PID = parsePID(pid)
		s = strings.TrimLeft(s, " ")
	}
	if name, found := strings.CutPrefix(s, "name="); found {
		name, s, _ = strings.Cut(name, ", ")
		if name != "<unknown>" {
			r.ProcessName = name
		}
	}
	r.Text = strings.TrimRight(s, " \t\r\n")
	if code == xid.RecoveryXid {
		if v, _, ok := xid.ParseRecovery(r.Text); ok {
			r.RecoveryAction = reading.Some(v)
		}
	}
	return r, true
}

// parsePID reads the pid the driver printed: a number, or '<unknown>' (with
// or without the quotes) when no channel could be blamed. Anything that is
// not a positive number reads as 0.
func parsePID(s string) int {
	s = strings.Trim(strings.TrimSpace(s), "'")
	if s == "" || len(s) > 10 {
		return 0
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0
		}
	}
	pid, err := strconv.Atoi(s)
	if err != nil || pid < 0 {
		return 0
	}
	return pid
}
