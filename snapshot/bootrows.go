package snapshot

import (
	"bufio"
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/sink"
)

// csvDay matches the daily CSV files: gpu<i>-deep-<YYYY-MM-DD>.csv[.gz].
var csvDay = regexp.MustCompile(`^gpu(\d+)-deep-(\d{4}-\d{2}-\d{2})\.csv(\.gz)?$`)

// tailBytes is how much of the end of a plain CSV is read for its last rows:
// 50 rows are about 10 KB, and the new run may already have appended a few
// minutes' worth by the time the previous run's rows are looked for.
const tailBytes = 2 << 20

// maxDaysBack bounds how many days back the last rows are looked for.
const maxDaysBack = 3

// gpuRows is one GPU's last rows from before a moment.
type gpuRows struct {
	gpu     int
	header  string
	rows    []string  // oldest first
	last    time.Time // the last row's time (zero when none)
	sources []string  // files read
	notes   []string  // what could not be read
}

// lastRowsBefore returns, per GPU with CSV files in dir, the last n rows
// written before t (the new run's rows come after), looking back across
// midnight into the previous days' .csv or .csv.gz.
func lastRowsBefore(dir string, t time.Time, n int) []gpuRows {
	ents, _ := os.ReadDir(dir)
	type file struct {
		name string
		day  string
		gz   bool
	}
	byGPU := map[int][]file{}
	for _, e := range ents {
		m := csvDay.FindStringSubmatch(e.Name())
		if m == nil {
			continue
		}
		g, _ := strconv.Atoi(m[1])
		byGPU[g] = append(byGPU[g], file{e.Name(), m[2], m[3] != ""})
	}
	var gpus []int
	for g := range byGPU {
		gpus = append(gpus, g)
	}
	sort.Ints(gpus)
	var out []gpuRows
	for _, g := range gpus {
		files := byGPU[g]
		// Newest day first; of one day, the plain file first (it is the
		// newer form while compression is under way).
		sort.Slice(files, func(i, j int) bool {
			if files[i].day != files[j].day {
				return files[i].day > files[j].day
			}
			return !files[i].gz && files[j].gz
		})
		gr := gpuRows{gpu: g}
		seenDay := map[string]bool{}
		days := 0
		for _, f := range files {
			if len(gr.rows) >= n || days >= maxDaysBack {
				break
			}
			if seenDay[f.day] {
				continue
			}
			seenDay[f.day] = true
			days++
			header, rows, err := readRowsBefore(filepath.Join(dir, f.name), f.gz, t, n-len(gr.rows))
			gr.sources = append(gr.sources, f.name)
			if err != nil {
				gr.notes = append(gr.notes, f.name+": "+err.Error()+" (rows before the damage kept)")
			}
			if gr.header == "" {
				gr.header = header
			}
			gr.rows = append(rows, gr.rows...)
		}
		if len(gr.rows) > 0 {
			if ts, err := rowTime(gr.rows[len(gr.rows)-1]); err == nil {
				gr.last = ts
			}
		}
		out = append(out, gr)
	}
	return out
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
	f, err := os.Open(path)
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
		header, _ = br.ReadString('\n')
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
