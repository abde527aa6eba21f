package report

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/anomaly"
	"github.com/gpu-telemetry/gpu-telemetry/reading"
	"github.com/gpu-telemetry/gpu-telemetry/sink"
)

// Fan is one fan's speed and the speed the driver asked for, in %.
type Fan struct {
	Speed, Target reading.Opt[float64]
}

// Row is one CSV row, reduced to what the report shows, in its units (W, not
// mW). An absent cell stays absent (OK false), never 0. The row's readings
// are read by walking reading.Table (parseRow, rowReadings); a Row keeps the few it
// charts, not a reading.Sample (1.5 kB a row: a day's window keeps some
// 100 000 rows).
type Row struct {
	Time                        time.Time
	Temp, MemTemp               reading.Opt[float64]
	Power, Limit, Enforced      reading.Opt[float64]
	GPUClock, SMClock, MemClock reading.Opt[float64]
	Fans                        []Fan
	Throttle                    reading.Opt[uint64] // clocks event reasons bitmask
	Reasons                     string              // their names, "None" when clear
	Flags                       string              // the flags cell
	DmesgTime                   reading.Opt[float64]
	// Health is the GPU's hardware health verdict at the row: the reasons
	// that hold, as the logger's anomaly.HealthWatch judged them, replayed
	// over the rows' health counters (healthReplay). A HEALTH_WARN or
	// HEALTH_CRIT flag marks only the row where a reason began; this says
	// how long it lasted.
	Health anomaly.HealthVerdict
	// Gap is the pause since the row before it when that pause is a gap
	// (the logger down, a hung GPU, the disk paused); 0 otherwise. Lines
	// are broken there and the timeline says so.
	Gap time.Duration
}

// rowReadings is what a Row keeps of reading.Table's readings, in the
// report's unit (the stored value divided by div). Only their cells, the
// throttle bitmask's and the health replay's (watched) are parsed: parsing
// every reading of a datacenter GPU's row (its 41 health counters filled)
// made a day's report 20.0 s against 16.8 (BenchmarkReportWindow24h), so
// a health cell that repeats the row before's is not parsed again
// (ReadChanged): the health counters change once a second at most.
var rowReadings = []struct {
	d   *reading.Def
	div float64
	in  func(*Row) *reading.Opt[float64]
}{
	{tableDef("TempC"), 1, func(r *Row) *reading.Opt[float64] { return &r.Temp }},
	{tableDef("MemTempC"), 1, func(r *Row) *reading.Opt[float64] { return &r.MemTemp }},
	{tableDef("PowerMW"), 1000, func(r *Row) *reading.Opt[float64] { return &r.Power }},
	{tableDef("PowerLimitMW"), 1000, func(r *Row) *reading.Opt[float64] { return &r.Limit }},
	{tableDef("EnforcedLimitMW"), 1000, func(r *Row) *reading.Opt[float64] { return &r.Enforced }},
	{tableDef("GraphicsMHz"), 1, func(r *Row) *reading.Opt[float64] { return &r.GPUClock }},
	{tableDef("SMMHz"), 1, func(r *Row) *reading.Opt[float64] { return &r.SMClock }},
	{tableDef("MemMHz"), 1, func(r *Row) *reading.Opt[float64] { return &r.MemClock }},
}

var throttleDef = tableDef("Throttle")

// watchedDefs are the readings anomaly.HealthWatch reads besides the health
// counters: the PCIe replay counter against the link's generation and width.
var watchedDefs = []*reading.Def{tableDef("PCIeReplay"), tableDef("PCIeGen"), tableDef("PCIeWidth")}

// watched reports whether the health replay reads reading d.
func watched(d *reading.Def) bool {
	if d.IsHealth() {
		return true
	}
	for _, w := range watchedDefs {
		if w == d {
			return true
		}
	}
	return false
}

// charted reports whether a Row keeps reading d.
func charted(d *reading.Def) bool {
	if d == throttleDef {
		return true
	}
	for _, rr := range rowReadings {
		if rr.d == d {
			return true
		}
	}
	return false
}

// tableDef is reading.Table's row named name.
func tableDef(name string) *reading.Def {
	for i := range reading.Table {
		if reading.Table[i].Name == name {
			return &reading.Table[i]
		}
	}
	panic("report: no reading " + name + " in reading.Table")
}

// layout maps the columns of one CSV file (its header) to the readings of
// reading.Table and the other columns the report shows.
type layout struct {
	n                 int // number of columns
	ts, reasons, flag int
	dmesg             int
	readings          sink.ReadingCells // where the table's readings stand
	health            sink.ReadingCells // and those of the health replay
	prev              []string          // the last row's cells: health cells that repeat are not parsed again
	fans              [][2]int          // speed, target column per fan
	names             map[string]string // interned throttle reasons
	s                 reading.Sample    // parseRow's readings of the row (the file's columns only)
}

