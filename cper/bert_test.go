package cper

import (
	"encoding/binary"
	"errors"
	"testing"
	"time"
)

// bertRegion lays out a Generic Error Status Block (ACPI 6.5 18.3.2.7.1)
// with one revision-3 Generic Error Data Entry of body bytes.
func bertRegion(section string, body int) []byte {
	le := binary.LittleEndian
	entry := make([]byte, dataEntryLen+8+body)
	g := ParseGUID(section)
	copy(entry[0:16], g[:])
	le.PutUint32(entry[16:20], uint32(SevFatal))
	le.PutUint16(entry[20:22], 0x0300)
	entry[22] = 1<<1 | 1<<2 // FRU text and time stamp valid
	le.PutUint32(entry[24:28], uint32(body))
	copy(entry[44:64], "CPU0")
	copy(entry[64:72], ts)
	b := make([]byte, statusBlockLen, statusBlockLen+len(entry))
	le.PutUint32(b[0:4], 1|1<<4) // uncorrectable valid, one entry
	le.PutUint32(b[12:16], uint32(len(entry)))
	le.PutUint32(b[16:20], uint32(SevFatal))
	return append(b, entry...)
}

func TestParseBERT(t *testing.T) {
	r, ok, err := ParseBERT(bertRegion("dc3ea0b0-a144-4797-b95b-53fa242b6e1d", 24))
	if err != nil || !ok {
		t.Fatalf("ok %v err %v", ok, err)
	}
	if r.Severity != SevFatal || r.SectionTypes() != "processor_ia32_x64" || r.Sections[0].FRUText != "CPU0" || r.Sections[0].Length != 24 {
		t.Errorf("%+v", r)
	}
	if !r.Time.Equal(time.Date(2026, 12, 6, 12, 34, 56, 0, time.UTC)) {
		t.Errorf("time %v", r.Time)
	}
	// No error recorded: block status 0.
	if _, ok, err := ParseBERT(make([]byte, 64)); ok || err != nil {
		t.Errorf("empty region: ok %v err %v", ok, err)
	}
	good := bertRegion("a5bc1114-6f64-4ede-b863-3e83ed7c83b1", 8)
	for i := range good {
		if _, ok, err := ParseBERT(good[:i]); ok || (i >= statusBlockLen && !errors.Is(err, ErrCorrupt)) {
			t.Fatalf("prefix %d: ok %v err %v", i, ok, err)
		}
	}
	bad := append([]byte(nil), good...)
	binary.LittleEndian.PutUint32(bad[statusBlockLen+24:], 1<<30) // entry longer than the region
	if _, _, err := ParseBERT(bad); !errors.Is(err, ErrCorrupt) {
		t.Errorf("entry outside the region: err %v", err)
	}
}

func FuzzParseBERT(f *testing.F) {
	f.Add(bertRegion("d995e954-bbc1-430f-ad91-b44dcb3c6f35", 4))
	f.Fuzz(func(t *testing.T, b []byte) {
		if r, ok, err := ParseBERT(b); ok && err == nil {
			_ = r.Describe()
		}
	})
}
