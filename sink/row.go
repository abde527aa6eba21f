package sink

import (
	"strconv"
	"strings"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

// TimestampLayout is the timestamp column's format: local time with
// milliseconds and the UTC offset (RFC 3339), unambiguous across DST changes.
const TimestampLayout = "2006-01-02T15:04:05.000Z07:00"

// column declares one CSV column: its name and how a sample's cell is
// written (nothing for an absent reading), or, with fans set, the columns of
// reading.FanTable, fan by fan. Columns, Header and AppendRow all walk
// csvColumns, so adding a column is one entry.
type column struct {
	name string
	cell func(b []byte, s *reading.Sample) []byte
	fans bool
}

// csvColumns: the timestamp, then the readings with a CSV column in the
// table's order (reading.Table), the columns that are not scalar readings
// where they follow (afterColumn), flags last. The first columns, up to
// sensor0_controller, are those of gpu-telemetry-deep.py, the Python logger
// this one replaces, in its order and with its names and units, so what read
// its files (plots, spreadsheets) reads ours; the columns it lacked follow,
// the hardware health counters last. Two things differ on purpose: where it
// wrote 0 for a failed read, the cell here is empty (a 0 is always a real
// 0), and the timestamp is RFC 3339 with the UTC offset where it wrote
// "2006/01/02 15:04:05.000" local time with no zone.
var csvColumns = func() []column {
	cols := []column{{name: "timestamp", cell: func(b []byte, s *reading.Sample) []byte { return AppendTimestamp(b, s.Time) }}}
	for i := range reading.Table {
		d := &reading.Table[i]
		if d.CSV == "" {
			continue
		}
		cols = append(cols, column{name: d.CSV, cell: readingCell(d)})
		cols = append(cols, afterColumn[d.CSV]...)
	}
	return append(cols, column{name: "flags", cell: func(b []byte, s *reading.Sample) []byte {
		start := len(b)
		b = s.Flags.AppendText(b)
		return quoteCell(b, start)
	}})
}()

// afterColumn: the columns that are not a scalar reading of reading.Table,
// by the reading column they follow.
var afterColumn = map[string][]column{
	"throttle_bitmask": {
		{name: "throttle_reasons", cell: func(b []byte, s *reading.Sample) []byte {
			if v, ok := s.Values[reading.Throttle].Get(); ok {
				b = reading.AppendThrottleNames(b, v)
			}
			return b
		}},
		{fans: true},
		{name: "sensor0_temp", cell: sensor0Cell(func(v reading.Sensor) int32 { return v.Temp })},
		{name: "sensor0_target", cell: sensor0Cell(func(v reading.Sensor) int32 { return v.Target })},
		{name: "sensor0_controller", cell: sensor0Cell(func(v reading.Sensor) int32 { return v.Controller })},
		// The kernel-log clock (seconds since boot, as dmesg prints it),
		// which places a row among the kernel's lines. It and every column
		// after it are new: gpu-telemetry-deep.py's rows ended with
		// sensor0_controller and flags.
		{name: "dmesg_time", cell: func(b []byte, s *reading.Sample) []byte { return appendKernelTime(b, s.KernelTime) }},
	},
}

// readingCell writes reading d's cell (Def.AppendCell); nothing when absent.
func readingCell(d *reading.Def) func([]byte, *reading.Sample) []byte {
	return func(b []byte, s *reading.Sample) []byte {
		if v, ok := d.Get(s); ok {
			return d.AppendCell(b, v)
		}
		return b
	}
}

// ReadCell stores in s the value of reading d's cell as AppendRow wrote it
// (Def.ParseCell), with d.Set. An empty cell makes the reading absent,
// never 0; so does a cell that does not parse or holds a value the reading
// cannot (4294967296 for a 32-bit reading), and then ReadCell returns
// false.
func ReadCell(d *reading.Def, cell string, s *reading.Sample) bool {
	if cell == "" {
		d.Clear(s)
		return true
	}
	v, ok := d.ParseCell(cell)
	if !ok {
		d.Clear(s)
		return false
	}
	d.Set(s, v)
	return true
}

// ReadingCells is where the readings of reading.Table stand in a CSV file's
// columns: a reader of the logger's files walks it to read a row's readings,
// so a new reading needs no edit in the reader.
type ReadingCells []readingAt

type readingAt struct {
	d   *reading.Def
	col int
}

// ReadingColumns finds the table's readings among a header's columns (those
// want keeps; nil: all); a file of another version may lack some or have
// others.
func ReadingColumns(cols []string, want func(*reading.Def) bool) ReadingCells {
	var rc ReadingCells
	for i, c := range cols {
		for j := range reading.Table {
			if d := &reading.Table[j]; d.CSV != "" && d.CSV == c && (want == nil || want(d)) {
				rc = append(rc, readingAt{d, i})
				break
			}
		}
	}
	return rc
}

// Read stores a row's readings in s (ReadCell); cells has as many cells as
// the header had columns.
func (rc ReadingCells) Read(cells []string, s *reading.Sample) {
	for _, r := range rc {
		ReadCell(r.d, cells[r.col], s)
	}
}

// ReadChanged is Read for a row that follows prev (the cells of the row
// before, of the same header, read into s): a cell the same as prev's is
// not parsed again, s keeps its value. The slow tier's readings (health
// counters) repeat on every row between two reads.
func (rc ReadingCells) ReadChanged(cells, prev []string, s *reading.Sample) {
	if len(prev) != len(cells) {
		rc.Read(cells, s)
		return
	}
	for _, r := range rc {
		if c := cells[r.col]; c != prev[r.col] {
			ReadCell(r.d, c, s)
		}
	}
}

// cellAt is one column of a GPU's file: col, or with col.fans fan's
// column of reading def of reading.FanTable.
type cellAt struct {
	col *column
	fan int
	def *reading.FanDef
}

func (c cellAt) name() string {
	if c.def == nil {
		return c.col.name
	}
	return "fan" + strconv.Itoa(c.fan) + "_" + c.def.CSV
}

func (c cellAt) append(b []byte, s *reading.Sample) []byte {
	if c.def == nil {
		return c.col.cell(b, s)
	}
	if v, ok := c.def.Get(s, c.fan); ok {
		b = strconv.AppendUint(b, uint64(v), 10)
	}
	return b
}

// eachColumn calls f with each column of a file for a GPU with fans fans,
// in order (csvColumns).
func eachColumn(fans int, f func(cellAt)) {
	fans = min(max(fans, 0), reading.MaxFans)
	for i := range csvColumns {
		col := &csvColumns[i]
		if !col.fans {
			f(cellAt{col: col})
			continue
		}
		for fan := range fans {
			for j := range reading.FanTable {
				if reading.FanTable[j].CSV != "" {
					f(cellAt{col, fan, &reading.FanTable[j]})
				}
			}
		}
	}
}

// Columns returns the CSV column names for a GPU with fans fans.
func Columns(fans int) []string {
	var c []string
	eachColumn(fans, func(x cellAt) { c = append(c, x.name()) })
	return c
}

// Header returns the CSV header line (with newline) for fans fans.
func Header(fans int) []byte {
	return append([]byte(strings.Join(Columns(fans), ",")), '\n')
}

// AppendRow appends one CSV line (with newline) for s, laid out for a file
// with fans fans' columns. Absent readings are empty cells. It does not
// allocate when b has room.
func AppendRow(b []byte, s *reading.Sample, fans int) []byte {
	first := true
	eachColumn(fans, func(x cellAt) {
		if !first {
			b = append(b, ',')
		}
		first = false
		b = x.append(b, s)
	})
	return append(b, '\n')
}

// Cells returns the cells of s's row (AppendRow) one by one, as values:
// a cell AppendRow quotes (the flags) is returned unquoted, as a CSV reader
// would read it back.
func Cells(s *reading.Sample, fans int) []string {
	var cells []string
	var b []byte
	eachColumn(fans, func(x cellAt) {
		b = x.append(b[:0], s)
		cells = append(cells, unquoteCell(b))
	})
	return cells
}

// unquoteCell undoes quoteCell.
func unquoteCell(b []byte) string {
	if len(b) < 2 || b[0] != '"' || b[len(b)-1] != '"' {
		return string(b)
	}
	return strings.ReplaceAll(string(b[1:len(b)-1]), `""`, `"`)
}

// quoteCell quotes the cell b[start:] as RFC 4180 requires when it holds a
// comma or a quote (NVML_HUNG(fn,ms) does), leaving other cells bare.
func quoteCell(b []byte, start int) []byte {
	quotes := 0
	needs := false
	for _, c := range b[start:] {
		switch c {
		case ',', '\n', '\r':
			needs = true
		case '"':
			needs = true
			quotes++
		}
	}
	if !needs {
		return b
	}
	n := len(b) - start
	grow := 2 + quotes
	for range grow {
		b = append(b, 0)
	}
	// Shift the cell right, doubling quotes, from the end backwards.
	w := len(b) - 1
	b[w] = '"'
	w--
	for r := start + n - 1; r >= start; r-- {
		b[w] = b[r]
		w--
		if b[r] == '"' {
			b[w] = '"'
			w--
		}
	}
	b[w] = '"'
	return b
}

// AppendTimestamp appends t in TimestampLayout. It is AppendFormat without
// parsing the layout on every row (it was half of a row's formatting time).
func AppendTimestamp(b []byte, t time.Time) []byte {
	y, mo, d := t.Date()
	h, mi, sec := t.Clock()
	ms := t.Nanosecond() / 1e6
	b = appendDigits(b, y, 4)
	b = append(b, '-')
	b = appendDigits(b, int(mo), 2)
	b = append(b, '-')
	b = appendDigits(b, d, 2)
	b = append(b, 'T')
	b = appendDigits(b, h, 2)
	b = append(b, ':')
	b = appendDigits(b, mi, 2)
	b = append(b, ':')
	b = appendDigits(b, sec, 2)
	b = append(b, '.')
	b = appendDigits(b, ms, 3)
	_, off := t.Zone()
	if off == 0 {
		return append(b, 'Z')
	}
	sign := byte('+')
	if off < 0 {
		sign, off = '-', -off
	}
	b = append(b, sign)
	b = appendDigits(b, off/3600, 2)
	b = append(b, ':')
	return appendDigits(b, off%3600/60, 2)
}

// appendDigits appends v zero-padded to at least width digits.
func appendDigits(b []byte, v, width int) []byte {
	var tmp [20]byte
	i := len(tmp)
	for v >= 10 || width > 1 {
		i--
		tmp[i] = byte('0' + v%10)
		v /= 10
		width--
	}
	i--
	tmp[i] = byte('0' + v)
	return append(b, tmp[i:]...)
}

// sensor0Cell is the cell of one field of thermal sensor 0: empty when the
// sensor was not read.
func sensor0Cell(field func(reading.Sensor) int32) func([]byte, *reading.Sample) []byte {
	return func(b []byte, s *reading.Sample) []byte {
		if v, ok := s.Sensor0.Get(); ok {
			b = strconv.AppendInt(b, int64(field(v)), 10)
		}
		return b
	}
}

// appendKernelTime writes seconds since boot with microseconds, as dmesg.
func appendKernelTime(b []byte, d time.Duration) []byte {
	if d <= 0 {
		return b
	}
	us := uint64(d / time.Microsecond)
	b = strconv.AppendUint(b, us/1_000_000, 10)
	b = append(b, '.')
	f := us % 1_000_000
	for p := uint64(100_000); p > 1 && f < p; p /= 10 {
		b = append(b, '0')
	}
	return strconv.AppendUint(b, f, 10)
}
