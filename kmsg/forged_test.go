package kmsg

import (
	"errors"
	"strconv"
	"strings"
	"testing"
)

// forgedLines are kernel log records whose text holds the driver's, as a
// user can have them logged (issue 41): the kernel's own warnings and device
// strings quoting a user's text, and records written to /dev/kmsg from user
// space (facility 1). take is what the daemon makes of each (taken), "" for
// nothing; the driver's genuine lines are beside them.
var forgedLines = []struct {
	name, record, take string
}{
	{name: "execve warning quoting a program name",
		record: `4,100,1000000,-;process 'a.out' launched './NVRM: Xid (PCI:0000:21:00): 79, x' with NULL argv: empty string added`},
	{name: "USB product string",
		record: `6,101,1000100,-;usb 1-1: Product: NVRM: Xid (PCI:0000:01:00): 62, pid=1, name=x, forged`},
	{name: "USB product string as a GSP line",
		record: `6,102,1000200,-;usb 1-1: Product: NVRM: GPU1 _kgspLogRpcTimeout: ********* GSP Timeout *********`},
	{name: "user-space record (facility 1) of an Xid 48",
		record: `12,103,1000300,-;NVRM: Xid (PCI:0000:01:00): 48, pid=1, name=x, An uncorrectable double bit error`},
	{name: "user-space record of an Xid 119 naming GPU1",
		record: `12,104,1000400,-;NVRM: Xid (PCI:0000:01:00): 119, pid=1, name=x, Timeout after 45s of waiting for RPC response from GPU1 GSP!`},
	{name: "user-space record of a GSP line",
		record: `11,105,1000500,-;NVRM: GPU1 _kgspLogRpcTimeout: ********* GSP Timeout *********`},
	{name: "user-space record of an AER line (facility 3, daemon)",
		record: `27,106,1000600,-;pcieport 0000:00:01.0: AER: Uncorrected (Fatal) error received: 0000:01:00.0`},
	{name: "a program named 'NVRM: GPU0 ' in a file named as a fallen-off-the-bus line segfaults (the kernel's own line)",
		record: `6,110,1001000,-;NVRM: GPU0 [4242]: segfault at 0 ip 0000000000401000 sp 00007ffd00000000 error 4 in 0000:41:00.0 has fallen off the bus[401000+1000]`},
	{name: "the same as a GSP timeout",
		record: `6,111,1001100,-;NVRM: GPU1 [4243]: segfault at 0 ip 0000000000401000 sp 00007ffd00000000 error 4 in GSP Timeout ***[401000+1000]`},
	{name: "a program named 'NVRM: Xid (' that segfaults",
		record: `6,112,1001200,-;NVRM: Xid ([4244]: segfault at 0 ip 0000000000401000 sp 00007ffd00000000 error 4 in 0000:41:00.0): 79[401000+1000]`},
	{name: "a fatal signal line (print-fatal-signals)",
		record: `4,113,1001300,-;NVRM: GPU0 /4245: potentially unexpected fatal signal 11. 0000:41:00.0 has fallen off the bus`},
	{name: "the driver's Xid 79", take: "xid 79 0000:21:00.0",
		record: `4,107,1000700,-;NVRM: Xid (PCI:0000:21:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.`},
	{name: "the driver's GSP timeout", take: "nvrm GPU1",
		record: `4,108,1000800,-;NVRM: GPU1 _kgspLogRpcTimeout: ********* GSP Timeout *********`},
	{name: "the kernel's AER line", take: "aer 0000:00:01.0",
		record: `3,109,1000900,-;pcieport 0000:00:01.0: AER: Uncorrected (Fatal) error received: 0000:01:00.0`},
}

// taken is what the daemon makes of a record (monitor's onKernelRecord): the
// kernel's records only, then the driver's Xid line, or an AER or NVRM line.
func taken(rec Record) string {
	if !rec.FromKernel() {
		return ""
	}
	if x, err := ParseDriverXid(rec.Message); err == nil {
		return "xid " + strconv.Itoa(x.Code) + " " + x.Bus.String()
	}
	if r, ok := ParseAER(rec.Message); ok {
		return "aer " + r.Device.String()
	}
	if r, ok := ParseNVRM(rec.Message); ok {
		return "nvrm GPU" + strconv.Itoa(r.DriverGPU)
	}
	return ""
}

// TestForgedDriverLines: a record is the driver's only when the kernel
// logged it (facility 0) and it starts with "NVRM: ".
func TestForgedDriverLines(t *testing.T) {
	for _, tc := range forgedLines {
		t.Run(tc.name, func(t *testing.T) {
			rec, err := ParseRecord([]byte(tc.record))
			if err != nil {
				t.Fatal(err)
			}
			if got := taken(rec); got != tc.take {
				t.Errorf("%q taken as %q, want %q", tc.record, got, tc.take)
			}
		})
	}
}

