package cper

import (
	"encoding/binary"
	"errors"
	"strings"
	"testing"
	"time"
)

// testSection is a section for build.
type testSection struct {
	typ  string // GUID
	sev  Severity
	body int    // bytes of section body
	fru  string // FRU text ("" none)
}

// build lays out a record as UEFI 2.10 Appendix N does: the 128-byte header,
// 72-byte descriptors, then the section bodies (zeros).
func build(id uint64, sev Severity, ts []byte, secs ...testSection) []byte {
	le := binary.LittleEndian
	n := headerLen + descriptorLen*len(secs)
	for _, s := range secs {
		n += s.body
	}
	b := make([]byte, n)
	copy(b[0:4], "CPER")
	le.PutUint16(b[4:6], 0x0101)
	le.PutUint32(b[6:10], 0xffffffff)
	le.PutUint16(b[10:12], uint16(len(secs)))
	le.PutUint32(b[12:16], uint32(sev))
	valid := uint32(validPlatformID)
	if ts != nil {
		valid |= validTimestamp
		copy(b[24:32], ts)
	}
	le.PutUint32(b[16:20], valid)
	le.PutUint32(b[20:24], uint32(n))
	p := ParseGUID("11111111-2222-3333-4444-555555555555")
	copy(b[32:48], p[:])
	c := ParseGUID("6d5244f2-2712-11ec-bea7-cb3fdb95c786")
	copy(b[64:80], c[:])
	nt := ParseGUID("e8f56ffe-919c-4cc5-ba88-65abe14913bb") // MCE
	copy(b[80:96], nt[:])
	le.PutUint64(b[96:104], id)
	off := headerLen + descriptorLen*len(secs)
	for i, s := range secs {
		d := b[headerLen+i*descriptorLen:]
		le.PutUint32(d[0:4], uint32(off))
		le.PutUint32(d[4:8], uint32(s.body))
		le.PutUint16(d[8:10], 0x0300)
		g := ParseGUID(s.typ)
		copy(d[16:32], g[:])
		le.PutUint32(d[48:52], uint32(s.sev))
		if s.fru != "" {
			d[10] |= 1 << 1
			copy(d[52:72], s.fru)
		}
		off += s.body
	}
	return b
}

// 2026-12-06 12:34:56, precise: BCD seconds, minutes, hours, precision, day, month, year, century.
var ts = []byte{0x56, 0x34, 0x12, 0x01, 0x06, 0x12, 0x26, 0x20}

func TestParseRecord(t *testing.T) {
	rec := build(42, SevFatal, ts,
		testSection{typ: "d995e954-bbc1-430f-ad91-b44dcb3c6f35", sev: SevFatal, body: 16, fru: "GPU0"},
		testSection{typ: "6d5244f2-2712-11ec-bea7-cb3fdb95c786", sev: SevCorrected, body: 8},
		testSection{typ: "01234567-89ab-cdef-0123-456789abcdef", sev: 9, body: 0})
	r, err := Parse(rec)
	if err != nil {
		t.Fatal(err)
	}
	if r.ID != 42 || r.Severity != SevFatal || r.Revision != 0x0101 || int(r.Length) != len(rec) {
		t.Errorf("header: %+v", r)
	}
	if want := time.Date(2026, 12, 6, 12, 34, 56, 0, time.UTC); !r.Time.Equal(want) || !r.TimePrecise {
		t.Errorf("time %v precise %v, want %v precise", r.Time, r.TimePrecise, want)
	}
	if r.PlatformID.String() != "11111111-2222-3333-4444-555555555555" || r.PartitionID != (GUID{}) {
		t.Errorf("platform %s partition %s", r.PlatformID, r.PartitionID)
	}
	if got, want := r.SectionTypes(), "pcie+nvidia+01234567-89ab-cdef-0123-456789abcdef"; got != want {
		t.Errorf("sections %q, want %q", got, want)
	}
	if r.Sections[0].FRUText != "GPU0" || r.Sections[1].FRUText != "" || r.Sections[2].Severity.String() != "9" {
		t.Errorf("sections %+v", r.Sections)
	}
	got := strings.Join(r.Fields(), " ")
	want := "record_id 42 severity fatal record_time 2026-12-06T12:34:56Z sections pcie+nvidia+01234567-89ab-cdef-0123-456789abcdef notify MCE length 368" // 128 + 3*72 + 16 + 8
	if got != want {
		t.Errorf("fields\n%s\nwant\n%s", got, want)
	}
	if d := r.Describe(); !strings.Contains(d, `section 0: pcie severity=fatal length=16 fru="GPU0"`) {
		t.Errorf("describe:\n%s", d)
	}
}

