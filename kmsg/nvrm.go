package kmsg

import (
	"strconv"
	"strings"

	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

// NVRMKind is a kind of NVIDIA driver line, other than an Xid, that tells of
// a GPU failing.
type NVRMKind uint8

// NVRM line kinds.
const (
	NVRMFallenOffBus NVRMKind = iota + 1 // "GPU has fallen off the bus" without an Xid (older drivers)
	NVRMInitFailed                       // RmInitAdapter failed: the GPU could not be brought up
	NVRMGSPTimeout                       // the GSP firmware did not answer an RPC
	NVRMGSPCrash                         // GSP heartbeat lost or crash report
)

// NVRMReport is one such line, taken apart.
type NVRMReport struct {
	Kind NVRMKind
	// Bus is the GPU's address, when the line names one or GPUNumbers
	// resolved it.
	Bus reading.Opt[reading.PCIAddr]
	// DriverGPU is the driver's own GPU number ("GPU1" in GSP lines), or -1.
	// It is the order in which the driver probed the GPUs, not NVML's
	// index; see GPUNumbers for how it is tied to a bus id.
	DriverGPU int
	Text      string // the message after "NVRM: "
}

// nvrmMarker starts every line of the NVIDIA resource manager.
const nvrmMarker = "NVRM: "

// nvrmPhrases classify NVRM lines by what they say, checked in order. The
// GSP phrases are the headers of the driver's reports; the lines after them
// (RPC history, register dumps) repeat the incident and are not taken.
var nvrmPhrases = []struct {
	text string
	kind NVRMKind
}{
	{"has fallen off the bus", NVRMFallenOffBus},
	{"RmInitAdapter failed", NVRMInitFailed},
	{"rm_init_adapter failed", NVRMInitFailed},
	{"GSP Timeout ***", NVRMGSPTimeout},
	{"Timeout waiting for RPC from GSP", NVRMGSPTimeout},
	{"Heartbeat timed out", NVRMGSPCrash},
	{"GSP crash", NVRMGSPCrash},
	{"GSP-RM crash", NVRMGSPCrash},
	{"CrashCat", NVRMGSPCrash},
}

// ParseNVRM picks a fallen-off-the-bus, RmInitAdapter or GSP timeout/crash
// line of the NVIDIA driver out of a kernel log message:
//
//	NVRM: GPU 0000:41:00.0: GPU has fallen off the bus.
//	NVRM: GPU at 0000:41:00.0 has fallen off the bus.
//	NVRM: GPU 0000:41:00.0: RmInitAdapter failed! (0x26:0x56:1474)
//	NVRM: GPU5 _kgspLogRpcTimeout: ********************************* GSP Timeout **********************************
//	NVRM: GPU5 _kgspIsHeartbeatTimedOut: Heartbeat timed out, currentTimeMs ...
//
// Xid lines are left to ParseXid (an Xid 79 says "fallen off the bus" too),
// and so is anything without "NVRM: ". The GPU is named by the first PCI
// address in the text, and/or by the driver's "GPU<n>" number. ok is false
// for every other line.
func ParseNVRM(msg string) (NVRMReport, bool) {
	i := strings.Index(msg, nvrmMarker)
	if i < 0 {
		return NVRMReport{}, false
	}
	text := strings.TrimRight(msg[i+len(nvrmMarker):], " \t\r\n")
	if strings.HasPrefix(text, "Xid ") {
		return NVRMReport{}, false
	}
	r := NVRMReport{DriverGPU: -1, Text: text}
	for _, p := range nvrmPhrases {
		if strings.Contains(text, p.text) {
			r.Kind = p.kind
			break
		}
	}
	if r.Kind == 0 {
		return NVRMReport{}, false
	}
	r.Bus = firstPCIAddr(text)
	r.DriverGPU = driverGPU(text)
	return r, true
}

// firstPCIAddr returns the first word of s that is a PCI address
// ("0000:41:00.0", "PCI:0000:41:00", with a trailing ':' or ',' allowed),
// absent when there is none.
func firstPCIAddr(s string) reading.Opt[reading.PCIAddr] {
	for _, w := range strings.Fields(s) {
		w = strings.TrimRight(w, ":,.)")
		if !strings.Contains(w, ":") {
			continue
		}
		if a, err := reading.ParsePCIAddr(w); err == nil {
			return reading.Some(a)
		}
	}
	return reading.Opt[reading.PCIAddr]{}
}

// driverGPU reads the driver's GPU number from a leading "GPU<n> " (GSP
// lines) or from "from GPU<n> GSP" (Xid 119 text); -1 when there is none.
func driverGPU(s string) int {
	if n, ok := gpuNumber(s); ok {
		return n
	}
	if i := strings.Index(s, "from GPU"); i >= 0 {
		if n, ok := gpuNumber(s[i+len("from "):]); ok {
			return n
		}
	}
	return -1
}

// gpuNumber reads "GPU<digits>" followed by a space or the end at the start of s.
func gpuNumber(s string) (int, bool) {
	if !strings.HasPrefix(s, "GPU") {
		return 0, false
	}
	j := 3
	for j < len(s) && j < 3+4 && s[j] >= '0' && s[j] <= '9' {
		j++
	}
	if j == 3 || (j < len(s) && s[j] != ' ') {
		return 0, false
	}
	n, err := strconv.Atoi(s[3:j])
	return n, err == nil
}

// GPUNumbers ties the driver's GPU numbers to bus ids, as learnt from Xid
// lines that carry both ("Xid (PCI:0000:41:00): 119, ... from GPU1 GSP!").
// GSP lines name the GPU only by that number. The zero value is ready; it is
// not safe for concurrent use.
type GPUNumbers struct {
	m map[int]reading.PCIAddr
}

// Learn notes the driver number an Xid report's text names, if any.
func (g *GPUNumbers) Learn(x XidReport) {
	n := driverGPU(x.Text)
	if n < 0 {
		return
	}
	if g.m == nil {
		g.m = map[int]reading.PCIAddr{}
	}
	if len(g.m) < 1024 {
		g.m[n] = x.Bus
	}
}

// Resolve fills r.Bus from the driver number when the line named no
// address and the number has been learnt.
func (g *GPUNumbers) Resolve(r *NVRMReport) {
	if a, ok := g.m[r.DriverGPU]; !r.Bus.OK && r.DriverGPU >= 0 && ok {
		r.Bus = reading.Some(a)
	}
}
