package reading

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// PCIAddr is a PCI address: domain, bus, device and function. It is the one
// type every part uses for a GPU's address, so that a kernel Xid line, NVML's
// bus id and the address handed to lspci are compared as numbers, never as
// differently spelled strings. The zero value is 0000:00:00.0. PCIAddr is
// comparable and can be a map key.
type PCIAddr struct {
	Domain   uint32
	Bus      uint8
	Device   uint8 // 0..0x1f
	Function uint8 // 0..7
}

// Limits of the PCI address fields (PCI Local Bus spec: 5 device bits, 3
// function bits).
const (
	maxPCIDevice   = 0x1f
	maxPCIFunction = 7
)

// ErrPCIAddr is what ParsePCIAddr's errors wrap.
var ErrPCIAddr = errors.New("not a PCI address")

// ParsePCIAddr parses every spelling of a PCI address the daemon meets:
//
//	00000000:4B:00.0   NVML (8-digit domain, upper case, function)
//	0000:4b:00.0       lspci -D, sysfs
//	PCI:0000:4b:00     the NVIDIA kernel driver (Xid lines; no function)
//	0000:4b:00         older drivers, without "PCI:"
//
// The domain has 4 to 8 hex digits, bus and device exactly 2, the function
// one digit 0..7; hex digits in either case. An address without a function
// (the kernel's) is function 0: a GPU is function 0 of its device. An address
// without a domain ("4b:00.0") is refused rather than guessed, since on a
// multi-domain host a guess could name the wrong GPU. Nothing else is
// accepted, not even surrounding spaces, so a parsed address printed back can
// safely reach a command line.
func ParsePCIAddr(s string) (PCIAddr, error) {
	in := s
	if len(s) >= 4 && strings.EqualFold(s[:4], "PCI:") {
		s = s[4:]
	}
	bad := func(why string) (PCIAddr, error) {
		return PCIAddr{}, fmt.Errorf("%w: %q: %s (want a form like 00000000:4B:00.0, 0000:4b:00.0 or PCI:0000:4b:00)", ErrPCIAddr, in, why)
	}
	var a PCIAddr
	// domain ':' bus ':' device [ '.' function ]
	i := 0
	for i < len(s) && s[i] != ':' {
		i++
	}
	dom, ok := parseHexN(s[:i], 4, 8)
	if !ok {
		return bad("domain must be 4 to 8 hex digits")
	}
	a.Domain = uint32(dom)
	s = s[i:]
	if len(s) < 6 || s[0] != ':' || s[3] != ':' {
		return bad("bus and device must be two hex digits each")
	}
	bus, ok1 := parseHexN(s[1:3], 2, 2)
	dev, ok2 := parseHexN(s[4:6], 2, 2)
	if !ok1 || !ok2 {
		return bad("bus and device must be two hex digits each")
	}
	if dev > maxPCIDevice {
		return bad("device is above 0x1f")
	}
	a.Bus, a.Device = uint8(bus), uint8(dev)
	s = s[6:]
	switch {
	case s == "":
	case len(s) == 2 && s[0] == '.' && s[1] >= '0' && s[1] <= '0'+maxPCIFunction:
		a.Function = s[1] - '0'
	default:
		return bad("expected nothing or a function .0 to .7 after the device")
	}
	return a, nil
}

// parseHexN parses between minDigits and maxDigits hex digits, nothing else
// (no sign, no prefix).
func parseHexN(s string, minDigits, maxDigits int) (uint64, bool) {
	if len(s) < minDigits || len(s) > maxDigits {
		return 0, false
	}
	var v uint64
	for i := 0; i < len(s); i++ {
		c := s[i]
		var d byte
		switch {
		case c >= '0' && c <= '9':
			d = c - '0'
		case c >= 'a' && c <= 'f':
			d = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			d = c - 'A' + 10
		default:
			return 0, false
		}
		v = v<<4 | uint64(d)
	}
	return v, true
}

// String returns the lspci and sysfs spelling, "0000:4b:00.0": lower case,
// the domain with at least 4 digits (wider domains, such as VMD's, keep
// their full width). lspci -s and setpci -s accept it.
func (a PCIAddr) String() string { return a.format(4, false) }

// NVML returns NVML's spelling, "00000000:4B:00.0": 8 domain digits, upper case.
func (a PCIAddr) NVML() string { return a.format(8, true) }

// format spells the address with at least domainDigits domain digits.
func (a PCIAddr) format(domainDigits int, upper bool) string {
	b := make([]byte, 0, 16)
	b = appendHexPad(b, uint64(a.Domain), domainDigits, upper)
	b = append(b, ':')
	b = appendHexPad(b, uint64(a.Bus), 2, upper)
	b = append(b, ':')
	b = appendHexPad(b, uint64(a.Device), 2, upper)
	return string(append(b, '.', '0'+a.Function))
}

// Slot returns the address with the function cleared: what a kernel Xid
// line names, which carries no function. Match GPUs on Slot.
func (a PCIAddr) Slot() PCIAddr {
	a.Function = 0
	return a
}

// appendHexPad appends v in hex, zero-padded to width digits.
func appendHexPad(b []byte, v uint64, width int, upper bool) []byte {
	h := strconv.FormatUint(v, 16)
	for i := len(h); i < width; i++ {
		b = append(b, '0')
	}
	for i := 0; i < len(h); i++ {
		c := h[i]
		if upper && c >= 'a' {
			c -= 'a' - 'A'
		}
		b = append(b, c)
	}
	return b
}