func TestParseNoTimestamp(t *testing.T) {
	r, err := Parse(build(1, SevCorrected, nil))
	if err != nil || !r.Time.IsZero() || r.SectionTypes() != "none" {
		t.Fatalf("%+v %v", r, err)
	}
	// A time stamp that is not BCD is no time, not an error.
	r, err = Parse(build(1, SevCorrected, []byte{0xff, 0, 0, 0, 1, 1, 0x26, 0x20}))
	if err != nil || !r.Time.IsZero() {
		t.Fatalf("%+v %v", r, err)
	}
}

func TestParseCorrupt(t *testing.T) {
	good := build(7, SevRecoverable, ts, testSection{typ: "d995e954-bbc1-430f-ad91-b44dcb3c6f35", body: 4})
	mut := func(f func(b []byte)) []byte { b := append([]byte(nil), good...); f(b); return b }
	le := binary.LittleEndian
	for _, tc := range []struct {
		name string
		data []byte
		want string
	}{
		{"empty", nil, "0 bytes"},
		{"short header", good[:100], "100 bytes"},
		{"signature", mut(func(b []byte) { copy(b, "XPER") }), "signature"},
		{"signature end", mut(func(b []byte) { b[9] = 0 }), "signature end"},
		{"length past data", mut(func(b []byte) { le.PutUint32(b[20:24], 1<<31) }), "record length"},
		{"length under header", mut(func(b []byte) { le.PutUint32(b[20:24], 12) }), "record length"},
		{"too many descriptors", mut(func(b []byte) { le.PutUint16(b[10:12], 9) }), "descriptors"},
		{"section outside", mut(func(b []byte) { le.PutUint32(b[headerLen:], 1<<31) }), "outside"},
		{"truncated body", good[:len(good)-1], "record length"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(tc.data)
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want ErrCorrupt with %q", err, tc.want)
			}
		})
	}
	// Every prefix is an error or (the whole) a record: never a panic.
	for i := range good {
		if _, err := Parse(good[:i]); err == nil {
			t.Fatalf("prefix of %d bytes parsed", i)
		}
	}
}

func TestSplit(t *testing.T) {
	a, b := build(1, SevFatal, ts), build(2, SevCorrected, nil, testSection{typ: "a5bc1114-6f64-4ede-b863-3e83ed7c83b1", body: 3})
	buf := append(append(append([]byte(nil), a...), b...), "CPE"...)
	recs, err := Split(buf)
	if len(recs) != 2 || string(recs[0]) != string(a) || string(recs[1]) != string(b) {
		t.Fatalf("records %d", len(recs))
	}
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("trailing bytes: err %v", err)
	}
	if recs, err := Split(append(a, b...)); err != nil || len(recs) != 2 {
		t.Fatalf("%d %v", len(recs), err)
	}
}

func TestGUIDRoundTrip(t *testing.T) {
	s := "d995e954-bbc1-430f-ad91-b44dcb3c6f35"
	g := ParseGUID(s)
	if g.String() != s || g[0] != 0x54 || g[3] != 0xd9 || g[8] != 0xad {
		t.Fatalf("%s % x", g, g[:])
	}
}

func FuzzParse(f *testing.F) {
	f.Add(build(3, SevFatal, ts, testSection{typ: "d995e954-bbc1-430f-ad91-b44dcb3c6f35", body: 4}))
	f.Add([]byte("CPER"))
	f.Fuzz(func(t *testing.T, b []byte) {
		if r, err := Parse(b); err == nil {
			_ = r.Describe()
			if int(r.Length) > len(b) {
				t.Fatalf("length %d of %d bytes", r.Length, len(b))
			}
		}
		_, _ = Split(b)
	})
}
