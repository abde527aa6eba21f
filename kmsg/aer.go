package kmsg

import (
	"slices"
	"strings"

	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

// AERSeverity is how bad a PCIe Advanced Error Reporting error is.
type AERSeverity uint8

// AER severities. Uncorrectable errors (fatal or not) lose or corrupt
// transactions, and often come just before Xid 79; corrected ones are
// retried by the link and only matter as a rate.
const (
	AERUnknown   AERSeverity = iota // a line of an AER report that carries no severity (recovery, detail)
	AERCorrected                    // Corrected / Correctable
	AERNonFatal                     // Uncorrected (Non-Fatal) / Uncorrectable (Non-Fatal)
	AERFatal                        // Uncorrected (Fatal)
)

func (s AERSeverity) String() string {
	switch s {
	case AERCorrected:
		return "corrected"
	case AERNonFatal:
		return "uncorrectable-nonfatal"
	case AERFatal:
		return "uncorrectable-fatal"
	}
	return "unknown"
}

// Uncorrectable reports whether the severity is fatal or non-fatal
// uncorrectable: an error that lost a transaction.
func (s AERSeverity) Uncorrectable() bool { return s == AERNonFatal || s == AERFatal }

// AERReport is one kernel line of a PCIe AER report, taken apart.
type AERReport struct {
	Driver   string                       // the driver that printed the line: "pcieport" or "nvidia"
	Device   reading.PCIAddr              // the device the line is about
	Source   reading.Opt[reading.PCIAddr] // the device the error came from, when the line names one ("... received: 0000:41:00.0")
	Severity AERSeverity                  // AERUnknown when the line carries none
	Text     string                       // the message after the device prefix
}

// aerDrivers are the drivers whose AER lines concern a GPU's path: the PCIe
// port driver (root and switch ports, which report for the devices below
// them) and the NVIDIA driver itself. Other drivers' AER lines (nvme,
// snd_hda_intel on the GPU's audio function, a NIC) are not a GPU's.
var aerDrivers = []string{"pcieport", "nvidia"}

// aerMarkers are the texts that make a device line an AER line: the AER
// service's own lines ("AER: ...") and the decoded report ("PCIe Bus Error:")
// that older kernels print without the "AER:" prefix.
var aerMarkers = []string{"AER:", "PCIe Bus Error:"}

// aerSeverities maps the kernel's words to severities, longest first, as they
// appear in "severity=..." and in "... error received" / "error message
// received from" lines (the words changed in Linux 6.x).
var aerSeverities = []struct {
	text string
	sev  AERSeverity
}{
	{"Uncorrected (Non-Fatal)", AERNonFatal},
	{"Uncorrectable (Non-Fatal)", AERNonFatal},
	{"Uncorrected (Fatal)", AERFatal},
	{"Uncorrectable (Fatal)", AERFatal},
	{"Corrected", AERCorrected},
	{"Correctable", AERCorrected},
}

// ParseAER picks a PCIe AER line out of a kernel log message. The kernel
// prints these through dev_printk, so the message starts with the driver and
// the device:
//
//	pcieport 0000:40:01.1: AER: Uncorrected (Fatal) error received: 0000:41:00.0
//	pcieport 0000:40:01.1: AER: Uncorrectable (Non-Fatal) error message received from 0000:41:00.0
//	pcieport 0000:40:01.1: PCIe Bus Error: severity=Corrected, type=Physical Layer, (Receiver ID)
//	nvidia 0000:41:00.0: AER: PCIe Bus Error: severity=Uncorrected (Fatal), type=Transaction Layer, (Requester ID)
//	nvidia 0000:41:00.0: AER: can't recover (no error_detected callback)
//	pcieport 0000:40:01.1: AER: device recovery failed
//
// Only pcieport and nvidia lines are taken (see aerDrivers). The device must
// be a full PCI address; a severity is read from "severity=" or from the
// words before "error received"/"error message received". ok is false for
// anything else, including the indented detail lines ("device [10de:2bb1]
// error status/mask=...", "[14] CmpltTO") that older kernels print without
// "AER:": they repeat what the line before them said.
func ParseAER(msg string) (AERReport, bool) {
	var r AERReport
	drv, dev, text, ok := DeviceLine(msg)
	if !ok || !slices.Contains(aerDrivers, drv) {
		return r, false
	}
	marked := false
	for _, m := range aerMarkers {
		marked = marked || strings.HasPrefix(text, m)
	}
	if !marked {
		return r, false
	}
	r = AERReport{Driver: drv, Device: dev, Text: strings.TrimRight(text, " \t\r\n")}
	body := strings.TrimSpace(strings.TrimPrefix(text, "AER:"))
	if i := strings.Index(body, "severity="); i >= 0 {
		r.Severity = severityAt(body[i+len("severity="):])
	} else if i := strings.Index(body, "error received"); i >= 0 {
		r.Severity = severityIn(body[:i])
	} else if i := strings.Index(body, "error message received"); i >= 0 {
		r.Severity = severityIn(body[:i])
	}
	// The reporting device: "received: ADDR" or "received from ADDR". Older
	// kernels print "received: id=00e5" (a requester id): no address then.
	if i := strings.Index(body, "received"); i >= 0 {
		s := strings.TrimLeft(strings.TrimPrefix(strings.TrimPrefix(body[i+len("received"):], ":"), " from"), " ")
		if f := strings.Fields(s); len(f) > 0 {
			if a, ok := fullPCIAddr(f[0]); ok {
				r.Source = reading.Some(a)
			}
		}
	}
	return r, true
}

// DeviceLine takes apart a line the kernel printed through dev_printk: the
// driver, the device as a full PCI address, and the text after them
// ("pcieport 0000:00:01.0: AER: ..."). ok is false for any other line.
func DeviceLine(msg string) (driver string, dev reading.PCIAddr, text string, ok bool) {
	drv, rest, found := strings.Cut(msg, " ")
	if !found || drv == "" {
		return "", dev, "", false
	}
	addr, text, found := strings.Cut(rest, ": ")
	if !found {
		return "", dev, "", false
	}
	if dev, ok = fullPCIAddr(addr); !ok {
		return "", dev, "", false
	}
	return drv, dev, text, true
}

// severityAt reads the severity that s starts with.
func severityAt(s string) AERSeverity {
	for _, v := range aerSeverities {
		if strings.HasPrefix(s, v.text) {
			return v.sev
		}
	}
	return AERUnknown
}

// severityIn reads the severity named in s ("Multiple Uncorrected (Fatal) ").
func severityIn(s string) AERSeverity {
	for _, v := range aerSeverities {
		if strings.Contains(s, v.text) {
			return v.sev
		}
	}
	return AERUnknown
}

// fullPCIAddr parses a PCI address that spells out its function
// ("0000:41:00.0", NVML's "00000000:41:00.0"). Device lines always carry it,
// and it matters: a root complex's ports 00:01.0 and 00:01.1 lead to
// different GPUs.
func fullPCIAddr(s string) (reading.PCIAddr, bool) {
	if len(s) < 2 || s[len(s)-2] != '.' {
		return reading.PCIAddr{}, false
	}
	a, err := reading.ParsePCIAddr(s)
	return a, err == nil
}
