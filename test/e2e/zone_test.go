package e2e

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// fixedZone writes a TZif file for a zone at a fixed offset from UTC (off
// seconds east; whole minutes, as in every real zone) and returns its path,
// for the logger's TZ, and the zone.
func fixedZone(t *testing.T, off int32) (string, *time.Location) {
	t.Helper()
	// TZif version 1: header, no transitions, one local time type, "TST".
	var b bytes.Buffer
	b.WriteString("TZif")
	b.Write(make([]byte, 16))
	for _, n := range []uint32{0, 0, 0, 0, 1, 4} { // isutcnt isstdcnt leapcnt timecnt typecnt charcnt
		binary.Write(&b, binary.BigEndian, n)
	}
	binary.Write(&b, binary.BigEndian, off)
	b.Write([]byte{0, 0}) // isdst, abbreviation index
	b.WriteString("TST\x00")
	path := filepath.Join(t.TempDir(), "zone.tzif")
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	loc, err := time.LoadLocationFromTZData("TST", b.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	return path, loc
}

// noonZone returns the TZ of a fixed zone in which it is about noon now, so
// local midnight, where the logger starts the next day's files, is about 12
// hours from any test's run. The harness starts every logger in it (a test
// that counts the rows of the newest CSV would miscount across a new day);
// the midnight test sets its own.
func noonZone(t *testing.T) string {
	t.Helper()
	now := time.Now().UTC()
	sinceMidnight := now.Sub(now.Truncate(24 * time.Hour)).Truncate(time.Minute)
	off := int32((12*time.Hour - sinceMidnight).Seconds()) // in (-12 h, 12 h]
	path, loc := fixedZone(t, off)
	if h := now.In(loc).Hour(); h != 11 && h != 12 {
		t.Fatalf("zone built wrong: %v is %v there", now, now.In(loc))
	}
	return path
}

// TestNoonZone: the harness's zone puts local midnight far from now, and
// the logger writes its timestamps in it, with the offset.
func TestNoonZone(t *testing.T) {
	t.Parallel()
	_, tb := recordRows(t, opts{}, 0, 2, 20*time.Second)
	rows := tb.rows
	ts := parseTime(t, rows[len(rows)-1][0])
	if h := ts.Hour(); h < 10 || h > 13 {
		t.Errorf("last row stamped %s: local hour %d, want about noon", rows[len(rows)-1][0], h)
	}
	if d := time.Since(ts); d < 0 || d > time.Minute {
		t.Errorf("last row stamped %s, %v before now", rows[len(rows)-1][0], d)
	}
}
