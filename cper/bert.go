package cper

import (
	"encoding/binary"
	"fmt"
	"time"
)

// DefaultBERTPath is where Linux exposes the ACPI Boot Error Record Table's
// data: the error the firmware recorded before this boot (a silent host
// reset leaves no Xid, only this).
const DefaultBERTPath = "/sys/firmware/acpi/tables/data/BERT"

// DefaultRasdaemonDB is where rasdaemon keeps the errors it decoded.
const DefaultRasdaemonDB = "/var/lib/rasdaemon/ras-mc_event.db"

// Sizes of ACPI 6.5's Generic Error Status Block (18.3.2.7.1) and Generic
// Error Data Entry (revision 3 adds the 8-byte time stamp).
const (
	statusBlockLen = 20
	dataEntryLen   = 64
)

// ParseBERT decodes the BERT data region: a Generic Error Status Block,
// whose entries are CPER sections. It returns the block as a Record (no
// record id: the region has none; the first entry's time stamp), ok false
// when the block reports no error. Errors wrap ErrCorrupt; it never panics.
func ParseBERT(data []byte) (r Record, ok bool, err error) {
	if len(data) < statusBlockLen {
		return r, false, fmt.Errorf("%w: BERT region of %d bytes, a status block is %d", ErrCorrupt, len(data), statusBlockLen)
	}
	le := binary.LittleEndian
	status := le.Uint32(data[0:4])
	dataLen := le.Uint32(data[12:16])
	r.Severity = Severity(le.Uint32(data[16:20]))
	if status == 0 || dataLen == 0 {
		return r, false, nil
	}
	if uint64(statusBlockLen)+uint64(dataLen) > uint64(len(data)) {
		return r, false, fmt.Errorf("%w: BERT data length %d with %d bytes at hand", ErrCorrupt, dataLen, len(data)-statusBlockLen)
	}
	r.Length = statusBlockLen + dataLen
	off := uint32(statusBlockLen)
	for off < r.Length {
		if r.Length-off < dataEntryLen {
			return r, false, fmt.Errorf("%w: BERT entry at %d: %d bytes left, an entry is %d", ErrCorrupt, off, r.Length-off, dataEntryLen)
		}
		e := data[off:r.Length]
		hdr := uint32(dataEntryLen)
		if e[21] >= 3 { // revision's major byte: 3 has the time stamp
			hdr += 8
		}
		n := le.Uint32(e[24:28])
		if uint64(hdr)+uint64(n) > uint64(len(e)) {
			return r, false, fmt.Errorf("%w: BERT entry at %d of %d bytes outside the region", ErrCorrupt, off, n)
		}
		s := Section{Offset: off + hdr, Length: n, Type: GUID(e[0:16]), Severity: Severity(le.Uint32(e[16:20]))}
		if e[22]&(1<<1) != 0 {
			s.FRUText = cString(e[44:64])
		}
		if hdr > dataEntryLen && e[22]&(1<<2) != 0 && r.Time.IsZero() {
			r.Time, r.TimePrecise = timestamp(e[64:72])
		}
		r.Sections = append(r.Sections, s)
		off += hdr + n
	}
	return r, true, nil
}

// FileName is a saved record's base name, cper-<time>-<source> (the time
// to the millisecond, local, as the snapshots are named).
func FileName(t time.Time, source string) string {
	return "cper-" + t.Format("20060102-150405.000") + "-" + source
}
