package kmsg

import (
	"testing"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

var none reading.Opt[uint64]

// xidTests is shared with FuzzParseXid as its seed corpus. Lines are the
// shapes the driver prints (from its source and from public bug reports).
var xidTests = []lineCase[XidReport]{
	{
		name: "119 GSP RPC timeout with pid and name",
		in:   "NVRM: Xid (PCI:0000:4b:00): 119, pid=1234, name=python3, Timeout after 45s of waiting for RPC response from GPU1 GSP! Expected function 76 (GSP_RM_CONTROL) (0x20800a4c 0x4).",
		ok:   true,
		want: XidReport{Bus: pci("0000:4b:00"), Code: 119, XidDetail: reading.XidDetail{PID: 1234, ProcessName: "python3",
			Text: "Timeout after 45s of waiting for RPC response from GPU1 GSP! Expected function 76 (GSP_RM_CONTROL) (0x20800a4c 0x4)."}},
	},
	{
		name: "119 from a driver thread",
		in:   "NVRM: Xid (PCI:0002:00:00): 119, pid=1582259, name=nvc:[driver], Timeout after 6s of waiting for RPC response from GPU1 GSP! Expected function 76 (GSP_RM_CONTROL) (0x20802a02 0x8).",
		ok:   true,
		want: XidReport{Bus: pci("0002:00:00"), Code: 119, XidDetail: reading.XidDetail{PID: 1582259, ProcessName: "nvc:[driver]",
			Text: "Timeout after 6s of waiting for RPC response from GPU1 GSP! Expected function 76 (GSP_RM_CONTROL) (0x20802a02 0x8)."}},
	},
	{
		name: "79 with unknown pid and name",
		in:   "NVRM: Xid (PCI:0000:01:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.",
		ok:   true,
		want: XidReport{Bus: pci("0000:01:00"), Code: 79, XidDetail: reading.XidDetail{Text: "GPU has fallen off the bus."}},
	},
	{
		name: "79 without pid and name",
		in:   "NVRM: Xid (PCI:0000:06:00): 79, GPU has fallen off the bus.",
		ok:   true,
		want: XidReport{Bus: pci("0000:06:00"), Code: 79, XidDetail: reading.XidDetail{Text: "GPU has fallen off the bus."}},
	},
	{
		name: "154 reset required",
		in:   "NVRM: Xid (PCI:0000:01:00): 154, GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset Required)",
		ok:   true,
		want: XidReport{Bus: pci("0000:01:00"), Code: 154, XidDetail: reading.XidDetail{
			Text:           "GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset Required)",
			RecoveryAction: reading.Some[uint64](1), RecoveryWords: "GPU Reset Required"}},
	},
	{
		name: "154 with pid and name and a wide hex value",
		in:   "NVRM: Xid (PCI:0000:01:00): 154, pid='<unknown>', name=<unknown>, GPU recovery action changed from 0x00000002 to 0x0000001A",
		ok:   true,
		want: XidReport{Bus: pci("0000:01:00"), Code: 154, XidDetail: reading.XidDetail{
			Text:           "GPU recovery action changed from 0x00000002 to 0x0000001A",
			RecoveryAction: reading.Some[uint64](0x1a)}},
	},
	{
		name: "154 without a hex value",
		in:   "NVRM: Xid (PCI:0000:01:00): 154, GPU recovery action changed from None to GPU Reset Required",
		ok:   true,
		want: XidReport{Bus: pci("0000:01:00"), Code: 154, XidDetail: reading.XidDetail{
			Text: "GPU recovery action changed from None to GPU Reset Required", RecoveryAction: none}},
	},
	{
		name: "recovery action only read for 154",
		in:   "NVRM: Xid (PCI:0000:01:00): 31, pid=5, name=a, changed from 0x0 to 0x1",
		ok:   true,
		want: XidReport{Bus: pci("0000:01:00"), Code: 31, XidDetail: reading.XidDetail{PID: 5, ProcessName: "a", Text: "changed from 0x0 to 0x1"}},
	},
	{
		name: "62 micro-controller halt with register dump",
		in:   "NVRM: Xid (PCI:0000:01:00): 62, pid=2171, name=Xorg, 0000(0000) 00000000 00000000",
		ok:   true,
		want: XidReport{Bus: pci("0000:01:00"), Code: 62, XidDetail: reading.XidDetail{PID: 2171, ProcessName: "Xorg", Text: "0000(0000) 00000000 00000000"}},
	},
	{
		name: "62 older form without pid",
		in:   "NVRM: Xid (PCI:0000:01:00): 62, 322bff9a 0000b3b8 00000000 206a4b08",
		ok:   true,
		want: XidReport{Bus: pci("0000:01:00"), Code: 62, XidDetail: reading.XidDetail{Text: "322bff9a 0000b3b8 00000000 206a4b08"}},
	},
	{
		name: "45 preemptive cleanup",
		in:   "NVRM: Xid (PCI:0000:01:00): 45, pid=15041, name=zed-editor, channel 0x00000006",
		ok:   true,
		want: XidReport{Bus: pci("0000:01:00"), Code: 45, XidDetail: reading.XidDetail{PID: 15041, ProcessName: "zed-editor", Text: "channel 0x00000006"}},
	},
	{
		name: "MIG GPU instance",
		in:   "NVRM: Xid (PCI:0000:3b:00 GPU-I:05): 31, pid=7194, name=trainer, Ch 00000008, intr 00000000",
		ok:   true,
		want: XidReport{Bus: pci("0000:3b:00"), Code: 31, XidDetail: reading.XidDetail{PID: 7194, ProcessName: "trainer", Text: "Ch 00000008, intr 00000000"}},
	},
	{
		name: "MIG GPU and compute instance",
		in:   "NVRM: Xid (PCI:0000:3b:00 GPU-I:01 GPU-CI:02): 13, pid=9, name=a, Graphics Exception",
		ok:   true,
		want: XidReport{Bus: pci("0000:3b:00"), Code: 13, XidDetail: reading.XidDetail{PID: 9, ProcessName: "a", Text: "Graphics Exception"}},
	},
	{
		name: "oldest form without PCI prefix",
		in:   "NVRM: Xid (0000:01:00): 31, Ch 0000000b, engmask 00000120, intr 10000000",
		ok:   true,
		want: XidReport{Bus: pci("0000:01:00"), Code: 31, XidDetail: reading.XidDetail{Text: "Ch 0000000b, engmask 00000120, intr 10000000"}},
	},
	{
		name: "syslog prefix before the marker",
		in:   "Oct 03 17:59:47 host kernel: [ 123.456] NVRM: Xid (PCI:0000:01:00): 45, pid=2171, name=xdg-desktop-por, channel 0x0000000a",
		ok:   true,
		want: XidReport{Bus: pci("0000:01:00"), Code: 45, XidDetail: reading.XidDetail{PID: 2171, ProcessName: "xdg-desktop-por", Text: "channel 0x0000000a"}},
	},
	{
		name: "message starting at Xid",
		in:   "Xid (PCI:0000:01:00): 48, An uncorrectable double bit error",
		ok:   true,
		want: XidReport{Bus: pci("0000:01:00"), Code: 48, XidDetail: reading.XidDetail{Text: "An uncorrectable double bit error"}},
	},
	{
		name: "code alone",
		in:   "NVRM: Xid (PCI:0000:01:00): 79",
		ok:   true,
		want: XidReport{Bus: pci("0000:01:00"), Code: 79},
	},
	{
		name: "pid alone",
		in:   "NVRM: Xid (PCI:0000:01:00): 13, pid=42",
		ok:   true,
		want: XidReport{Bus: pci("0000:01:00"), Code: 13, XidDetail: reading.XidDetail{PID: 42}},
	},
	{
		name: "garbage pid reads as zero",
		in:   "NVRM: Xid (PCI:0000:01:00): 13, pid=12ab, name=x, text",
		ok:   true,
		want: XidReport{Bus: pci("0000:01:00"), Code: 13, XidDetail: reading.XidDetail{ProcessName: "x", Text: "text"}},
	},
	{
		name: "trailing newline and spaces trimmed",
		in:   "NVRM: Xid (PCI:0000:01:00): 79, GPU has fallen off the bus.  \n",
		ok:   true,
		want: XidReport{Bus: pci("0000:01:00"), Code: 79, XidDetail: reading.XidDetail{Text: "GPU has fallen off the bus."}},
	},
	{name: "not an Xid line", in: "NVRM: GPU at PCI:0000:01:00: GPU-1139a0a3-3982-ae1d-ccd6-8538802f3bdc"},
	{name: "empty", in: ""},
	{name: "NVSwitch SXid", in: "nvidia-nvswitch0: SXid (PCI:0000:05:00.0): 12028, Non-fatal, Link 07 egress non-posted PRIV error"},
	{name: "Xid mentioned mid-sentence", in: "NVRM: kgspRcAndNotifyAllChannels_IMPL: RC all channels for critical error 79. Xid (PCI:0000:01:00): 79"},
	{name: "code not a number", in: "NVRM: Xid (PCI:0000:66:00): abc, pid=2280636"},
	{name: "code glued to text", in: "NVRM: Xid (PCI:0000:66:00): 79abc, GPU"},
	{name: "code too long", in: "NVRM: Xid (PCI:0000:66:00): 1234567, x"},
	{name: "negative code", in: "NVRM: Xid (PCI:0000:66:00): -5, x"},
	{name: "no closing parenthesis", in: "NVRM: Xid (PCI:0000:66:00: 79, x"},
	{name: "no colon after address", in: "NVRM: Xid (PCI:0000:66:00) 79, x"},
	{name: "garbage address", in: "NVRM: Xid (PCI:zzzz:66:00): 79, x"},
	{name: "empty address", in: "NVRM: Xid (): 79, x"},
	{name: "unknown attribute after address", in: "NVRM: Xid (PCI:0000:66:00 foo): 79, x"},
}

func TestParseXid(t *testing.T) {
	checkLines(t, "ParseXid", ParseXid, xidTests)
}

// TestParseXidFromRecord runs the whole path a kernel line takes: record,
// then Xid, then a key that matches the NVML address.
func TestParseXidFromRecord(t *testing.T) {
	rec, err := ParseRecord([]byte(`3,901,88000000,-;NVRM: Xid (PCI:0000:4b:00): 154, GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot Required)` + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	x, ok := ParseXid(rec.Message)
	if !ok {
		t.Fatalf("ParseXid(%q) not ok", rec.Message)
	}
	if nvml := pci("00000000:4B:00.0"); x.Bus != nvml {
		t.Errorf("Bus = %v, want %v (the NVML address)", x.Bus, nvml)
	}
	if v, ok := x.RecoveryAction.Get(); !ok || v != 2 {
		t.Errorf("RecoveryAction = %v, %v; want 2, true", v, ok)
	}
}

// pci parses a PCI address the test knows to be valid.
func pci(s string) reading.PCIAddr {
	a, err := reading.ParsePCIAddr(s)
	if err != nil {
		panic(err)
	}
	return a
}

// TestXidEvents: an Xid line's events carry the line and its detail, parsed
// once; an Xid 154 that names the new action is followed by the recovery
// action event, one without a value is not.
func TestXidEvents(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name, msg string
		kinds     []reading.EventKind
		data      []uint64
	}{
		{"79", "NVRM: Xid (PCI:0000:01:00): 79, pid=7, name=python3, GPU has fallen off the bus.",
			[]reading.EventKind{reading.EventXid}, []uint64{79}},
		{"154 with the new action", "NVRM: Xid (PCI:0000:01:00): 154, GPU recovery action changed from 0x0 (None) to 0x3 (Drain P2P)",
			[]reading.EventKind{reading.EventXid, reading.EventRecovery}, []uint64{154, 3}},
		{"154 without a value", "NVRM: Xid (PCI:0000:01:00): 154, GPU recovery action changed from None to GPU Reset Required",
			[]reading.EventKind{reading.EventXid}, []uint64{154}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x, ok := ParseXid(tc.msg)
			if !ok {
				t.Fatalf("ParseXid(%q) failed", tc.msg)
			}
			rec := Record{Time: 42 * time.Second, Message: tc.msg, Backlog: true}
			evs := x.Events(rec, now)
			if len(evs) != len(tc.kinds) {
				t.Fatalf("%d events, want %d: %+v", len(evs), len(tc.kinds), evs)
			}
			for i, e := range evs {
				want := reading.Event{Time: now, GPU: -1, BusID: "0000:01:00.0", Kind: tc.kinds[i], Source: reading.SourceKmsg,
					Data: tc.data[i], Text: tc.msg, Xid: x.XidDetail, KernelTime: 42 * time.Second, Backlog: true}
				if e != want {
					t.Errorf("event %d:\n got %+v\nwant %+v", i, e, want)
				}
			}
		})
	}
	x, _ := ParseXid("NVRM: Xid (PCI:0000:01:00): 154, GPU recovery action changed from 0x0 (None) to 0x3 (Drain P2P)")
	if x.RecoveryWords != "Drain P2P" || x.RecoveryAction != reading.Some[uint64](3) {
		t.Errorf("154's detail %+v: want action 3 with the driver's words", x.XidDetail)
	}
}
