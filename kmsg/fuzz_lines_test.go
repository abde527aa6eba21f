package kmsg

import (
	"strings"
	"testing"
)

func FuzzParseAER(f *testing.F) {
	for _, tt := range aerTests {
		f.Add(tt.in)
	}
	f.Fuzz(func(t *testing.T, msg string) {
		r, ok := ParseAER(msg)
		if !ok {
			if r != (AERReport{}) {
				t.Errorf("ParseAER(%q) not ok but returned %+v", msg, r)
			}
			return
		}
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
	for _, tt := range nvrmTests {
		f.Add(tt.in)
	}
	f.Fuzz(func(t *testing.T, msg string) {
		r, ok := ParseNVRM(msg)
		if !ok {
			return
		}
		if !strings.Contains(msg, "NVRM: ") || r.Kind < NVRMFallenOffBus || r.Kind > NVRMGSPCrash {
			t.Errorf("ParseNVRM(%q) = %+v", msg, r)
		}
		if _, isXid := ParseXid(msg); isXid && strings.HasPrefix(msg[strings.Index(msg, "NVRM: ")+6:], "Xid ") {
			t.Errorf("ParseNVRM(%q) took an Xid line", msg)
		}
		if r.DriverGPU < -1 {
			t.Errorf("driver GPU %d", r.DriverGPU)
		}
	})
}
