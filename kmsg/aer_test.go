package kmsg

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

// aerTests: lines in the shapes the kernel prints (drivers/pci/pcie/aer.c,
// public bug reports), with this project's own bus ids.
var aerTests = []lineCase[AERReport]{
	{
		name: "root port: uncorrected fatal received from the GPU",
		in:   "pcieport 0000:40:01.1: AER: Uncorrected (Fatal) error received: 0000:41:00.0",
		ok:   true,
		want: AERReport{Driver: "pcieport", Device: pci("0000:40:01.1"), Source: reading.Some(pci("0000:41:00.0")), Severity: AERFatal,
			Text: "AER: Uncorrected (Fatal) error received: 0000:41:00.0"},
	},
	{
		name: "6.x wording: error message received from",
		in:   "pcieport 0000:40:01.1: AER: Uncorrectable (Non-Fatal) error message received from 0000:41:00.0",
		ok:   true,
		want: AERReport{Driver: "pcieport", Device: pci("0000:40:01.1"), Source: reading.Some(pci("0000:41:00.0")), Severity: AERNonFatal,
			Text: "AER: Uncorrectable (Non-Fatal) error message received from 0000:41:00.0"},
	},
	{
		name: "multiple corrected from the port itself",
		in:   "pcieport 0000:40:01.1: AER: Multiple Corrected error received: 0000:40:01.1",
		ok:   true,
		want: AERReport{Driver: "pcieport", Device: pci("0000:40:01.1"), Source: reading.Some(pci("0000:40:01.1")), Severity: AERCorrected,
			Text: "AER: Multiple Corrected error received: 0000:40:01.1"},
	},
	{
		name: "old kernel: requester id instead of an address",
		in:   "pcieport 0000:40:01.1: AER: Corrected error received: id=4009",
		ok:   true,
		want: AERReport{Driver: "pcieport", Device: pci("0000:40:01.1"), Severity: AERCorrected,
			Text: "AER: Corrected error received: id=4009"},
	},
	{
		name: "decoded report on the GPU",
		in:   "nvidia 0000:41:00.0: AER: PCIe Bus Error: severity=Uncorrected (Fatal), type=Transaction Layer, (Requester ID)",
		ok:   true,
		want: AERReport{Driver: "nvidia", Device: pci("0000:41:00.0"), Severity: AERFatal,
			Text: "AER: PCIe Bus Error: severity=Uncorrected (Fatal), type=Transaction Layer, (Requester ID)"},
	},
	{
		name: "decoded report without AER: prefix (older kernels)",
		in:   "pcieport 0000:40:01.1: PCIe Bus Error: severity=Corrected, type=Physical Layer, (Receiver ID)",
		ok:   true,
		want: AERReport{Driver: "pcieport", Device: pci("0000:40:01.1"), Severity: AERCorrected,
			Text: "PCIe Bus Error: severity=Corrected, type=Physical Layer, (Receiver ID)"},
	},
	{
		name: "recovery outcome on the GPU",
		in:   "nvidia 0000:41:00.0: AER: can't recover (no error_detected callback)",
		ok:   true,
		want: AERReport{Driver: "nvidia", Device: pci("0000:41:00.0"), Text: "AER: can't recover (no error_detected callback)"},
	},
	{
		name: "recovery failed on the port",
		in:   "pcieport 0000:40:01.1: AER: device recovery failed",
		ok:   true,
		want: AERReport{Driver: "pcieport", Device: pci("0000:40:01.1"), Text: "AER: device recovery failed"},
	},
	{name: "detail line without AER: (repeats the line before)", in: "pcieport 0000:40:01.1:   device [1022:1483] error status/mask=00004000/00000000"},
	{name: "bit line without AER:", in: "pcieport 0000:40:01.1:    [14] CmpltTO                (First)"},
	{name: "NVMe AER is not a GPU's", in: "nvme 0000:03:00.0: AER: PCIe Bus Error: severity=Corrected, type=Physical Layer, (Receiver ID)"},
	{name: "GPU audio function", in: "snd_hda_intel 0000:41:00.1: AER: can't recover (no error_detected callback)"},
	{name: "address without function", in: "pcieport 0000:40:01: AER: Corrected error received: 0000:41:00.0"},
	{name: "no device prefix", in: "AER: Corrected error received: 0000:41:00.0"},
	{name: "AER mentioned later in a line", in: "pcieport 0000:40:01.1: enabling device, AER: on"},
	{name: "empty", in: ""},
}

func TestParseAER(t *testing.T) {
	checkLines(t, "ParseAER", ParseAER, aerTests)
}

func TestAERSeverityUncorrectable(t *testing.T) {
	for _, tc := range []struct {
		s    AERSeverity
		want bool
	}{{AERUnknown, false}, {AERCorrected, false}, {AERNonFatal, true}, {AERFatal, true}} {
		if got := tc.s.Uncorrectable(); got != tc.want {
			t.Errorf("%v.Uncorrectable() = %v, want %v", tc.s, got, tc.want)
		}
	}
}

