package snapshot

import (
	"regexp"
	"slices"
	"strings"

	"github.com/gpu-telemetry/gpu-telemetry/kmsg"
	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

// kernelFilter picks, out of a whole dmesg, the lines about one GPU: what the
// NVIDIA driver printed, what the kernel printed about the GPU's PCI device
// and the AER reports of the bridges on its path. It matches by words and
// device addresses, never by substrings: "debug", "[Firmware Bug]" and
// "amdgpu 0000:03:00.0: ... GPU init" are not the GPU's lines.
type kernelFilter struct {
	gpu       reading.Opt[reading.PCIAddr] // absent when the bus id did not parse
	bridges   []reading.PCIAddr            // the bridges above the GPU, nearest the root first; nil when unknown
	pathKnown bool                         // bridges was read from sysfs; if not, any PCIe port's AER lines are kept
}

// gpuWords are the words that make a line that names no PCI device a GPU
// line: the driver's prefix (NVRM, also on the continuation lines of its
// multi-line reports), its modules (nvidia, nvidia-modeset, nvidia-uvm, and
// "[nvidia]" in a stack trace), Xid, GPU as a word, GPU_IS_LOST, and the
// kernel's own "BUG:" (an oops; "[Firmware Bug]" and "bug" are not it).
var gpuWords = regexp.MustCompile(`\bNVRM\b|(?i:\bnvidia)|\bXid\b|\bGPU\b|GPU_IS_LOST|(^|[^\w\[])BUG: `)

// messageOf strips what dmesg and journalctl put before the kernel's
// message: the printk time ("[ 5.123456]"), the wall time placeKernelLines
// adds ("{2026-...Z}"), and journalctl's "host kernel: ".
func messageOf(line string) string {
	s := strings.TrimLeft(line, " \t")
	for _, br := range []string{"[]", "{}"} {
		if i := strings.IndexByte(s, br[1]); i > 0 && s[0] == br[0] {
			s = strings.TrimLeft(s[i+1:], " ")
		}
	}
	if host, rest, ok := strings.Cut(s, " "); ok && host != "" && strings.HasPrefix(rest, "kernel: ") {
		s = strings.TrimPrefix(rest, "kernel: ")
	}
	return s
}

// sameBoard reports whether a is a function of the GPU's device (the GPU,
// its audio, USB and UCSI functions share domain, bus and device).
func (f kernelFilter) sameBoard(a reading.PCIAddr) bool {
	g, ok := f.gpu.Get()
	return ok && a.Domain == g.Domain && a.Bus == g.Bus && a.Device == g.Device
}

// namesGPU reports whether msg names the GPU's device in any of the forms
// the kernel and the driver print it ("0000:4b:00.0", "PCI:0000:4b:00").
func (f kernelFilter) namesGPU(msg string) bool {
	g, ok := f.gpu.Get()
	if !ok {
		return false
	}
	low := strings.ToLower(msg)
	isHex := func(c byte) bool { return strings.IndexByte("0123456789abcdef", c) >= 0 }
	for _, form := range []string{g.String(), strings.ToLower(g.NVML())} {
		board := form[:len(form)-2] // without ".f": the driver prints none
		for i := 0; i < len(low); {
			j := strings.Index(low[i:], board)
			if j < 0 {
				break
			}
			start, end := i+j, i+j+len(board)
			if (start == 0 || !isHex(low[start-1])) && (end == len(low) || !isHex(low[end]) && low[end] != ':') {
				return true
			}
			i = end
		}
	}
	return false
}

// aerText reports whether the text after a device prefix is part of an AER
// report: the AER service's lines, the decoded report, and its indented
// detail lines ("  device [10de:2bb1] error status/mask=...", "   [ 0] RxErr").
func aerText(text string) bool {
	t := strings.TrimLeft(text, " ")
	return strings.HasPrefix(t, "AER:") || strings.HasPrefix(t, "PCIe Bus Error:") ||
		(t != text && (strings.HasPrefix(t, "device [") || strings.HasPrefix(t, "[")))
}

// GPULine reports whether a dmesg line belongs in the GPU section.
func (f kernelFilter) GPULine(line string) bool {
	msg := messageOf(line)
	if drv, dev, text, ok := kmsg.DeviceLine(msg); ok {
		// Not another device's line: an Intel or AMD GPU, a NIC, a disk.
		return strings.HasPrefix(drv, "nvidia") || f.fromGPU(drv, dev, msg, text)
	}
	return gpuWords.MatchString(msg) || f.namesGPU(msg)
}

// AERLine reports whether a dmesg line belongs in the AER section: a line of
// an AER report printed by the GPU or a bridge on its path.
func (f kernelFilter) AERLine(line string) bool {
	msg := messageOf(line)
	drv, dev, text, ok := kmsg.DeviceLine(msg)
	return ok && aerText(text) && f.fromGPU(drv, dev, msg, text)
}

// fromGPU reports whether a line device dev printed is about the GPU: the
// GPU's own; a bridge's on its path that is an AER line naming no source,
// the GPU or a bridge on its path (a port reports for every device below
// it: an NVMe drive's error is not the GPU's), or a hotplug or DPC line of
// the port (link down, containment); or, the path unknown, any port's AER
// line.
func (f kernelFilter) fromGPU(drv string, dev reading.PCIAddr, msg, text string) bool {
	switch {
	case f.sameBoard(dev):
		return true
	case !slices.Contains(f.bridges, dev):
		return !f.pathKnown && drv == "pcieport" && aerText(text)
	}
	if r, ok := kmsg.ParseAER(msg); ok {
		src, named := r.Source.Get()
		return !named || f.sameBoard(src) || slices.Contains(f.bridges, src)
	}
	t := strings.TrimLeft(text, " ")
	return aerText(text) || strings.HasPrefix(t, "pciehp: ") || strings.HasPrefix(t, "DPC: ")
}
