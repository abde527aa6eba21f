package snapshot

import (
	"bufio"
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/sink"
)

// tailBytes is how much of the end of a plain CSV is read for its last rows:
// 50 rows are about 10 KB, and the new run may already have appended a few
// minutes' worth by the time the previous run's rows are looked for.
const tailBytes = 2 << 20

// maxDaysBack bounds how many days back the last rows are looked for.
const maxDaysBack = 3

// gpuRows is one board's last rows as one GPU index from before a moment.
type gpuRows struct {
	gpu     int
	board   string // the board's part of the file names (sink.BoardID); "" in older files' names
	header  string
	rows    []string  // oldest first
	last    time.Time // the last row's time (zero when none)
	sources []string  // files read
	notes   []string  // what could not be read
}

// lastRowsBefore returns, per GPU index and board with CSV files in dir,
// the last n rows written before t (the new run's rows come after), looking
// back across midnight into the previous days' .csv or .csv.gz. Two boards
// seen at one index (the indices moved) are two entries: their rows are
// never joined.
func lastRowsBefore(dir string, t time.Time, n int) []gpuRows {
	files, _ := sink.ListDays(dir, t.Location()) // by GPU, then board, then oldest day first
	var out []gpuRows
	for len(files) > 0 {
		k := 1
		for k < len(files) && files[k].GPU == files[0].GPU && files[k].Board == files[0].Board {
			k++
		}
		out = append(out, rowsBefore(files[:k], t, n))
		files = files[k:]
	}
	return out
}

// rowsBefore reads one GPU's files (parts of days), newest first, until it
// has n rows or has gone maxDaysBack days back. Rows under another header
// (an older part with another column set) are not joined to the newer ones.
func rowsBefore(days []sink.CSVDay, t time.Time, n int) gpuRows {
	gr := gpuRows{gpu: days[0].GPU, board: days[0].Board}
	newest := days[len(days)-1].Day
	for i := len(days) - 1; i >= 0 && len(gr.rows) < n && !days[i].Day.Before(newest.AddDate(0, 0, 1-maxDaysBack)); i-- {
		f := days[i]
		name := filepath.Base(f.Path)
		header, rows, err := readRowsBefore(f.Path, f.GZ, t, n-len(gr.rows))
		if gr.header != "" && len(rows) > 0 && header != gr.header {
			gr.notes = append(gr.notes, name+": older rows have other columns; not shown")
			break
		}
		gr.sources = append(gr.sources, name)
		if err != nil {
			gr.notes = append(gr.notes, name+": "+err.Error()+" (rows before the damage kept)")
		}
		if gr.header == "" && len(rows) > 0 {
			gr.header = header
		}
		gr.rows = append(rows, gr.rows...)
	}
	if len(gr.rows) > 0 {
		if ts, err := rowTime(gr.rows[len(gr.rows)-1]); err == nil {
			gr.last = ts
		}
	}
	return gr
}

func rowTime(line string) (time.Time, error) {
	ts := line
	if i := strings.IndexByte(line, ','); i >= 0 {
		ts = line[:i]
	}
	return time.Parse(sink.TimestampLayout, ts)
}

// readRowsBefore returns a file's header and its last n complete rows with
// a time before t. A plain file is read from its last tailBytes; a .gz is
// streamed. A line cut by the crash (no newline, or no timestamp) is left out.
func readRowsBefore(path string, gz bool, t time.Time, n int) (string, []string, error) {
	f, err := sink.OpenNoFollow(path, os.O_RDONLY, 0) // a link's target is not ours to quote
	if err != nil {
		return "", nil, err
	}
	defer f.Close()
	var r io.Reader = f
	header := ""
	if gz {
		zr, err := gzip.NewReader(f)
		if err != nil {
			return "", nil, err
		}
		r = zr
	} else {
		br := bufio.NewReader(f)
		_, _, header, _, _ = sink.ReadPreamble(br)
		if fi, err := f.Stat(); err == nil && fi.Size() > tailBytes {
			if _, err := f.Seek(fi.Size()-tailBytes, io.SeekStart); err != nil {
				return "", nil, err
			}
		} else if _, err := f.Seek(0, io.SeekStart); err != nil {
			return "", nil, err
		}
		r = f
	}
	br := bufio.NewReaderSize(r, 64<<10)
	ring := make([]string, 0, n)
	first := true
	var rerr error
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			if err != io.EOF {
				rerr = err
			}
			break // a last line without newline was cut by the crash
		}
		line = strings.TrimRight(line, "\r\n")
		if sink.IsComment([]byte(line)) {
			continue // the board line
		}
		if strings.HasPrefix(line, "timestamp,") {
			if header == "" || first {
				header = line + "\n"
			}
			first = false
			continue
		}
		first = false
		ts, err := rowTime(line)
		if err != nil || !ts.Before(t) {
			continue // the seek landed mid-line, or the new run's row
		}
		if len(ring) == n {
			copy(ring, ring[1:])
			ring = ring[:n-1]
		}
		ring = append(ring, line)
	}
	return strings.TrimRight(header, "\r\n"), ring, rerr
}

// name is how the boot log names the rows' GPU: its index, and its board
// when the file names say ("GPU 0 (board 5a3c1e2f)").
func (g gpuRows) name() string {
	if g.board == "" {
		return "GPU " + strconv.Itoa(g.gpu)
	}
	return "GPU " + strconv.Itoa(g.gpu) + " (board " + g.board + ")"
}
