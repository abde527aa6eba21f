package kmsg

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/gpu-telemetry/gpu-telemetry/xid"
)

func FuzzParseRecord(f *testing.F) {
	for _, tt := range recordTests {
		f.Add([]byte(tt.in))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		rec, err := ParseRecord(line)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "kmsg: ") {
				t.Errorf("error %q does not say where it comes from", err)
			}
			return
		}
		if rec.Level < 0 || rec.Level > 7 || rec.Facility < 0 || rec.Time < 0 {
			t.Errorf("ParseRecord(%q) = %+v: field out of range", line, rec)
		}
		// Undoing escapes never lengthens the text.
		if len(rec.Message) > len(line) {
			t.Errorf("message longer (%d) than the record (%d)", len(rec.Message), len(line))
		}
	})
}

func FuzzParseXid(f *testing.F) {
	fuzzLines(f, "ParseXid", ParseXid, xidTests, func(t *testing.T, msg string, x XidReport) {
		if x.Code < 0 || x.PID < 0 {
			t.Errorf("ParseXid(%q) = %+v: negative code or pid", msg, x)
		}
		// The kernel names no function: the address is the GPU's slot.
		if x.Bus != x.Bus.Slot() {
			t.Errorf("ParseXid(%q) = %+v: function set", msg, x)
		}
		if x.RecoveryAction.OK && x.Code != xid.RecoveryXid {
			t.Errorf("recovery action set on Xid %d", x.Code)
		}
		if utf8.ValidString(msg) && !utf8.ValidString(x.Text) {
			t.Errorf("Text %q is not valid UTF-8 though the message was", x.Text)
		}
	})
}

// FuzzParseDriverXid: the daemon's parser takes only a line that starts with
// the driver's prefix, and agrees with ParseXid on it; every other message
// (a kernel line about a task named like the driver's too) is ErrNotXid,
// and a malformed Xid line is an error of its own.
func FuzzParseDriverXid(f *testing.F) {
	for _, tc := range xidTests {
		f.Add(tc.in)
	}
	for _, tc := range forgedLines {
		f.Add(tc.record[strings.IndexByte(tc.record, ';')+1:])
	}
	f.Fuzz(func(t *testing.T, msg string) {
		x, err := ParseDriverXid(msg)
		if !strings.HasPrefix(msg, xidMarker) || isTaskLine(msg) {
			if !errors.Is(err, ErrNotXid) {
				t.Errorf("ParseDriverXid(%q) = %+v, %v; want ErrNotXid", msg, x, err)
			}
			return
		}
		lenient, ok := ParseXid(msg)
		if (err == nil) != ok || errors.Is(err, ErrNotXid) || lenient != x {
			t.Errorf("ParseDriverXid(%q) = %+v, %v; ParseXid: %+v, %v", msg, x, err, lenient, ok)
		}
	})
}
