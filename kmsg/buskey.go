package kmsg

import (
	"strconv"
	"strings"
)

// BusKey reduces a PCI address to one comparable key, "dddd:bb:dd" in lower
// case hex (domain, bus, device; at least four domain digits), so that a
// kernel Xid line can be matched to the GPU NVML enumerates. It accepts:
//
//	PCI:0000:4b:00     the NVIDIA kernel driver (Xid lines)
//	0000:4b:00         older drivers, without "PCI:"
//	00000000:4B:00.0   NVML (8-digit domain, upper case, function)
//	0000:4b:00.0       lspci -D, sysfs
//
// The function number is dropped: the kernel line does not carry it, and a
// GPU is function 0. An address without a domain ("4b:00.0") is refused
// rather than guessed, since on a multi-domain host a guess could name the
// wrong GPU. ok is false for anything else.
func BusKey(s string) (key string, ok bool) {
	s = strings.TrimSpace(s)
	if len(s) >= 4 && strings.EqualFold(s[:4], "PCI:") {
		s = s[4:]
	}
	if dot := strings.LastIndexByte(s, '.'); dot >= 0 {
		fn := s[dot+1:]
		if len(fn) != 1 || fn[0] < '0' || fn[0] > '7' {
			return "", false
		}
		s = s[:dot]
	}
	parts := strings.Split(s, ":")
	if len(parts) != 3 {
		return "", false
	}
	domain, ok1 := parseHex(parts[0], 4, 8)
	bus, ok2 := parseHex(parts[1], 2, 2)
	dev, ok3 := parseHex(parts[2], 2, 2)
	// PCI has 32 devices per bus.
	if !ok1 || !ok2 || !ok3 || dev > 0x1f {
		return "", false
	}
	b := make([]byte, 0, 16)
	b = appendHex(b, domain, 4)
	b = append(b, ':')
	b = appendHex(b, bus, 2)
	b = append(b, ':')
	b = appendHex(b, dev, 2)
	return string(b), true
}

// parseHex parses between minDigits and maxDigits hex digits, nothing else.
func parseHex(s string, minDigits, maxDigits int) (uint64, bool) {
	if len(s) < minDigits || len(s) > maxDigits {
		return 0, false
	}
	var v uint64
	for i := 0; i < len(s); i++ {
		d, ok := unhex(s[i])
		if !ok {
			return 0, false
		}
		v = v<<4 | uint64(d)
	}
	return v, true
}

// appendHex appends v in lower case hex, zero-padded to width digits.
func appendHex(b []byte, v uint64, width int) []byte {
	h := strconv.FormatUint(v, 16)
	for i := len(h); i < width; i++ {
		b = append(b, '0')
	}
	return append(b, h...)
}
