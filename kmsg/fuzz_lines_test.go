package kmsg

import (
	"strings"
	"testing"
)

func FuzzParseAER(f *testing.F) {
	fuzzLines(f, "ParseAER", ParseAER, aerTests, func(t *testing.T, msg string, r AERReport) {
		// Only the port driver's and NVIDIA's lines, with their device's
		// address right after the driver name.
		if r.Driver != "pcieport" && r.Driver != "nvidia" {
			t.Errorf("ParseAER(%q): driver %q", msg, r.Driver)
		}
		if !strings.HasPrefix(msg, r.Driver+" ") || !strings.Contains(msg, "AER:") && !strings.Contains(msg, "PCIe Bus Error:") {
			t.Errorf("ParseAER(%q) took a line that is not an AER line", msg)
		}
		if r.Severity > AERFatal {
			t.Errorf("severity %d out of range", r.Severity)
		}
	})
}

func FuzzParseNVRM(f *testing.F) {
	fuzzLines(f, "ParseNVRM", ParseNVRM, nvrmTests, func(t *testing.T, msg string, r NVRMReport) {
		if !strings.HasPrefix(msg, "NVRM: ") || r.Kind < NVRMFallenOffBus || r.Kind > NVRMGSPCrash {
			t.Errorf("ParseNVRM(%q) = %+v", msg, r)
		}
		if _, err := ParseDriverXid(msg); err == nil || strings.HasPrefix(msg, xidMarker) {
			t.Errorf("ParseNVRM(%q) took an Xid line", msg)
		}
		if r.DriverGPU < -1 {
			t.Errorf("driver GPU %d", r.DriverGPU)
		}
	})
}
