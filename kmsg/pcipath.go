package kmsg

import (
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

// DefaultPCIDevices is where sysfs lists PCI devices as links into the
// device tree (/sys/devices/pci0000:40/0000:40:01.1/0000:41:00.0).
const DefaultPCIDevices = "/sys/bus/pci/devices"

// DefaultNvidiaDriver is where sysfs lists the PCI devices bound to
// NVIDIA's kernel driver, as links named by address.
const DefaultNvidiaDriver = "/sys/bus/pci/drivers/nvidia"

// DriverGPUs returns the addresses of the display controllers (PCI class
// 0x03: the GPUs; an NVSwitch, class 0x0680, is left out) bound to the
// driver listed at driverDir, in PCI order, which is the order NVML numbers
// them in. It reads sysfs only, so it answers while a GPU stuck in a fault
// does not answer NVML.
func DriverGPUs(driverDir string) ([]reading.PCIAddr, error) {
	ents, err := os.ReadDir(driverDir)
	if err != nil {
		return nil, fmt.Errorf("gpus of the driver: %w", err)
	}
	var out []reading.PCIAddr
	for _, e := range ents {
		a, ok := fullPCIAddr(e.Name())
		if !ok || e.Name() != a.String() {
			continue // bind, unbind, module, new_id...
		}
		b, err := os.ReadFile(filepath.Join(driverDir, e.Name(), "class"))
		if err != nil {
			continue
		}
		class, err := strconv.ParseUint(strings.TrimSpace(string(b)), 0, 32)
		if err != nil || class>>16 != 0x03 {
			continue
		}
		out = append(out, a)
	}
	slices.SortFunc(out, func(x, y reading.PCIAddr) int {
		return cmp.Or(cmp.Compare(x.Domain, y.Domain), cmp.Compare(x.Bus, y.Bus),
			cmp.Compare(x.Device, y.Device), cmp.Compare(x.Function, y.Function))
	})
	return out, nil
}

// PCIPath returns the bridges between the root complex and the device at
// addr, nearest the root first, read from the sysfs link under devicesDir
// (named in the lspci spelling, "dddd:bb:dd.f"). A GPU behind a PCIe switch
// has several. An AER error on any of them is an error on the GPU's path.
func PCIPath(devicesDir string, addr reading.PCIAddr) ([]reading.PCIAddr, error) {
	target, err := filepath.EvalSymlinks(filepath.Join(devicesDir, addr.String()))
	if err != nil {
		return nil, fmt.Errorf("pci path of %s: %w", addr, err)
	}
	var path []reading.PCIAddr
	for _, elem := range strings.Split(filepath.Dir(target), string(os.PathSeparator)) {
		// sysfs spells addresses exactly as String does; "pci0000:40" is not one.
		if a, ok := fullPCIAddr(elem); ok && elem == a.String() {
			path = append(path, a)
		}
	}
	return path, nil
}

// AERPaths matches AER lines to GPUs: by the GPU's own address, or by a
// bridge on its path. Fill it once at start; it is then read-only and safe
// for concurrent use.
type AERPaths struct {
	gpu     map[reading.PCIAddr]int   // GPU address -> index
	bridges map[reading.PCIAddr][]int // bridge address -> GPUs below it
}

// NewAERPaths returns an empty AERPaths.
func NewAERPaths() *AERPaths {
	return &AERPaths{gpu: map[reading.PCIAddr]int{}, bridges: map[reading.PCIAddr][]int{}}
}

// Add registers GPU idx at addr with the bridges above it (see PCIPath).
func (p *AERPaths) Add(idx int, addr reading.PCIAddr, bridges []reading.PCIAddr) {
	p.gpu[addr] = idx
	for _, b := range bridges {
		p.bridges[b] = append(p.bridges[b], idx)
	}
}

// GPUs returns the indexes of the GPUs an AER line concerns, and whether
// the line names a GPU itself (direct) rather than a bridge above it. When the
// line names the error's source, only the source counts: a port reports for
// every device below it, and an NVMe drive's error behind the GPU's root port
// is not the GPU's. Otherwise the device that printed the line is the one.
func (p *AERPaths) GPUs(r AERReport) (gpus []int, direct bool) {
	a, ok := r.Source.Get()
	if !ok {
		a = r.Device
	}
	if i, ok := p.gpu[a]; ok {
		return []int{i}, true
	}
	return p.bridges[a], false
}
