package snapshot

import (
	"compress/gzip"
	"fmt"
	"io"
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
// the last n rows written before t, looking back across midnight into the
// previous days' .csv or .csv.gz. Two boards seen at one index (the indices
// moved) are two entries: their rows are never joined.
func lastRowsBefore(dir string, t time.Time, n int) []gpuRows {
	files, _ := sink.ListDays(dir, t.Location()) // by GPU, then board, then oldest day first
	budget := bootReadMax
	var out []gpuRows
	for len(files) > 0 {
		k := 1
		for k < len(files) && files[k].GPU == files[0].GPU && files[k].Board == files[0].Board {
			k++
		}
		out = append(out, rowsBefore(files[:k], t, n, &budget))
		files = files[k:]
	}
	return out
}

// rowsBefore reads one GPU's files (parts of days), newest first, until it
// has n rows or has gone maxDaysBack days back. Rows under another header
// (an older part with another column set) are not joined to the newer ones.
func rowsBefore(days []sink.CSVDay, t time.Time, n int, budget *int64) gpuRows {
	gr := gpuRows{gpu: days[0].GPU, board: days[0].Board}
	newest := days[len(days)-1].Day
	for i := len(days) - 1; i >= 0 && len(gr.rows) < n && !days[i].Day.Before(newest.AddDate(0, 0, 1-maxDaysBack)); i-- {
		f := days[i]
		name := filepath.Base(f.Path)
		if *budget <= 0 {
			gr.notes = append(gr.notes, fmt.Sprintf("%s: not read (the boot log reads at most %d MiB of CSVs)", name, bootReadMax>>20))
			break
		}
		fr, err := readRowsBefore(f.Path, f.GZ, t, n-len(gr.rows), budget)
		if gr.header != "" && len(fr.rows) > 0 && fr.header != gr.header {
			gr.notes = append(gr.notes, name+": older rows have other columns; not shown")
			break
		}
		gr.sources = append(gr.sources, name)
		if err != nil {
			gr.notes = append(gr.notes, name+": "+err.Error()+" (rows before the damage kept)")
		}
		if fr.long > 0 {
			gr.notes = append(gr.notes, fmt.Sprintf("%s: %d line(s) over %d KiB skipped unread", name, fr.long, sink.MaxLine>>10))
		}
		if fr.cut {
			gr.notes = append(gr.notes, fmt.Sprintf("%s: %d MiB read, the boot log's bound; the rows after are not shown", name, fr.read>>20))
		}
		if gr.header == "" && len(fr.rows) > 0 {
			gr.header = fr.header
		}
		gr.rows = append(fr.rows, gr.rows...)
	}
	if len(gr.rows) > 0 {
		gr.last, _ = rowTime(gr.rows[len(gr.rows)-1]) // zero when it does not parse
	}
	return gr
}

func rowTime(line string) (time.Time, error) {
	ts, _, _ := strings.Cut(line, ",")
	return time.Parse(sink.TimestampLayout, ts)
}

// Bounds of what the boot log reads of the CSVs, whatever the log directory
// holds (a line of a gigabyte, a small .csv.gz expanding to one, a FIFO
// named as a CSV): a file gives at most bootFileMax bytes (decompressed),
// the boot log bootReadMax in all. Variables so that a test can lower them.
var (
	bootFileMax int64 = 256 << 20
	bootReadMax int64 = 1 << 30
)

// fileRows is what readRowsBefore found in one file.
type fileRows struct {
	header string
	rows   []string // oldest first
	long   int      // lines over sink.MaxLine, skipped
	read   int64    // bytes read (decompressed), from the tail or the member entered at
	cut    bool     // the bounds stopped the read before the file's end
}

// readRowsBefore returns a file's header and its last n complete rows with
// a time before t, reading at most bootFileMax bytes and what is left of
// *budget (less what it read). A plain file is read from its last
// tailBytes; a .gz from the member before the last one that begins before t
// (sink.GzStart: a real day costs a member or two), or from its start when
// it is one member (gzip(1), earlier versions). A line cut by the crash is
// left out; lines over sink.MaxLine are counted unread.
func readRowsBefore(path string, gz bool, t time.Time, n int, budget *int64) (fileRows, error) {
	var fr fileRows
	f, err := sink.OpenOwnRegular(path) // a link's target is not ours to quote
	if err != nil {
		return fr, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fr, err
	}
	var r io.Reader
	if gz {
		start := int64(0)
		if ms, ok := sink.GzMembers(f, fi.Size()); ok {
			var hdr int64
			if start, hdr = sink.GzStart(ms, t, 1); start > 0 {
				if _, _, fr.header, err = sink.GzPreamble(f, hdr, fi.Size()); err != nil {
					return fr, err
				}
			}
		}
		zr, err := gzip.NewReader(io.NewSectionReader(f, start, fi.Size()-start))
		if err != nil {
			return fr, err
		}
		r = zr
	} else {
		_, _, fr.header, _, _ = sink.ReadPreamble(sink.NewLineReader(f))
		if _, err := f.Seek(max(fi.Size()-tailBytes, 0), io.SeekStart); err != nil {
			return fr, err
		}
		r = f
	}
	limit := min(*budget, bootFileMax)
	lr := &io.LimitedReader{R: r, N: limit}
	br := sink.NewLineReader(lr)
	ring := make([]string, 0, n)
	first := true
	for {
		b, err := sink.ReadLine(br, &fr.long)
		if err != nil {
			fr.read, fr.cut = limit-lr.N, lr.N == 0
			*budget -= fr.read
			fr.header, fr.rows = strings.TrimRight(fr.header, "\r\n"), ring
			if err != io.EOF {
				return fr, err
			}
			return fr, nil // a last line without newline was cut by the crash
		}
		line := strings.TrimRight(string(b), "\r\n")
		if sink.IsComment(b) {
			continue // the board line
		}
		if strings.HasPrefix(line, "timestamp,") {
			if fr.header == "" || first {
				fr.header = line + "\n"
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
			ring = ring[1:] // append moves the live rows when it reallocates
		}
		ring = append(ring, line)
	}
}

// name is how the boot log names the rows' GPU: its index, and its board
// when the file names say ("GPU 0 (board 5a3c1e2f)").
func (g gpuRows) name() string {
	if g.board == "" {
		return "GPU " + strconv.Itoa(g.gpu)
	}
	return "GPU " + strconv.Itoa(g.gpu) + " (board " + g.board + ")"
}
