package kmsg

import (
	"strconv"
	"strings"

	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

// SXidReport is one SXid line of the NVSwitch driver, taken apart: an error
// of an NVSwitch (HGX and NVL72 systems), not of a GPU.
//
//	nvidia-nvswitch3: SXid (PCI:0000:05:00.0): 12028, Non-fatal, Link 32 egress non-posted PRIV error (First)
type SXidReport struct {
	Switch int             // the driver's switch number (nvidia-nvswitchN)
	Bus    reading.PCIAddr // the switch's PCI address
	Code   int             // the SXid number
	Text   string          // what follows the code
}

// sxidDriver is the NVSwitch driver's prefix, before the switch number.
const sxidDriver = "nvidia-nvswitch"

// ParseSXid takes apart an SXid line as the NVSwitch driver logs it: the
// message starts with "nvidia-nvswitchN: SXid (". Anything else, or a line
// whose address or code cannot be read, is not one (ok false).
func ParseSXid(msg string) (r SXidReport, ok bool) {
	s, found := strings.CutPrefix(msg, sxidDriver)
	if !found {
		return r, false
	}
	n := 0
	for n < len(s) && n < 4 && s[n] >= '0' && s[n] <= '9' {
		n++
	}
	if n == 0 {
		return r, false
	}
	r.Switch, _ = strconv.Atoi(s[:n])
	s, found = strings.CutPrefix(s[n:], ": SXid (")
	if !found {
		return r, false
	}
	addr, s, found := strings.Cut(s, "): ")
	if !found {
		return r, false
	}
	var err error
	if r.Bus, err = reading.ParsePCIAddr(addr); err != nil {
		return r, false
	}
	code, rest, _ := strings.Cut(s, ",")
	code = strings.TrimSpace(code)
	// SXid numbers have 5 digits; the bound keeps Atoi far from overflow.
	if len(code) == 0 || len(code) > maxXidDigits {
		return r, false
	}
	for i := 0; i < len(code); i++ {
		if code[i] < '0' || code[i] > '9' {
			return r, false
		}
	}
	r.Code, _ = strconv.Atoi(code)
	r.Text = strings.TrimSpace(rest)
	return r, true
}