// parseLayout reads a header line. Columns it does not know are ignored, so
// files written by other versions still read; the timestamp is required.
func parseLayout(header string) (*layout, error) {
	cols := strings.Split(strings.TrimRight(header, "\r\n"), ",")
	l := &layout{n: len(cols), ts: -1, reasons: -1, flag: -1, dmesg: -1, readings: sink.ReadingColumns(cols, charted),
		health: sink.ReadingColumns(cols, watched)}
	fans := map[int]*[2]int{}
	maxFan := -1
	for i, c := range cols {
		switch c {
		case "timestamp":
			l.ts = i
		case "throttle_reasons":
			l.reasons = i
		case "flags":
			l.flag = i
		case "dmesg_time":
			l.dmesg = i
		default:
			if n, d, ok := reading.FanColumn(c); ok {
				f := fans[n]
				if f == nil {
					f = &[2]int{-1, -1}
					fans[n] = f
				}
				// A Row keeps what the report charts: each fan's speed
				// against its target (a new row of reading.FanTable is
				// read only once a chart shows it).
				switch d.Name {
				case "Speed":
					f[0] = i
				case "Target":
					f[1] = i
				}
				maxFan = max(maxFan, n)
			}
		}
	}
	if l.ts != 0 {
		return nil, errors.New("header has no leading timestamp column")
	}
	for n := 0; n <= maxFan; n++ {
		if f := fans[n]; f != nil {
			l.fans = append(l.fans, *f)
		}
	}
	return l, nil
}

// intern returns one shared copy of a throttle reasons cell: a few values
// repeat on every row, and a substring would keep the whole line alive.
func (l *layout) intern(s string) string {
	if v, ok := l.names[s]; ok {
		return v
	}
	v := strings.Clone(s)
	if l.names == nil {
		l.names = map[string]string{}
	}
	if len(l.names) < 1024 {
		l.names[v] = v
	}
	return v
}

// splitCSV splits one line into cells, undoing CSV quoting (the flags cell
// is quoted when it holds a comma). cells is reused.
func splitCSV(line string, cells []string) ([]string, bool) {
	cells = cells[:0]
	if strings.IndexByte(line, '"') < 0 {
		for {
			i := strings.IndexByte(line, ',')
			if i < 0 {
				return append(cells, line), true
			}
			cells = append(cells, line[:i])
			line = line[i+1:]
		}
	}
	for {
		if strings.HasPrefix(line, `"`) {
			var b strings.Builder
			i := 1
			for {
				j := strings.IndexByte(line[i:], '"')
				if j < 0 {
					return cells, false // unterminated quote: a cut line
				}
				b.WriteString(line[i : i+j])
				i += j + 1
				if i < len(line) && line[i] == '"' {
					b.WriteByte('"')
					i++
					continue
				}
				break
			}
			cells = append(cells, b.String())
			line = line[i:]
			if line == "" {
				return cells, true
			}
			if line[0] != ',' {
				return cells, false
			}
			line = line[1:]
			continue
		}
		i := strings.IndexByte(line, ',')
		if i < 0 {
			return append(cells, line), true
		}
		cells = append(cells, line[:i])
		line = line[i+1:]
	}
}

func optFloat(cells []string, i int) reading.Opt[float64] {
	if i < 0 || i >= len(cells) || cells[i] == "" {
		return reading.Opt[float64]{}
	}
	v, err := strconv.ParseFloat(cells[i], 64)
	if err != nil {
		return reading.Opt[float64]{}
	}
	return reading.Some(v)
}

func cell(cells []string, i int) string {
	if i < 0 || i >= len(cells) {
		return ""
	}
	return cells[i]
}

// parseTime parses the timestamp column.
func parseTime(s string) (time.Time, error) {
	return time.Parse(sink.TimestampLayout, s)
}

// parseRow turns a line into a Row. ok is false for a malformed line: wrong
// cell count (a line cut by a crash) or a bad timestamp.
func (l *layout) parseRow(line string, cells []string) (Row, []string, bool) {
	cells, ok := splitCSV(line, cells)
	if !ok || len(cells) != l.n {
		return Row{}, cells, false
	}
	t, err := parseTime(cells[l.ts])
	if err != nil {
		return Row{}, cells, false
	}
	l.readings.Read(cells, &l.s)
	l.health.ReadChanged(cells, l.prev, &l.s)
	l.prev = append(l.prev[:0], cells...)
	s := &l.s
	r := Row{Time: t, Throttle: s.Values[reading.Throttle],
		Reasons: l.intern(cell(cells, l.reasons)), Flags: strings.Clone(cell(cells, l.flag)), DmesgTime: optFloat(cells, l.dmesg)}
	// The health replay's windows run on dmesg_time, as the logger's did
	// (anomaly.HealthWatch): the timestamps step with the wall clock.
	s.KernelTime = 0
	if d, ok := r.DmesgTime.Get(); ok {
		s.KernelTime = time.Duration(d * float64(time.Second))
	}
	for _, rr := range rowReadings {
		if v, ok := rr.d.Get(s); ok {
			*rr.in(&r) = reading.Some(float64(v) / rr.div)
		}
	}
	if len(l.fans) > 0 {
		r.Fans = make([]Fan, len(l.fans))
		for i, f := range l.fans {
			r.Fans[i] = Fan{Speed: optFloat(cells, f[0]), Target: optFloat(cells, f[1])}
		}
	}
	return r, cells, true
}

