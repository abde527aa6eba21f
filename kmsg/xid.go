package kmsg

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/reading"
	"github.com/gpu-telemetry/gpu-telemetry/xid"
)

// XidReport is one Xid line of the NVIDIA kernel driver, taken apart: the
// GPU and the code, and what the line says after the code (reading.XidDetail:
// the process blamed, the text, Xid 154's new recovery action), which the
// line's events carry on (Events).
type XidReport struct {
	Bus  reading.PCIAddr // the GPU's PCI address (function 0: the line carries none)
	Code int             // the Xid number
	reading.XidDetail
}

// xidMarker is what the driver prints before every Xid. The "NVRM: " part
// keeps NVSwitch "SXid (" lines and other drivers' text from matching.
const xidMarker = "NVRM: Xid ("

// ErrNotXid is ParseDriverXid's error for a message that is not an Xid line
// of the NVIDIA driver.
var ErrNotXid = errors.New("not an Xid line of the NVIDIA driver")

// ParseDriverXid takes apart an Xid line as the driver logs it: the message
// must start with "NVRM: Xid (", the driver's prefix. Text that only quotes
// one (a program name in the kernel's execve warning, a USB device's product
// string, a syslog line) is not one: it returns ErrNotXid, as for any other
// message. For a driver's Xid line whose address or code cannot be read (no
// PCI domain, a bus of three digits, a code of more than 6 digits) the error
// says what is wrong: the line is lost, and the caller counts it. The forms
// read are ParseXid's.
//
// The message alone does not make a line the driver's: only a record the
// kernel logged (Record.FromKernel) can be one.
func ParseDriverXid(msg string) (XidReport, error) {
	s, ok := strings.CutPrefix(msg, xidMarker)
	if !ok || isTaskLine(msg) {
		return XidReport{}, ErrNotXid
	}
	return parseXidBody(s)
}

// ParseXid picks an Xid report out of text pasted by a person (gpu-telemetry
// xid); the daemon reads the kernel log with ParseDriverXid instead. It
// understands the forms the driver has printed over the years:
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
// For Xid 154 the new action is read by xid.Detail (xid.ParseRecovery): the
// hex number after the last "to"; the words in parentheses, which differ
// between drivers ("GPU Reset Required", "PF FLR"), are kept as the driver's
// but never decide.
func ParseXid(msg string) (XidReport, bool) {
	var s string
	if i := strings.Index(msg, xidMarker); i >= 0 {
		s = msg[i+len(xidMarker):]
	} else if strings.HasPrefix(msg, "Xid (") {
		s = msg[len("Xid ("):]
	} else {
		return XidReport{}, false
	}
	x, err := parseXidBody(s)
	return x, err == nil
}

// parseXidBody takes apart what follows "Xid (": the address, the code and
// the detail. The error says which part is malformed.
func parseXidBody(s string) (XidReport, error) {
	closing := strings.IndexByte(s, ')')
	if closing < 0 {
		return XidReport{}, errors.New("no ')' after the address")
	}
	attr := strings.Fields(s[:closing])
	if len(attr) == 0 {
		return XidReport{}, errors.New("no address")
	}
	bus, err := reading.ParsePCIAddr(attr[0])
	if err != nil {
		return XidReport{}, err
	}
	// MIG attribution (GPU-I:05, GPU-CI:02) may follow the address.
	for _, a := range attr[1:] {
		if !strings.HasPrefix(a, "GPU-") {
			return XidReport{}, fmt.Errorf("unknown attribute %s after the address", quote([]byte(a)))
		}
	}

	s = s[closing+1:]
	if !strings.HasPrefix(s, ":") {
		return XidReport{}, errors.New("no ':' after the address")
	}
	s = strings.TrimLeft(s[1:], " ")
	n := 0
	for n < len(s) && s[n] >= '0' && s[n] <= '9' {
		n++
	}
	// Xid numbers are small; the bound keeps Atoi far from overflow.
	if n == 0 || n > maxXidDigits || (n < len(s) && s[n] != ',') {
		printed, _, _ := strings.Cut(s, ",")
		return XidReport{}, fmt.Errorf("code %s is not a number of 1 to %d digits", quote([]byte(printed)), maxXidDigits)
	}
	code, _ := strconv.Atoi(s[:n])
	s = s[n:]
	s = strings.TrimLeft(strings.TrimPrefix(s, ","), " ")

	var pid int
	var name string
	if p, found := strings.CutPrefix(s, "pid="); found {
		p, s, _ = strings.Cut(p, ",")
		pid = parsePID(p)
		s = strings.TrimLeft(s, " ")
	}
	if n, found := strings.CutPrefix(s, "name="); found {
		n, s, _ = strings.Cut(n, ", ")
		if n != "<unknown>" {
			name = n
		}
	}
	r := XidReport{Bus: bus, Code: code, XidDetail: xid.Detail(code, strings.TrimRight(s, " \t\r\n"))}
	r.PID, r.ProcessName = pid, name
	return r, nil
}

// maxXidDigits bounds an Xid code: the driver's are at most 3 digits.
const maxXidDigits = 6

// Events are the GPU events of the Xid line x was parsed from, read in rec
// at now: the Xid, and after an Xid 154 that names the new recovery action
// the recovery action event. Each carries the line (Text, KernelTime,
// Backlog) and x's detail (reading.Event.Xid), so that nothing parses the
// message again. GPU is -1 and BusID the line's: the caller knows the
// monitored GPUs.
func (x XidReport) Events(rec Record, now time.Time) []reading.Event {
	e := reading.Event{Time: now, GPU: -1, BusID: x.Bus.String(), Kind: reading.EventXid, Source: reading.SourceKmsg,
		Data: uint64(x.Code), Text: rec.Message, Xid: x.XidDetail, KernelTime: rec.Time, Backlog: rec.Backlog}
	v, ok := x.RecoveryAction.Get()
	if !ok || x.Code != xid.RecoveryXid {
		return []reading.Event{e}
	}
	r := e
	r.Kind, r.Data = reading.EventRecovery, v
	return []reading.Event{e, r}
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
