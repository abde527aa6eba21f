package cper

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Sizes of UEFI Appendix N's record header (N.2.1) and section descriptor
// (N.2.2).
const (
	headerLen     = 128
	descriptorLen = 72
)

// ErrCorrupt is wrapped by every decoding error: a record that is short,
// lacks its signature, or whose lengths point outside it.
var ErrCorrupt = errors.New("corrupt CPER record")

// Severity is a record's or a section's error severity (N.2.1).
type Severity uint32

// The severities UEFI defines; another value is written as its number.
const (
	SevRecoverable   Severity = 0
	SevFatal         Severity = 1
	SevCorrected     Severity = 2
	SevInformational Severity = 3
)

func (s Severity) String() string {
	switch s {
	case SevRecoverable:
		return "recoverable"
	case SevFatal:
		return "fatal"
	case SevCorrected:
		return "corrected"
	case SevInformational:
		return "informational"
	}
	return strconv.FormatUint(uint64(s), 10)
}

// Validation bits of the record header: which optional fields are valid.
const (
	validPlatformID  = 1 << 0
	validTimestamp   = 1 << 1
	validPartitionID = 1 << 2
)

// Record is a decoded CPER record header and its section descriptors.
type Record struct {
	Revision     uint16
	Severity     Severity
	Validation   uint32
	Length       uint32    // the whole record's length, header included
	Time         time.Time // zero when the record does not give one (or it is not a date)
	TimePrecise  bool      // the time stamp's precision bit: the firmware's clock, not an estimate
	PlatformID   GUID      // zero when not valid
	PartitionID  GUID      // zero when not valid
	CreatorID    GUID
	Notification GUID
	ID           uint64 // the record id: unique per record on one platform
	Flags        uint32
	Sections     []Section
}

// Section is one section descriptor.
type Section struct {
	Offset, Length uint32
	Type           GUID
	Severity       Severity
	FRUText        string // the field replaceable unit's name, when given
}

// Parse decodes one record: its header, then as many section descriptors
// as it says. data may be longer than the record (Split cuts a buffer into
// records). Errors wrap ErrCorrupt; Parse never panics.
func Parse(data []byte) (Record, error) {
	var r Record
	if len(data) < headerLen {
		return r, fmt.Errorf("%w: %d bytes, a header is %d", ErrCorrupt, len(data), headerLen)
	}
	if string(data[0:4]) != "CPER" {
		return r, fmt.Errorf("%w: signature %q, want \"CPER\"", ErrCorrupt, data[0:4])
	}
	le := binary.LittleEndian
	if end := le.Uint32(data[6:10]); end != 0xffffffff {
		return r, fmt.Errorf("%w: signature end %#x, want 0xffffffff", ErrCorrupt, end)
	}
	r.Revision = le.Uint16(data[4:6])
	n := int(le.Uint16(data[10:12]))
	r.Severity = Severity(le.Uint32(data[12:16]))
	r.Validation = le.Uint32(data[16:20])
	r.Length = le.Uint32(data[20:24])
	if r.Length < headerLen || uint64(r.Length) > uint64(len(data)) {
		return r, fmt.Errorf("%w: record length %d with %d bytes at hand", ErrCorrupt, r.Length, len(data))
	}
	if uint64(headerLen)+uint64(n)*descriptorLen > uint64(r.Length) {
		return r, fmt.Errorf("%w: %d section descriptors do not fit a record of %d bytes", ErrCorrupt, n, r.Length)
	}
	if r.Validation&validTimestamp != 0 {
		r.Time, r.TimePrecise = timestamp(data[24:32])
	}
	if r.Validation&validPlatformID != 0 {
		r.PlatformID = GUID(data[32:48])
	}
	if r.Validation&validPartitionID != 0 {
		r.PartitionID = GUID(data[48:64])
	}
	r.CreatorID = GUID(data[64:80])
	r.Notification = GUID(data[80:96])
	r.ID = le.Uint64(data[96:104])
	r.Flags = le.Uint32(data[104:108])
	for i := range n {
		d := data[headerLen+i*descriptorLen : headerLen+(i+1)*descriptorLen]
		s := Section{Offset: le.Uint32(d[0:4]), Length: le.Uint32(d[4:8]), Type: GUID(d[16:32]),
			Severity: Severity(le.Uint32(d[48:52])), FRUText: cString(d[52:72])}
		if d[10]&(1<<1) == 0 { // validation bit 1: FRU text valid
			s.FRUText = ""
		}
		if uint64(s.Offset)+uint64(s.Length) > uint64(r.Length) {
			return r, fmt.Errorf("%w: section %d at %d+%d outside a record of %d bytes", ErrCorrupt, i, s.Offset, s.Length, r.Length)
		}
		r.Sections = append(r.Sections, s)
	}
	return r, nil
}

