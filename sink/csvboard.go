package sink

import (
	"bufio"
	"bytes"
	"strconv"
	"strings"

	"github.com/go-logfmt/logfmt"
)

// Board is the physical GPU a CSV file holds, as its first line names it.
// Its CSV files are named by its UUID (BoardID), and they start with a
// comment line naming the board whole (Line), then the header:
//
//	# gpu=0 uuid=GPU-5a3c1e2f-... serial=1791025012340 bus=00000000:01:00.0 name="NVIDIA RTX PRO 6000 ..."
//	timestamp,gpu_temp,...
//
// A comment line, not a column: it costs nothing per row, and CSV readers
// are told to skip it (pandas.read_csv(comment='#'), R's comment.char,
// numpy's default). Empty fields are unknown (a GPU that did not answer at
// start) and left out of the line.
type Board struct {
	Index  int
	UUID   string // GPU-...
	Serial string
	Bus    string // NVML form: 00000000:4B:00.0
	Name   string
}

// ID is the board's part of its files' names (BoardID of its UUID).
func (b Board) ID() string { return BoardID(b.UUID) }

// commentPrefix starts the board line, and any line that is not the header
// or a row.
const commentPrefix = "# "

// IsComment reports whether line (with or without its newline) is a
// comment line: the board line, never a header or a row.
func IsComment(line []byte) bool { return len(line) > 0 && line[0] == '#' }

// Line returns the board line of b's files, with its newline.
func (b Board) Line() []byte {
	return []byte(commentPrefix + b.Text() + "\n")
}

// Text is the board as logfmt (gpu= uuid= serial= bus= name=, the unknown
// ones left out): the board line's text, and run-state's record of it.
func (b Board) Text() string {
	var buf bytes.Buffer
	enc := logfmt.NewEncoder(&buf)
	// Keys are ours and values strings: neither can fail to encode.
	_ = enc.EncodeKeyval("gpu", strconv.Itoa(b.Index))
	for _, kv := range [...][2]string{{"uuid", b.UUID}, {"serial", b.Serial}, {"bus", b.Bus}, {"name", b.Name}} {
		if kv[1] != "" {
			_ = enc.EncodeKeyval(kv[0], kv[1])
		}
	}
	return buf.String()
}

// ParseBoardLine reads a board line (Line); ok is false for any other line.
func ParseBoardLine(line string) (b Board, ok bool) {
	rest, found := strings.CutPrefix(line, commentPrefix)
	if !found {
		return Board{}, false
	}
	return ParseBoard(rest)
}

// ParseBoard reads a board's Text (its first line); ok is false without a
// gpu= index.
func ParseBoard(text string) (b Board, ok bool) {
	d := logfmt.NewDecoder(strings.NewReader(text))
	if !d.ScanRecord() {
		return Board{}, false
	}
	gpu := false
	for d.ScanKeyval() {
		v := string(d.Value())
		switch string(d.Key()) {
		case "gpu":
			i, err := strconv.Atoi(v)
			if err != nil {
				return Board{}, false
			}
			b.Index, gpu = i, true
		case "uuid":
			b.UUID = v
		case "serial":
			b.Serial = v
		case "bus":
			b.Bus = v
		case "name":
			b.Name = v
		}
	}
	return b, gpu && d.Err() == nil
}

// maxPreambleComments bounds the comment lines read before a header: a
// file has one (its board line); a file of nothing but comment lines is
// not read to its end for a header it does not have.
const maxPreambleComments = 8

// ReadPreamble reads a CSV file's leading lines from br (NewLineReader):
// the board line when there is one (files written before it was have none:
// ok false) and the header line (with its newline). n is the bytes read.
// err is br's: an empty file gives io.EOF with nothing read. A line over
// MaxLine, or more than a few comment lines, is ErrLongLine: such a file
// is damaged, and nothing of it is held in memory.
func ReadPreamble(br *bufio.Reader) (b Board, ok bool, header string, n int64, err error) {
	for i := 0; ; i++ {
		long := 0
		line, err := ReadLine(br, &long)
		if long > 0 || i > maxPreambleComments {
			return b, ok, "", n, ErrLongLine
		}
		n += int64(len(line))
		if IsComment(line) && err == nil {
			if pb, pok := ParseBoardLine(string(line)); pok && !ok {
				b, ok = pb, true
			}
			continue
		}
		return b, ok, string(line), n, err
	}
}