// TestDriverXidAgreesWithParseXid: on a line that starts with the driver's
// prefix ParseDriverXid reads what ParseXid reads, refusing what it refuses
// with an error that is not ErrNotXid; any other line is ErrNotXid.
func TestDriverXidAgreesWithParseXid(t *testing.T) {
	for _, tc := range xidTests {
		t.Run(tc.name, func(t *testing.T) {
			x, err := ParseDriverXid(tc.in)
			if !strings.HasPrefix(tc.in, "NVRM: Xid (") {
				if !errors.Is(err, ErrNotXid) {
					t.Errorf("ParseDriverXid(%q) = %+v, %v; want ErrNotXid", tc.in, x, err)
				}
				return
			}
			if (err == nil) != tc.ok || errors.Is(err, ErrNotXid) {
				t.Fatalf("ParseDriverXid(%q) error %v, want ok %v", tc.in, err, tc.ok)
			}
			if err == nil && x != tc.want {
				t.Errorf("ParseDriverXid(%q)\n got  %+v\n want %+v", tc.in, x, tc.want)
			}
		})
	}
}

// TestMalformedDriverXid: a driver's Xid line whose address or code cannot
// be read is an error saying what is wrong (the daemon counts it), not a
// line of another kind.
func TestMalformedDriverXid(t *testing.T) {
	for _, tc := range []struct{ name, in, says string }{
		{"no PCI domain", "NVRM: Xid (PCI:21:00): 79, pid=1, name=x, GPU has fallen off the bus.", "domain"},
		{"bus over 255", "NVRM: Xid (PCI:0000:1ff:00): 79, pid=1, name=x, GPU has fallen off the bus.", "bus"},
		{"code of 7 digits", "NVRM: Xid (PCI:0000:21:00): 1234567, pid=1, name=x, text", `"1234567"`},
		{"code glued to text", "NVRM: Xid (PCI:0000:21:00): 79abc, text", `"79abc"`},
		{"no closing parenthesis", "NVRM: Xid (PCI:0000:21:00: 79, x", "')'"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x, err := ParseDriverXid(tc.in)
			if err == nil || errors.Is(err, ErrNotXid) {
				t.Fatalf("ParseDriverXid(%q) = %+v, %v; want an error saying what is malformed", tc.in, x, err)
			}
			if !strings.Contains(err.Error(), tc.says) {
				t.Errorf("error %q does not say %s", err, tc.says)
			}
		})
	}
}

// TestGPUNumbersOnlyFromTheDriversText: the driver's GPU number is learnt
// from the "from GPU<n> GSP" of an Xid 119's own text, never from the
// process name before it, nor from another Xid's line that quotes one.
func TestGPUNumbersOnlyFromTheDriversText(t *testing.T) {
	gsp := func(n string) NVRMReport {
		r, ok := ParseNVRM("NVRM: GPU" + n + " _kgspLogRpcTimeout: ********* GSP Timeout *********")
		if !ok {
			t.Fatal("GSP fixture did not parse")
		}
		return r
	}
	for _, tc := range []struct {
		name, line string
		want       map[string]string // driver number: bus it resolves to ("" none)
	}{
		{name: "Xid 13 whose process name says from GPU0",
			line: "NVRM: Xid (PCI:0000:21:00): 13, pid=7, name=x, from GPU0 , Graphics SM Warp Exception on (GPC 0, TPC 0, SM 0): Illegal Instruction Parameter",
			want: map[string]string{"0": ""}},
		{name: "Xid 120 whose process name says from GPU0 GSP",
			line: "NVRM: Xid (PCI:0000:21:00): 120, pid=7, name=, from GPU0 GSP, GSP task exception",
			want: map[string]string{"0": ""}},
		{name: "Xid 119 whose process name says from GPU0 GSP",
			line: "NVRM: Xid (PCI:0000:21:00): 119, pid=7, name=, from GPU0 GSP, Timeout after 45s of waiting for RPC response from GPU1 GSP! Expected function 76 (GSP_RM_CONTROL) (0x20800a4c 0x4).",
			want: map[string]string{"0": "", "1": "0000:21:00.0"}},
		{name: "Xid 119 without GSP after the number",
			line: "NVRM: Xid (PCI:0000:21:00): 119, pid=7, name=x, Timeout after 45s of waiting for RPC response from GPU1",
			want: map[string]string{"1": ""}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x, err := ParseDriverXid(tc.line)
			if err != nil {
				t.Fatal(err)
			}
			var g GPUNumbers
			g.Learn(x)
			for n, bus := range tc.want {
				r := gsp(n)
				g.Resolve(&r)
				got := ""
				if a, ok := r.Bus.Get(); ok {
					got = a.String()
				}
				if got != bus {
					t.Errorf("GPU%s resolved to %q, want %q", n, got, bus)
				}
			}
		})
	}
}
