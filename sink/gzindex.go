package sink

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"io"
	"time"
)

// A finished day is gzipped as a series of gzip members (RFC 1952 allows
// any number; gunzip, zcat and Go's gzip.Reader read them as one stream),
// each about gzMemberInput bytes of whole CSV lines, a file's preamble (its
// board line and header) always starting a member of its own. Each member's header carries an extra field
// (subfield "GT") with the member's length and its first line's timestamp,
// so a reader walks the members' headers, seeks to the one before the time
// it wants and decompresses from there: a minute of a day costs a member or
// two, not the day. This is the idea of BGZF (the SAM/BAM block gzip),
// with the timestamps added.
const gzMemberInput = 1 << 20

// gzExtraID is the extra subfield's id ("GT": gpu-telemetry).
var gzExtraID = [2]byte{'G', 'T'}

// Layout of the subfield's data: the member's length in bytes (header to
// trailer, little endian), flags, then the timestamp of its first line (up
// to the first comma; empty for a member that starts with the header line).
const (
	gzLenBytes   = 4
	gzFlagHeader = 1 // the member starts with a CSV header line
	gzMaxStamp   = 40
)

// GzMember is one member of a day's .gz, as its header tells.
type GzMember struct {
	Offset int64  // where it starts in the file
	Header bool   // it starts with a CSV header line
	First  string // its first row's timestamp ("" for a header member)
}

// gzWriteMembers compresses r into w as members (see gzMemberInput),
// checking stop between members.
func gzWriteMembers(w io.Writer, r io.Reader, stop <-chan struct{}) error {
	br := bufio.NewReaderSize(r, 256<<10)
	var chunk, member bytes.Buffer
	zw, err := gzip.NewWriterLevel(&member, gzip.BestSpeed)
	if err != nil {
		return err
	}
	startsMidLine := false // the chunk starts inside a line longer than a member
	flush := func() error {
		if chunk.Len() == 0 {
			return nil
		}
		select {
		case <-stop:
			return errStopped
		default:
		}
		data := chunk.Bytes()
		var flags byte
		stamp := data
		if startsMidLine {
			stamp = nil // neither a row nor a header: never entered by its time
		} else if IsComment(data) || bytes.HasPrefix(data, []byte("timestamp,")) {
			flags, stamp = gzFlagHeader, nil
		} else if i := bytes.IndexByte(stamp, ','); i >= 0 && i <= gzMaxStamp {
			stamp = stamp[:i]
		} else {
			stamp = nil
		}
		extra := make([]byte, 4, 4+gzLenBytes+1+len(stamp))
		extra[0], extra[1] = gzExtraID[0], gzExtraID[1]
		binary.LittleEndian.PutUint16(extra[2:], uint16(gzLenBytes+1+len(stamp)))
		extra = append(extra, 0, 0, 0, 0, flags)
		extra = append(extra, stamp...)
		member.Reset()
		zw.Reset(&member)
		zw.Header.Extra = extra
		if _, err := zw.Write(data); err != nil {
			return err
		}
		if err := zw.Close(); err != nil {
			return err
		}
		// The header is 10 bytes, then XLEN (2), then the subfield's id and
		// length (4): the member's length goes right after.
		b := member.Bytes()
		binary.LittleEndian.PutUint32(b[16:], uint32(len(b)))
		chunk.Reset()
		startsMidLine = false
		_, err := w.Write(b)
		return err
	}
	onlyComments := false // the chunk holds comment lines only (a preamble's start)
	for {
		line, rerr := br.ReadSlice('\n')
		if rerr == bufio.ErrBufferFull {
			// A line longer than the buffer: kept in its member while the
			// member is small; a line longer than a member (a row is under
			// 2 KiB: damage, or put there) goes on in the next members,
			// so that no line makes the compressor hold more than a
			// member's worth, and none is lost.
			chunk.Write(line)
			if chunk.Len() >= gzMemberInput {
				if err := flush(); err != nil {
					return err
				}
				startsMidLine = true
			}
			continue
		}
		// A file's preamble (its board line, then its header) starts a
		// member of its own.
		if (IsComment(line) || bytes.HasPrefix(line, []byte("timestamp,"))) && !onlyComments {
			if err := flush(); err != nil {
				return err
			}
		}
		onlyComments = IsComment(line) && (onlyComments || chunk.Len() == 0)
		chunk.Write(line)
		if chunk.Len() >= gzMemberInput && len(line) > 0 && line[len(line)-1] == '\n' {
			if err := flush(); err != nil {
				return err
			}
		}
		if rerr == io.EOF {
			return flush()
		}
		if rerr != nil {
			return rerr
		}
	}
}

