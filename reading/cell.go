package reading

import (
	"math"
	"strconv"
	"strings"
)

// A reading's CSV cell: AppendCell writes a stored value in the reading's
// Format, ParseCell reads it back. Every output that writes a reading's
// cell (the CSV, events.log, the crash snapshot) and every reader of the
// logger's files (report) goes through this pair.

// AppendCell appends v, a stored value of reading d, as d's CSV cell.
func (d *Def) AppendCell(b []byte, v uint64) []byte {
	switch d.Format {
	case Watts:
		return strconv.AppendUint(b, (v+500)/1000, 10)
	case CentiWatt:
		return appendCenti(b, (v+5)/10)
	case MiB:
		return strconv.AppendUint(b, v>>20, 10)
	case Seconds:
		return AppendSeconds(b, v)
	case Hex4:
		b = append(b, "0x"...)
		for n := hexDigits(v); n < 4; n++ {
			b = append(b, '0')
		}
		return strconv.AppendUint(b, v, 16)
	}
	if d.Signed() {
		return strconv.AppendInt(b, int64(v), 10)
	}
	return strconv.AppendUint(b, v, 10)
}

// ParseCell reads a cell AppendCell wrote back as the stored value, in the
// stored unit (371.53 in a CentiWatt cell: 371530 mW); ok is false for an
// empty cell, one that does not parse, or one past what the reading holds
// (Fits: a value is not cut to one it can hold). A Watts or MiB cell gives
// back the rounded value the writer kept; a decimal cell may have fewer
// decimals than AppendCell writes (files of older versions).
func (d *Def) ParseCell(cell string) (v uint64, ok bool) {
	v, ok = d.parseCell(cell)
	if !ok || !d.Fits(v) {
		return 0, false
	}
	return v, true
}

func (d *Def) parseCell(cell string) (uint64, bool) {
	switch d.Format {
	case Watts, CentiWatt:
		return parseDecimal(cell, 1000) // W to mW
	case MiB:
		m, err := strconv.ParseUint(cell, 10, 64)
		if err != nil || m > math.MaxUint64>>20 {
			return 0, false
		}
		return m << 20, true
	case Seconds:
		return parseDecimal(cell, 1e9) // s to ns
	case Hex4:
		h, found := strings.CutPrefix(cell, "0x")
		if !found {
			return 0, false
		}
		x, err := strconv.ParseUint(h, 16, 64)
		return x, err == nil
	}
	if d.Signed() {
		x, err := strconv.ParseInt(cell, 10, 64)
		return uint64(x), err == nil
	}
	x, err := strconv.ParseUint(cell, 10, 64)
	return x, err == nil
}

// AppendSeconds appends ns nanoseconds as seconds with 3 decimals
// (truncated to the millisecond).
func AppendSeconds(b []byte, ns uint64) []byte {
	ms := ns / 1_000_000
	b = strconv.AppendUint(b, ms/1000, 10)
	b = append(b, '.')
	frac := ms % 1000
	if frac < 100 {
		b = append(b, '0')
	}
	if frac < 10 {
		b = append(b, '0')
	}
	return strconv.AppendUint(b, frac, 10)
}

// appendCenti writes hundredths as a decimal with two places.
func appendCenti(b []byte, c uint64) []byte {
	b = strconv.AppendUint(b, c/100, 10)
	b = append(b, '.')
	f := c % 100
	if f < 10 {
		b = append(b, '0')
	}
	return strconv.AppendUint(b, f, 10)
}

// hexDigits returns the number of hex digits of v (at least 1).
func hexDigits(v uint64) int {
	n := 1
	for v >= 16 {
		v >>= 4
		n++
	}
	return n
}

// parseDecimal reads a non-negative decimal ("371.53", "600") as a whole
// number of 1/unit (unit a power of ten): exactly, digits past the unit
// dropped.
func parseDecimal(s string, unit uint64) (uint64, bool) {
	ip, fp, _ := strings.Cut(s, ".")
	i, err := strconv.ParseUint(ip, 10, 64)
	if err != nil || i > math.MaxUint64/unit {
		return 0, false
	}
	v := i * unit
	for d := unit / 10; fp != ""; fp = fp[1:] {
		c := fp[0]
		if c < '0' || c > '9' {
			return 0, false
		}
		v += uint64(c-'0') * d
		d /= 10
	}
	return v, true
}