func TestFullPCIAddr(t *testing.T) {
	for in, want := range map[string]string{
		"0000:41:00.0":     "0000:41:00.0",
		"00000000:4B:00.0": "0000:4b:00.0",
		"0000:40:01.1":     "0000:40:01.1",
		"0000:41:00":       "",
		"41:00.0":          "",
		"0000:41:00.8":     "",
		"0000:41:00.10":    "",
	} {
		got, ok := fullPCIAddr(in)
		if ok != (want != "") || ok && got.String() != want {
			t.Errorf("fullPCIAddr(%q) = %v, %v; want %q", in, got, ok, want)
		}
	}
}

// fakeSysfs builds a /sys/bus/pci/devices directory with links into a fake
// device tree: GPU 0 behind a switch (root port 40:01.1, switch ports
// 41:00.0 and 42:00.0), GPU 1 directly on root port 80:03.1, and an NVMe
// drive on the same root port as GPU 0's switch.
func fakeSysfs(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	devs := map[string]string{
		"0000:43:00.0": "devices/pci0000:40/0000:40:01.1/0000:41:00.0/0000:42:00.0/0000:43:00.0",
		"0000:81:00.0": "devices/pci0000:80/0000:80:03.1/0000:81:00.0",
		"0000:44:00.0": "devices/pci0000:40/0000:40:01.1/0000:41:00.0/0000:42:01.0/0000:44:00.0",
	}
	list := filepath.Join(root, "bus/pci/devices")
	if err := os.MkdirAll(list, 0o755); err != nil {
		t.Fatal(err)
	}
	for addr, p := range devs {
		if err := os.MkdirAll(filepath.Join(root, p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(filepath.Join("../../..", p), filepath.Join(list, addr)); err != nil {
			t.Fatal(err)
		}
	}
	return list
}

func TestPCIPathAndAERPaths(t *testing.T) {
	dir := fakeSysfs(t)
	path0, err := PCIPath(dir, pci("0000:43:00.0"))
	if err != nil {
		t.Fatal(err)
	}
	if want := []reading.PCIAddr{pci("0000:40:01.1"), pci("0000:41:00.0"), pci("0000:42:00.0")}; !slices.Equal(path0, want) {
		t.Fatalf("PCIPath(GPU 0) = %v, want %v", path0, want)
	}
	path1, err := PCIPath(dir, pci("0000:81:00.0"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := PCIPath(dir, pci("0000:99:00.0")); err == nil {
		t.Error("PCIPath of a device that is not there: no error")
	}
	p := NewAERPaths()
	p.Add(0, pci("0000:43:00.0"), path0)
	p.Add(1, pci("0000:81:00.0"), path1)
	for _, tc := range []struct {
		name   string
		line   string
		gpus   []int
		direct bool
	}{
		{"source is GPU 0", "pcieport 0000:42:00.0: AER: Uncorrected (Fatal) error received: 0000:43:00.0", []int{0}, true},
		{"GPU 1's own decoded line", "nvidia 0000:81:00.0: AER: PCIe Bus Error: severity=Corrected, type=Physical Layer, (Receiver ID)", []int{1}, true},
		{"GPU 0's root port itself", "pcieport 0000:40:01.1: PCIe Bus Error: severity=Uncorrected (Fatal), type=Transaction Layer, (Requester ID)", []int{0}, false},
		{"GPU 1's root port recovery", "pcieport 0000:80:03.1: AER: device recovery failed", []int{1}, false},
		{"NVMe behind GPU 0's root port", "pcieport 0000:40:01.1: AER: Corrected error received: 0000:44:00.0", nil, false},
		{"unrelated port", "pcieport 0000:00:1c.5: AER: Corrected error received: 0000:00:1c.5", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, ok := ParseAER(tc.line)
			if !ok {
				t.Fatalf("ParseAER(%q) failed", tc.line)
			}
			gpus, direct := p.GPUs(r)
			if !slices.Equal(gpus, tc.gpus) || direct != tc.direct {
				t.Errorf("GPUs = %v, %v; want %v, %v", gpus, direct, tc.gpus, tc.direct)
			}
		})
	}
}

// TestDriverGPUs: the GPUs bound to the nvidia driver in sysfs, in PCI
// order (NVML's numbering), without the driver's other devices (an
// NVSwitch) or the driver directory's files.
func TestDriverGPUs(t *testing.T) {
	dir := t.TempDir()
	for name, class := range map[string]string{
		"0000:c1:00.0": "0x030200", // 3D controller
		"0000:4b:00.0": "0x030000", // VGA
		"0000:0a:00.0": "0x068000", // NVSwitch
		"0001:01:00.0": "0x030200",
	} {
		if err := os.MkdirAll(filepath.Join(dir, name), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name, "class"), []byte(class+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"bind", "unbind", "new_id"} {
		os.WriteFile(filepath.Join(dir, f), nil, 0o200)
	}
	got, err := DriverGPUs(dir)
	if err != nil {
		t.Fatal(err)
	}
	var s []string
	for _, a := range got {
		s = append(s, a.String())
	}
	if want := "0000:4b:00.0 0000:c1:00.0 0001:01:00.0"; strings.Join(s, " ") != want {
		t.Errorf("DriverGPUs = %q, want %q", s, want)
	}
	if _, err := DriverGPUs(filepath.Join(dir, "none")); err == nil {
		t.Error("no error for a missing driver directory")
	}
}
