package kmsg

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"
)

// Record is one kernel log record as /dev/kmsg delivers it.
type Record struct {
	Level    int           // syslog level, 0 (emerg) .. 7 (debug)
	Facility int           // syslog facility; 0 is the kernel
	Seq      uint64        // the kernel's sequence number; a gap means records were lost
	Time     time.Duration // the printk clock (local_clock()), as dmesg prints it; not CLOCK_MONOTONIC (see kclock.Estimator)
	Message  string        // the text, with \xNN escapes undone

	// Backlog is set by Reader on a record of a file or FIFO read before its
	// end was first reached: it was logged long before it arrived, so its
	// arrival says nothing about the kernel log's clock.
	Backlog bool
}

// FromKernel reports whether the kernel logged rec itself: facility 0. The
// kernel gives every record written to /dev/kmsg from user space (logger(1),
// systemd, this daemon's clock markers, anyone's "<0>text") a facility of 1
// (user) or the one the writer names, never 0, so only such a record can be a
// driver's line. A --kmsg file or FIFO says a record's facility in its
// "prio," field, as /dev/kmsg does.
func (r Record) FromKernel() bool { return r.Facility == 0 }

// maxQuote bounds how much of a bad field an error message repeats, so a
// garbage line cannot make a huge log entry.
const maxQuote = 32

// ParseRecord parses one /dev/kmsg record:
//
//	<prio>,<seq>,<usec since boot>,<flags>[,more...];<message>
//
// followed by optional dictionary lines that begin with a space (" KEY=value");
// those are skipped. A trailing newline is allowed. The kernel escapes
// non-printable bytes and '\' in the message as \xNN; ParseRecord undoes that.
// Fields after the flags (such as caller=T123 on some kernels) are ignored.
// The error says which field was wrong and quotes the start of it.
func ParseRecord(line []byte) (Record, error) {
	// One read of /dev/kmsg may carry dictionary lines after the record; only
	// the first line is the record.
	if i := bytes.IndexByte(line, '\n'); i >= 0 {
		line = line[:i]
	}
	semi := bytes.IndexByte(line, ';')
	if semi < 0 {
		return Record{}, fmt.Errorf("kmsg: record %s has no ';' between header and message", quote(line))
	}
	header, msg := line[:semi], line[semi+1:]

	// prio, seq, usec, flags, then anything else.
	var fields [4][]byte
	rest := header
	for i := range fields {
		if i < len(fields)-1 {
			c := bytes.IndexByte(rest, ',')
			if c < 0 {
				return Record{}, fmt.Errorf("kmsg: record header %s has %d of the 4 fields prio,seq,usec,flags", quote(header), i+1)
			}
			fields[i], rest = rest[:c], rest[c+1:]
			continue
		}
		if c := bytes.IndexByte(rest, ','); c >= 0 {
			rest = rest[:c]
		}
		fields[i] = rest
	}

	prio, err := parseDecimal(fields[0])
	if err != nil || prio > math.MaxInt32 {
		return Record{}, fmt.Errorf("kmsg: record priority %s is not a small decimal number", quote(fields[0]))
	}
	seq, err := parseDecimal(fields[1])
	if err != nil {
		return Record{}, fmt.Errorf("kmsg: record sequence number %s: %w", quote(fields[1]), err)
	}
	usec, err := parseDecimal(fields[2])
	if err != nil {
		return Record{}, fmt.Errorf("kmsg: record timestamp %s: %w", quote(fields[2]), err)
	}
	if usec > math.MaxInt64/uint64(time.Microsecond) {
		return Record{}, fmt.Errorf("kmsg: record timestamp %s overflows a duration", quote(fields[2]))
	}
	if len(fields[3]) == 0 {
		return Record{}, fmt.Errorf("kmsg: record header %s has empty flags", quote(header))
	}

	return Record{
		Level:    int(prio & 7),
		Facility: int(prio >> 3),
		Seq:      seq,
		Time:     time.Duration(usec) * time.Microsecond,
		Message:  unescape(msg),
	}, nil
}

var errNotDecimal = errors.New("not a decimal number")

// parseDecimal parses an unsigned decimal without sign, spaces or
// underscores, which strconv.ParseUint would otherwise let through in base 0.
func parseDecimal(b []byte) (uint64, error) {
	if len(b) == 0 {
		return 0, errNotDecimal
	}
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, errNotDecimal
		}
	}
	return strconv.ParseUint(string(b), 10, 64)
}

// unescape undoes the kernel's \xNN escaping. A backslash not followed by
// x and two hex digits is kept as it is: the kernel never writes one, but a
// file fed in with --kmsg might, and losing text is worse than keeping it.
func unescape(b []byte) string {
	if bytes.IndexByte(b, '\\') < 0 {
		return string(b)
	}
	out := make([]byte, 0, len(b))
	for i := 0; i < len(b); i++ {
		if b[i] == '\\' && i+3 < len(b) && b[i+1] == 'x' {
			hi, ok1 := unhex(b[i+2])
			lo, ok2 := unhex(b[i+3])
			if ok1 && ok2 {
				out = append(out, hi<<4|lo)
				i += 3
				continue
			}
		}
		out = append(out, b[i])
	}
	return string(out)
}

// Printed is msg as the kernel prints it in /dev/kmsg, the form ParseRecord
// undoes: every byte below ' ', from 0x7f up, and '\' as \xNN. It is ASCII,
// so text written where only valid UTF-8 may go (events.log, the journal)
// keeps the kernel's bytes, escaped as dmesg shows them, instead of losing
// the invalid ones.
func Printed(msg string) string {
	i := 0
	for i < len(msg) && !kernelEscapes(msg[i]) {
		i++
	}
	if i == len(msg) {
		return msg
	}
	const hex = "0123456789abcdef"
	out := make([]byte, i, len(msg)+16)
	copy(out, msg[:i])
	for ; i < len(msg); i++ {
		c := msg[i]
		if kernelEscapes(c) {
			out = append(out, '\\', 'x', hex[c>>4], hex[c&0xf])
			continue
		}
		out = append(out, c)
	}
	return string(out)
}

// kernelEscapes reports whether the kernel prints c as \xNN in /dev/kmsg.
func kernelEscapes(c byte) bool { return c < ' ' || c >= 0x7f || c == '\\' }

func unhex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// quote returns b quoted for an error message, cut to maxQuote bytes.
func quote(b []byte) string {
	if len(b) > maxQuote {
		return strconv.Quote(string(b[:maxQuote])) + "..."
	}
	return strconv.Quote(string(b))
}