// Split cuts a buffer of records laid end to end (what one
// nvmlSystemGetCPER_v1 call fills) into records, by each header's length.
// It returns the whole records before any corrupt one, and the error.
func Split(buf []byte) ([][]byte, error) {
	var out [][]byte
	for len(buf) > 0 {
		r, err := Parse(buf)
		if err != nil {
			return out, err
		}
		out = append(out, buf[:r.Length:r.Length])
		buf = buf[r.Length:]
	}
	return out, nil
}

// timestamp decodes the header's BCD time stamp (seconds, minutes, hours,
// precision, day, month, year, century: N.2.1.1), as Linux's cper.c reads
// it. ok false (zero time) when the bytes are not a date.
func timestamp(b []byte) (time.Time, bool) {
	bcd := func(v byte) (int, bool) { return int(v>>4)*10 + int(v&0xf), v>>4 < 10 && v&0xf < 10 }
	var v [8]int
	for i, x := range b {
		if i == 3 {
			continue
		}
		n, ok := bcd(x)
		if !ok {
			return time.Time{}, false
		}
		v[i] = n
	}
	year := v[7]*100 + v[6]
	if v[5] < 1 || v[5] > 12 || v[4] < 1 || v[4] > 31 || v[2] > 23 || v[1] > 59 || v[0] > 60 {
		return time.Time{}, false
	}
	return time.Date(year, time.Month(v[5]), v[4], v[2], v[1], v[0], 0, time.UTC), b[3]&1 != 0
}

// cString is b up to its first NUL, printable ASCII only.
func cString(b []byte) string {
	if i := strings.IndexByte(string(b), 0); i >= 0 {
		b = b[:i]
	}
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r > 0x7e {
			return '?'
		}
		return r
	}, string(b))
}

// SectionTypes is the sections' type names joined by '+' ("pcie+nvidia");
// "none" for a record without sections.
func (r Record) SectionTypes() string {
	if len(r.Sections) == 0 {
		return "none"
	}
	names := make([]string, len(r.Sections))
	for i, s := range r.Sections {
		names[i] = SectionName(s.Type)
	}
	return strings.Join(names, "+")
}

// Fields are the record's key-value pairs for an events.log line, in a
// fixed order: record id, severity, time (empty when not given), sections,
// notification type, length.
func (r Record) Fields() []string {
	ts := ""
	if !r.Time.IsZero() {
		ts = r.Time.Format(time.RFC3339)
	}
	return []string{"record_id", strconv.FormatUint(r.ID, 10), "severity", r.Severity.String(),
		"record_time", ts, "sections", r.SectionTypes(), "notify", notifyName(r.Notification),
		"length", strconv.FormatUint(uint64(r.Length), 10)}
}

// Describe is the record in a few lines for a snapshot: the header, then a
// line per section.
func (r Record) Describe() string {
	var b strings.Builder
	f := r.Fields()
	for i := 0; i < len(f); i += 2 {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(f[i] + "=" + f[i+1])
	}
	b.WriteByte('\n')
	for i, s := range r.Sections {
		fmt.Fprintf(&b, "  section %d: %s severity=%s length=%d", i, SectionName(s.Type), s.Severity, s.Length)
		if s.FRUText != "" {
			fmt.Fprintf(&b, " fru=%q", s.FRUText)
		}
		b.WriteByte('\n')
	}
	return b.String()
}
