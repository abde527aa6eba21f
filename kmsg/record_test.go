package kmsg

import (
	"strings"
	"testing"
	"time"
)

// recordTests is shared with FuzzParseRecord as its seed corpus.
var recordTests = []struct {
	name    string
	in      string
	want    Record
	wantErr string // substring of the error; empty when none is expected
}{
	{
		name: "plain",
		in:   "6,1234,5678901,-;hello",
		want: Record{Level: 6, Facility: 0, Seq: 1234, Time: 5678901 * time.Microsecond, Message: "hello"},
	},
	{
		name: "trailing newline",
		in:   "4,2,0,-;[Firmware Bug]: TSC doesn't count with P0 frequency!\n",
		want: Record{Level: 4, Seq: 2, Message: "[Firmware Bug]: TSC doesn't count with P0 frequency!"},
	},
	{
		name: "nvrm xid with dictionary lines",
		in:   "3,88213,4409123456,-;NVRM: Xid (PCI:0000:4b:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.\n SUBSYSTEM=pci\n DEVICE=+pci:0000:4b:00.0\n",
		want: Record{Level: 3, Seq: 88213, Time: 4409123456 * time.Microsecond,
			Message: "NVRM: Xid (PCI:0000:4b:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus."},
	},
	{
		name: "facility from priority",
		in:   "30,7,100,-;systemd[1]: Started foo.",
		want: Record{Level: 6, Facility: 3, Seq: 7, Time: 100 * time.Microsecond, Message: "systemd[1]: Started foo."},
	},
	{
		name: "caller field after flags",
		in:   "6,339,5140900,-,caller=T1;msg",
		want: Record{Level: 6, Seq: 339, Time: 5140900 * time.Microsecond, Message: "msg"},
	},
	{
		name: "continuation flag",
		in:   "6,10,20,c;start of a line",
		want: Record{Level: 6, Seq: 10, Time: 20 * time.Microsecond, Message: "start of a line"},
	},
	{
		name: "semicolon in message",
		in:   "6,1,2,-;a;b",
		want: Record{Level: 6, Seq: 1, Time: 2 * time.Microsecond, Message: "a;b"},
	},
	{
		name: "empty message",
		in:   "6,1,2,-;",
		want: Record{Level: 6, Seq: 1, Time: 2 * time.Microsecond},
	},
	{
		name: "escaped newline and backslash",
		in:   `6,1,2,-;first\x0asecond \x5c end`,
		want: Record{Level: 6, Seq: 1, Time: 2 * time.Microsecond, Message: "first\nsecond \\ end"},
	},
	{
		name: "escape in upper case hex and raw byte",
		in:   `6,1,2,-;del\x7Fhigh\xff`,
		want: Record{Level: 6, Seq: 1, Time: 2 * time.Microsecond, Message: "del\x7fhigh\xff"},
	},
	{
		name: "broken escapes kept as written",
		in:   `6,1,2,-;a\xZZ b\q c\x4`,
		want: Record{Level: 6, Seq: 1, Time: 2 * time.Microsecond, Message: `a\xZZ b\q c\x4`},
	},
	{
		name: "lone trailing backslash",
		in:   `6,1,2,-;end\`,
		want: Record{Level: 6, Seq: 1, Time: 2 * time.Microsecond, Message: `end\`},
	},
	{
		name: "largest sequence number",
		in:   "0,18446744073709551615,0,-;x",
		want: Record{Seq: 18446744073709551615, Message: "x"},
	},
	{name: "empty", in: "", wantErr: "no ';'"},
	{name: "no semicolon", in: "6,1,2,- hello", wantErr: "no ';'"},
	{name: "too few fields", in: "6,1;hello", wantErr: "of the 4 fields"},
	{name: "three fields", in: "6,1,2;hello", wantErr: "of the 4 fields"},
	{name: "empty flags", in: "6,1,2,;hello", wantErr: "empty flags"},
	{name: "priority not a number", in: "x,1,2,-;hello", wantErr: "priority"},
	{name: "negative priority", in: "-6,1,2,-;hello", wantErr: "priority"},
	{name: "plus sign", in: "+6,1,2,-;hello", wantErr: "priority"},
	{name: "priority too large", in: "99999999999,1,2,-;hello", wantErr: "priority"},
	{name: "space before priority", in: " 6,1,2,-;hello", wantErr: "priority"},
	{name: "sequence not a number", in: "6,abc,2,-;hello", wantErr: "sequence number"},
	{name: "sequence overflows", in: "6,18446744073709551616,2,-;hello", wantErr: "sequence number"},
	{name: "timestamp not a number", in: "6,1,1.5,-;hello", wantErr: "timestamp"},
	{name: "timestamp overflows a duration", in: "6,1,9223372036854776,-;hello", wantErr: "overflows"},
	{name: "syslog style line", in: "<6>kernel: hello; world", wantErr: "of the 4 fields"},
	{name: "dictionary line alone", in: " SUBSYSTEM=pci", wantErr: "no ';'"},
}

func TestParseRecord(t *testing.T) {
	for _, tt := range recordTests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseRecord([]byte(tt.in))
			if tt.wantErr != "" {
				if err == nil {
					t.Fatalf("ParseRecord(%q) = %+v, want an error containing %q", tt.in, got, tt.wantErr)
				}
				if !strings.Contains(err.Error(), tt.wantErr) || !strings.HasPrefix(err.Error(), "kmsg: ") {
					t.Errorf("error = %q, want it to start with \"kmsg: \" and contain %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseRecord(%q): %v", tt.in, err)
			}
			if got != tt.want {
				t.Errorf("ParseRecord(%q)\n got %+v\nwant %+v", tt.in, got, tt.want)
			}
		})
	}
}

func TestParseRecordErrorQuotesAreBounded(t *testing.T) {
	in := strings.Repeat("x", 10000) + ",1,2,-;m"
	_, err := ParseRecord([]byte(in))
	if err == nil {
		t.Fatal("want an error")
	}
	if len(err.Error()) > 200 {
		t.Errorf("error is %d bytes long; a bad field should be quoted only in part", len(err.Error()))
	}
}

// Printed gives back the kernel's own escaping of a message ParseRecord
// undid, byte for byte, so text stored as UTF-8 keeps its bytes.
func TestPrintedIsTheKernelsEscaping(t *testing.T) {
	for _, printed := range []string{
		`NVRM: Xid (PCI:0000:01:00): 13, plain`,
		`NVRM: Xid (PCI:0000:01:00): 13, \x1b[1mbold\x1b[0m \x7f \x07 \xff\xfe \xc3\xa9 \x5c`,
		`\x0a`,
	} {
		rec, err := ParseRecord([]byte("3,1,1000,-;" + printed))
		if err != nil {
			t.Fatal(err)
		}
		if got := Printed(rec.Message); got != printed {
			t.Errorf("Printed(%q) = %q, want %q", rec.Message, got, printed)
		}
	}
}