// GzMembers lists the members of a .gz written in members (gzWriteMembers)
// by reading their headers only. ok is false for a file written otherwise
// (one member, as older versions and gzip(1) write) or damaged before its
// end: then it is read from its start. A damaged member after the first few
// ends the list there; the reader sees the damage when it gets there.
func GzMembers(r io.ReaderAt, size int64) (members []GzMember, ok bool) {
	var hdr [12]byte
	for off := int64(0); off < size; {
		if _, err := r.ReadAt(hdr[:], off); err != nil || hdr[0] != 0x1f || hdr[1] != 0x8b || hdr[3]&0x04 == 0 {
			return members, len(members) > 0 && off == size
		}
		xlen := int(binary.LittleEndian.Uint16(hdr[10:]))
		extra := make([]byte, xlen)
		if _, err := r.ReadAt(extra, off+12); err != nil {
			return members, false
		}
		m, n, found := parseGzExtra(extra)
		if !found || n <= 0 || off+n > size {
			return members, false
		}
		m.Offset = off
		members = append(members, m)
		off += n
	}
	return members, len(members) > 0
}

// parseGzExtra finds the "GT" subfield in a gzip header's extra field.
func parseGzExtra(extra []byte) (m GzMember, length int64, ok bool) {
	for len(extra) >= 4 {
		n := int(binary.LittleEndian.Uint16(extra[2:]))
		if len(extra) < 4+n {
			return m, 0, false
		}
		data := extra[4 : 4+n]
		if extra[0] == gzExtraID[0] && extra[1] == gzExtraID[1] && n >= gzLenBytes+1 {
			m.Header = data[gzLenBytes]&gzFlagHeader != 0
			m.First = string(data[gzLenBytes+1:])
			return m, int64(binary.LittleEndian.Uint32(data)), true
		}
		extra = extra[4+n:]
	}
	return m, 0, false
}

// GzStart picks, of a .gz's members (GzMembers), where to start reading
// for rows from from on: the last member that begins before it (0: the
// file's start), or back members before that one (the boot log reads one
// more for rows enough before a moment), and the header member that gives
// the layout there.
func GzStart(ms []GzMember, from time.Time, back int) (start, header int64) {
	var rows []int64 // the offsets of the row members before from
	for _, m := range ms {
		if m.Header {
			continue
		}
		t, err := time.Parse(TimestampLayout, m.First)
		if err != nil || !t.Before(from) {
			break
		}
		rows = append(rows, m.Offset)
	}
	if i := len(rows) - 1 - back; i >= 0 {
		start = rows[i]
	} else if len(rows) > 0 {
		start = 0 // fewer members than asked for before from: all of them
	}
	// The header member in force at start: the last one before it.
	for _, m := range ms {
		if m.Offset > start {
			break
		}
		if m.Header {
			header = m.Offset
		}
	}
	return start, header
}

// GzPreamble reads the board line and the header (ReadPreamble) of the
// member at off of the .gz f, total bytes long.
func GzPreamble(f io.ReaderAt, off, total int64) (b Board, ok bool, header string, err error) {
	zr, err := gzip.NewReader(io.NewSectionReader(f, off, total-off))
	if err != nil {
		return b, false, "", err
	}
	zr.Multistream(false)
	b, ok, header, _, err = ReadPreamble(NewLineReader(zr))
	return b, ok, header, err
}