// healthReplay replays a file's rows through anomaly.HealthWatch, as the
// logger judged them (every row, before thinning), so that a health reason
// lasts in the report while its reading holds: remap_pending while the
// counter reads 1, ecc_sbe_rate for as long as the logger held it after the
// last growth.
type healthReplay struct {
	w    anomaly.HealthWatch
	last anomaly.HealthVerdict
}

// observe sets r.Health from the row's readings s. A row without a health
// reading (a lost or hung GPU, a file without the columns) keeps the last
// verdict: absent is not "ok". A reason the row's flag says began is
// begun in the watch too: a growth that raised it before the first row
// replayed is not in the counters the replay saw.
func (h *healthReplay) observe(r *Row, s *reading.Sample) {
	if r.Flags != "" {
		for _, f := range strings.Split(r.Flags, "|") {
			if fam := flagFamily(f); fam == "HEALTH_WARN" || fam == "HEALTH_CRIT" {
				if rs, ok := anomaly.ReasonNamed(strings.TrimSuffix(strings.TrimPrefix(f, fam+"("), ")")); ok {
					h.w.Began(rs, s, r.Time)
				}
			} else if rs, ok := anomaly.FlagReason(fam); ok {
				h.w.Began(rs, s, r.Time) // a detector's flag prolongs its reason, as it did in the logger
			}
		}
	}
	for _, id := range reading.HealthIDs {
		if s.Values[id].OK {
			h.last = h.w.Check(s, r.Time)
			break
		}
	}
	r.Health = h.last
}

// readStats says what reading one file gave, for the "read" and "skipped"
// lines of the report.
type readStats struct {
	Rows      int        // rows in the window
	Malformed int        // lines that did not parse (cut by a crash, damaged)
	Long      int        // lines over sink.MaxLine, skipped unread
	Damage    string     // why reading stopped early (a damaged .gz), or ""
	Before    bool       // the file has rows before the window: the data did not start inside it
	Board     sink.Board // the board its first line names (HasBoard)
	HasBoard  bool       // false for files written before the board line was
}

// progressFunc is told how many bytes of the file have been read.
type progressFunc func(done, total int64)

// seekSlack is how far before the window's start a seek lands: rows can be
// a little out of order across a restart, and the start is found by scanning.
const seekSlack = 2 * time.Second

