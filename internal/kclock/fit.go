package kclock

import (
	"strconv"
	"time"
)

// Fit relates our CLOCK_MONOTONIC to the kernel log's printk clock
// (local_clock(), what dmesg and /dev/kmsg print), which is not disciplined by
// NTP and drifts from CLOCK_MONOTONIC. Offset is CLOCK_MONOTONIC minus printk
// time at Ref, and it changes by Rate per unit of CLOCK_MONOTONIC:
//
//	printk(mono) = mono - Offset - Rate*(mono-Ref)
//
// The zero value is no estimate (Valid is false): no kernel log record has
// been seen, and dmesg_time is plain CLOCK_MONOTONIC.
type Fit struct {
	Ref       time.Duration // CLOCK_MONOTONIC the fit is anchored at
	Offset    time.Duration // CLOCK_MONOTONIC minus printk time at Ref
	Rate      float64       // change of Offset per unit of CLOCK_MONOTONIC (1e-6 = 1 ppm)
	Confirmed time.Duration // CLOCK_MONOTONIC of the last record that arrived within ConfirmTolerance of the fit
	Records   uint64        // records the fit has seen
	Steps     uint64        // offset steps detected (after a suspend, for instance)
	Markers   uint64        // of the records, markers the logger wrote itself
}

// ConfirmTolerance is how close a record's arrival must come to the fit to
// confirm it: its arrival minus its timestamp within this of Offset.
const ConfirmTolerance = 2 * time.Millisecond

// Valid reports whether the fit holds an estimate.
func (f Fit) Valid() bool { return f.Records > 0 }

// OffsetAt is the offset (CLOCK_MONOTONIC minus printk time) at mono.
func (f Fit) OffsetAt(mono time.Duration) time.Duration {
	return f.Offset + time.Duration(f.Rate*float64(mono-f.Ref))
}

// PrintkAt converts CLOCK_MONOTONIC to the printk clock; without an estimate
// it returns mono unchanged.
func (f Fit) PrintkAt(mono time.Duration) time.Duration {
	if !f.Valid() {
		return mono
	}
	return mono - f.OffsetAt(mono)
}

// MonoAt converts a printk timestamp (a kernel log record's time) to
// CLOCK_MONOTONIC; without an estimate it returns p unchanged. It inverts
// PrintkAt.
func (f Fit) MonoAt(p time.Duration) time.Duration {
	if !f.Valid() {
		return p
	}
	// p = m - Offset - Rate*(m-Ref)  =>  m = (p + Offset - Rate*Ref) / (1 - Rate)
	return time.Duration((float64(p+f.Offset) - f.Rate*float64(f.Ref)) / (1 - f.Rate))
}

// Age is how long before mono the fit was last confirmed by a record.
func (f Fit) Age(mono time.Duration) time.Duration {
	return mono - f.Confirmed
}

// Describe says in one line how dmesg_time relates to CLOCK_MONOTONIC at
// mono, for system-info.txt and snapshot headers: "printk clock = CLOCK_MONOTONIC
// - 37.000412 s, drift +200.0 ppm; last confirmed 12.3 s ago (1234 records, 0
// steps)". readable says whether a kernel log is being read at all.
func (f Fit) Describe(mono time.Duration, readable bool) string {
	if !readable {
		return "no kernel log readable: dmesg_time is on CLOCK_MONOTONIC, unchecked"
	}
	if !f.Valid() {
		return "no kernel log record seen yet: dmesg_time is on CLOCK_MONOTONIC, unchecked"
	}
	off := f.OffsetAt(mono)
	sign := "-"
	if off < 0 {
		sign, off = "+", -off
	}
	ppm := strconv.FormatFloat(f.Rate*1e6, 'f', 1, 64)
	if f.Rate >= 0 {
		ppm = "+" + ppm
	}
	return "printk clock = CLOCK_MONOTONIC " + sign + " " + strconv.FormatFloat(off.Seconds(), 'f', 6, 64) + " s" +
		", drift " + ppm + " ppm; last confirmed " + strconv.FormatFloat(f.Age(mono).Seconds(), 'f', 1, 64) + " s ago (" +
		strconv.FormatUint(f.Records, 10) + " records, " + strconv.FormatUint(f.Markers, 10) + " of them our markers, " +
		strconv.FormatUint(f.Steps, 10) + " steps)"
}
