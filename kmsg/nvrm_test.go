package kmsg

import (
	"testing"

	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

// nvrmTests: NVIDIA driver lines in the shapes public bug reports show,
// with this project's own bus ids and numbers.
var nvrmTests = []lineCase[NVRMReport]{
	{
		name: "fallen off the bus, GPU prefix (older drivers, no Xid)",
		in:   "NVRM: GPU 0000:41:00.0: GPU has fallen off the bus.",
		ok:   true,
		want: NVRMReport{Kind: NVRMFallenOffBus, Bus: reading.Some(pci("0000:41:00")), DriverGPU: -1, Text: "GPU 0000:41:00.0: GPU has fallen off the bus."},
	},
	{
		name: "fallen off the bus, GPU at",
		in:   "NVRM: GPU at 0000:81:00.0 has fallen off the bus.",
		ok:   true,
		want: NVRMReport{Kind: NVRMFallenOffBus, Bus: reading.Some(pci("0000:81:00")), DriverGPU: -1, Text: "GPU at 0000:81:00.0 has fallen off the bus."},
	},
	{
		name: "fallen off the bus, PCI: form",
		in:   "NVRM: GPU at PCI:0000:81:00: GPU has fallen off the bus.",
		ok:   true,
		want: NVRMReport{Kind: NVRMFallenOffBus, Bus: reading.Some(pci("0000:81:00")), DriverGPU: -1, Text: "GPU at PCI:0000:81:00: GPU has fallen off the bus."},
	},
	{
		name: "RmInitAdapter failed",
		in:   "NVRM: GPU 0000:41:00.0: RmInitAdapter failed! (0x25:0x65:1457)",
		ok:   true,
		want: NVRMReport{Kind: NVRMInitFailed, Bus: reading.Some(pci("0000:41:00")), DriverGPU: -1, Text: "GPU 0000:41:00.0: RmInitAdapter failed! (0x25:0x65:1457)"},
	},
	{
		name: "rm_init_adapter failed without address",
		in:   "NVRM: rm_init_adapter failed, device minor number 3",
		ok:   true,
		want: NVRMReport{Kind: NVRMInitFailed, DriverGPU: -1, Text: "rm_init_adapter failed, device minor number 3"},
	},
	{
		name: "GSP timeout banner",
		in:   "NVRM: GPU3 _kgspLogRpcTimeout: ********************************* GSP Timeout **********************************",
		ok:   true,
		want: NVRMReport{Kind: NVRMGSPTimeout, DriverGPU: 3, Text: "GPU3 _kgspLogRpcTimeout: ********************************* GSP Timeout **********************************"},
	},
	{
		name: "GSP heartbeat",
		in:   "NVRM: GPU2 _kgspIsHeartbeatTimedOut: Heartbeat timed out, currentTimeMs 71234567 heartbeat 2211 heartbeatWithOffsetMs 71228210 diff 6357 timeout 5200",
		ok:   true,
		want: NVRMReport{Kind: NVRMGSPCrash, DriverGPU: 2, Text: "GPU2 _kgspIsHeartbeatTimedOut: Heartbeat timed out, currentTimeMs 71234567 heartbeat 2211 heartbeatWithOffsetMs 71228210 diff 6357 timeout 5200"},
	},
	{name: "Xid 79 is the Xid parser's", in: "NVRM: Xid (PCI:0000:41:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus."},
	{name: "RPC history line after the banner", in: "NVRM: GPU3 _kgspLogRpcTimeout: Note: Please also check logs above."},
	{name: "loading banner", in: "NVRM: loading NVIDIA UNIX Open Kernel Module for x86_64  580.95.05  Release Build"},
	{name: "another driver's text", in: "mlx5_core 0000:3b:00.0: GPU has fallen off the bus"},
	{name: "a NIC's XID", in: "mlx5_core 0000:3b:00.0: mlx5_cmd_out_err:838: XID 119 RmInitAdapter failed"},
}

func TestParseNVRM(t *testing.T) {
	checkLines(t, "ParseNVRM", ParseNVRM, nvrmTests)
}

func TestGPUNumbersFromXid119(t *testing.T) {
	var g GPUNumbers
	x, ok := ParseXid("NVRM: Xid (PCI:0000:81:00): 119, pid=4242, name=python3, Timeout after 6s of waiting for RPC response from GPU3 GSP! Expected function 76 (GSP_RM_CONTROL) (0x20800a4c 0x4).")
	if !ok {
		t.Fatal("Xid 119 fixture did not parse")
	}
	r, _ := ParseNVRM("NVRM: GPU3 _kgspLogRpcTimeout: ********************************* GSP Timeout **********************************")
	g.Resolve(&r)
	if r.Bus.OK {
		t.Fatalf("resolved %v before anything was learnt", r.Bus.V)
	}
	g.Learn(x)
	g.Resolve(&r)
	if a, ok := r.Bus.Get(); !ok || a != pci("0000:81:00") {
		t.Errorf("GPU3 resolved to %v, %v; want 0000:81:00.0", a, ok)
	}
	other, _ := ParseNVRM("NVRM: GPU2 _kgspIsHeartbeatTimedOut: Heartbeat timed out, diff 6357 timeout 5200")
	g.Resolve(&other)
	if other.Bus.OK {
		t.Errorf("GPU2 (never named in an Xid) resolved to %v", other.Bus.V)
	}
}

// TestLookAlikesThroughRecords feeds whole /dev/kmsg records: a timestamp
// ending in 119 and other drivers' numbers must not make an event.
func TestLookAlikesThroughRecords(t *testing.T) {
	for _, line := range []string{
		"3,5021,1084456074119,-;mlx5_core 0000:3b:00.0: XID 79 port down",
		"4,5022,7119119,-;ixgbe 0000:3c:00.0: PCIe Bus Error detected on 119",
		"6,5023,119,-;pcieport 0000:40:01.1: PME: Signaling with IRQ 119",
	} {
		rec, err := ParseRecord([]byte(line))
		if err != nil {
			t.Fatalf("fixture %q: %v", line, err)
		}
		if x, ok := ParseXid(rec.Message); ok {
			t.Errorf("%q: Xid %d", line, x.Code)
		}
		if r, ok := ParseAER(rec.Message); ok {
			t.Errorf("%q: AER %+v", line, r)
		}
		if r, ok := ParseNVRM(rec.Message); ok {
			t.Errorf("%q: NVRM %+v", line, r)
		}
	}
}