// readWindow streams the rows of f with from <= time <= to into fn. A plain
// file is entered by binary search on the timestamps of the lines (rows are
// written in time order), so reading a minute of a 130 MB day costs a few
// reads; a .gz is decompressed from its start, parsing only what is in the
// window. A damaged .gz yields the rows before the damage. The error of
// open is returned as it is.
func readWindow(open opener, f sink.CSVDay, from, to time.Time, progress progressFunc, fn func(Row)) (readStats, error) {
	var st readStats
	fh, err := open(f.Path)
	if err != nil {
		return st, err
	}
	defer fh.Close()
	fi, err := fh.Stat()
	if err != nil {
		return st, err
	}
	total := fi.Size()
	var r io.Reader = fh
	counter := &countingReader{r: fh}
	// A .gz the logger wrote in members (sink.GzMembers) is entered at the
	// member before the window; its layout is the header member's before it.
	var start, preamble int64
	header := ""
	if f.GZ {
		if ms, ok := sink.GzMembers(fh, total); ok {
			var hdr int64
			start, hdr = sink.GzStart(ms, from.Add(-seekSlack), 0)
			if start > 0 {
				if st.Board, st.HasBoard, header, err = sink.GzPreamble(fh, hdr, total); err != nil {
					return st, fmt.Errorf("%s: not a readable gzip file: %w", filepath.Base(f.Path), err)
				}
				counter = &countingReader{r: io.NewSectionReader(fh, start, total-start), n: start}
			}
		}
		zr, err := gzip.NewReader(counter)
		if err != nil {
			return st, fmt.Errorf("%s: not a readable gzip file: %w", filepath.Base(f.Path), err)
		}
		r = zr
	} else {
		r = counter
	}
	br := bufio.NewReaderSize(r, 256<<10) // holds a line of sink.MaxLine
	if start == 0 {
		st.Board, st.HasBoard, header, preamble, err = sink.ReadPreamble(br)
	}
	if err != nil {
		if err == io.EOF && header == "" {
			return st, nil // an empty file
		}
		if err != io.EOF {
			st.Damage = err.Error()
			return st, nil
		}
	}
	lay, err := parseLayout(header)
	if err != nil {
		return st, fmt.Errorf("%s: %w", filepath.Base(f.Path), err)
	}
	if !f.GZ {
		off, err := seekTime(fh, preamble, total, from.Add(-seekSlack))
		if err != nil {
			return st, err
		}
		if _, err := fh.Seek(off, io.SeekStart); err != nil {
			return st, err
		}
		counter.n = off
		br.Reset(counter)
	}
	var cells []string
	var health healthReplay
	skip := beforeCheck{from: from}
	for n := 0; ; n++ {
		// A line over sink.MaxLine is skipped, never put together.
		b, err := sink.ReadLine(br, &st.Long)
		// Rows before the window are skipped on their timestamp's bytes,
		// without a string or a parse (most of a day is skipped).
		if len(b) > 0 && b[len(b)-1] == '\n' && skip.before(b) {
			st.Before = true
		} else if len(b) > 0 {
			complete := b[len(b)-1] == '\n'
			line := strings.TrimRight(string(b), "\r\n")
			switch {
			case sink.IsComment(b):
				// A board line: in a file of one board, only at its start.
			case strings.HasPrefix(line, "timestamp,"):
				if l, err := parseLayout(line); err == nil {
					lay = l // a header written again (restart with another layout)
				}
			case !complete:
				st.Malformed++ // cut mid-line
			default:
				ts := line
				if i := strings.IndexByte(ts, ','); i >= 0 {
					ts = ts[:i]
				}
				t, terr := parseTime(ts)
				if terr != nil {
					st.Malformed++
					break
				}
				if t.Before(from) {
					st.Before = true
					break
				}
				if t.After(to) {
					return st, nil // rows are in time order
				}
				var row Row
				var ok bool
				row, cells, ok = lay.parseRow(line, cells)
				if !ok {
					st.Malformed++
					break
				}
				health.observe(&row, &lay.s)
				st.Rows++
				fn(row)
			}
		}
		if progress != nil && n%4096 == 0 {
			progress(counter.n, total)
		}
		if err != nil {
			if err != io.EOF {
				st.Damage = err.Error()
			}
			return st, nil
		}
	}
}

// beforeCheck tells whether a row's timestamp is before from by comparing
// bytes: timestamps with the same UTC offset sort as text. from is formatted
// once per offset met (a DST change gives two).
type beforeCheck struct {
	from    time.Time
	zone    []byte // the offset suffix fromStr was formatted for
	fromStr []byte
}

// before reports whether line's timestamp is surely before from; false
// when unsure (not a timestamp): the caller then parses the line.
func (c *beforeCheck) before(line []byte) bool {
	i := bytes.IndexByte(line, ',')
	if i < len("2006-01-02T15:04:05.000Z") || line[4] != '-' || line[10] != 'T' {
		return false
	}
	ts := line[:i]
	zone := ts[len("2006-01-02T15:04:05.000"):]
	if !bytes.Equal(zone, c.zone) {
		t, err := parseTime(string(ts))
		if err != nil {
			return false
		}
		_, off := t.Zone()
		c.zone = append(c.zone[:0], zone...)
		c.fromStr = c.from.In(time.FixedZone("", off)).AppendFormat(c.fromStr[:0], sink.TimestampLayout)
	}
	return len(ts) == len(c.fromStr) && bytes.Compare(ts, c.fromStr) < 0
}

// countingReader counts the bytes read through it, for progress.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// seekTime returns the offset of a line start at or before the first row
// with time >= t, between start (after the header) and size, by binary search
// over the file: each probe reads the first whole line after an offset.
func seekTime(f *os.File, start, size int64, t time.Time) (int64, error) {
	lo, hi := start, size
	buf := make([]byte, 4096)
	for hi-lo > 64<<10 {
		mid := lo + (hi-lo)/2
		n, err := f.ReadAt(buf, mid)
		if err != nil && err != io.EOF {
			return 0, err
		}
		b := buf[:n]
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			hi = mid
			continue
		}
		line := b[i+1:]
		if j := bytes.IndexByte(line, ','); j >= 0 {
			line = line[:j]
		}
		lt, err := parseTime(string(line))
		if err != nil {
			// A malformed line: give up narrowing from here, stay safe.
			hi = mid
			continue
		}
		if lt.Before(t) {
			lo = mid + int64(i) + 1
		} else {
			hi = mid
		}
	}
	return lo, nil
}
