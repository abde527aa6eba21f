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
// The message must start with "NVRM: ", the driver's prefix: a line of
// another kind that quotes the driver's text is not the driver's (and only a
// record the kernel logged, Record.FromKernel, can be one). Xid lines are
// left to ParseDriverXid (an Xid 79 says "fallen off the bus" too). The GPU
// is named by the first PCI address in the text, and/or by the driver's
// "GPU<n>" number. ok is false for every other line.
func ParseNVRM(msg string) (NVRMReport, bool) {
	text, found := strings.CutPrefix(msg, nvrmMarker)
	if !found || isTaskLine(msg) {
		return NVRMReport{}, false
	}
	text = strings.TrimRight(text, " \t\r\n")
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
// lines) or from "from GPU<n> GSP" (an RPC timeout); -1 when there is none.
func driverGPU(s string) int {
	if n, _, ok := gpuNumber(s); ok {
		return n
	}
	if n, ok := gspOf(s); ok {
		return n
	}
	return -1
}

// gspOf reads the driver's GPU number from the last "from GPU<n> GSP" in s,
// as in Xid 119's text ("Timeout after 45s of waiting for RPC response from
// GPU1 GSP!"). The last: what an Xid line prints before the driver's text
// (the process name) is a user's, and may say it too.
func gspOf(s string) (int, bool) {
	i := strings.LastIndex(s, "from GPU")
	if i < 0 {
		return 0, false
	}
	n, rest, ok := gpuNumber(s[i+len("from "):])
	if !ok || !strings.HasPrefix(rest, " GSP") {
		return 0, false
	}
	return n, true
}

// gpuNumber reads "GPU<digits>" followed by a space or the end at the start
// of s, and returns the number and what follows it.
func gpuNumber(s string) (int, string, bool) {
	if !strings.HasPrefix(s, "GPU") {
		return 0, "", false
	}
	j := 3
	for j < len(s) && j < 3+4 && s[j] >= '0' && s[j] <= '9' {
		j++
	}
	if j == 3 || (j < len(s) && s[j] != ' ') {
		return 0, "", false
	}
	n, err := strconv.Atoi(s[3:j])
	return n, s[j:], err == nil
}

// GPUNumbers ties the driver's GPU numbers to bus ids, as learnt from the
// Xid 119 lines that carry both ("Xid (PCI:0000:41:00): 119, ... from GPU1
// GSP!"). GSP lines name the GPU only by that number. Only the driver's own
// lines may teach it (ParseDriverXid on a Record.FromKernel record): a forged
// one would file the GPU's next GSP lines under another GPU. The zero value
// is ready; it is not safe for concurrent use.
type GPUNumbers struct {
	m map[int]reading.PCIAddr
}

// gspTimeoutXid is the Xid whose text names the driver's GPU number.
const gspTimeoutXid = 119

// Learn notes the driver number an Xid 119 report's text names, if any.
// Other Xids are not read: their text may quote a user's process name, and
// none names the number.
func (g *GPUNumbers) Learn(x XidReport) {
	if x.Code != gspTimeoutXid {
		return
	}
	n, ok := gspOf(x.Text)
	if !ok {
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
