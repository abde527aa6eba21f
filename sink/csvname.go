package sink

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
)

// dayLayout is the date in a CSV file's name.
const dayLayout = "2006-01-02"

// UnknownBoard is the board part of a CSV file's name while the GPU's UUID
// is not known (a GPU that did not answer at start): its rows move to a
// file named by its board once it answers.
const UnknownBoard = "unknown"

// boardIDLen is how much of the UUID names a board: the UUID's first 32
// bits. NVIDIA's UUIDs are random, so two boards of one host share them with
// a chance of about n²/2³³ (under 10⁻⁷ for 16 boards); the file's first
// line has the whole UUID.
const boardIDLen = 8

// BoardID is the board's part of its CSV files' names: the first 8
// characters of its UUID after the "GPU-" prefix, in lower case
// (GPU-5a3c1e2f-... gives 5a3c1e2f), or UnknownBoard when the UUID is not
// known. A file therefore only ever holds one board's rows: GPU indices
// follow PCI enumeration and move when a board drops out or is added.
func BoardID(uuid string) string {
	_, rest, ok := strings.Cut(uuid, "-")
	if !ok {
		rest = uuid
	}
	var b strings.Builder
	for _, r := range strings.ToLower(rest) {
		if b.Len() == boardIDLen {
			break
		}
		if (r >= '0' && r <= '9') || (r >= 'a' && r <= 'z') {
			b.WriteRune(r)
		}
	}
	if b.Len() == 0 {
		return UnknownBoard
	}
	return b.String()
}

// FileName returns the CSV file name of GPU index, board (BoardID), on day
// (local date): the day's first part.
func FileName(index int, board string, day time.Time) string {
	return PartName(index, board, day, 1)
}

// PartName returns the name of part part (from 1) of the CSV of GPU index,
// board (BoardID), of day. A day has more than one part when its column set
// changed (a restart with another fan count, a GPU whose fans became known
// mid-run) or when rows of a day already compressed came again (the clock
// stepped back): every file is one table under one header. Part 1 is
// gpu<index>-<board>-deep-<day>.csv, part n > 1
// gpu<index>-<board>-deep-<day>_<n>.csv, which sorts after it.
func PartName(index int, board string, day time.Time, part int) string {
	if part <= 1 {
		return fmt.Sprintf("gpu%d-%s-deep-%s.csv", index, board, day.Format(dayLayout))
	}
	return fmt.Sprintf("gpu%d-%s-deep-%s_%d.csv", index, board, day.Format(dayLayout), part)
}

// dayFile matches the names PartName gives, compressed (.csv.gz) or not,
// and those of the versions before the board was in the name
// (gpu<index>-deep-<day>.csv: their board is "").
var dayFile = regexp.MustCompile(`^gpu(\d+)-(?:([0-9a-z]{1,8})-)?deep-(\d{4}-\d{2}-\d{2})(?:_([2-9]|[1-9]\d{1,5}))?\.csv(\.gz)?$`)

// CSVDay is one part of one board's CSV of one day, named by PartName.
type CSVDay struct {
	Path  string    // the file; only the name when from ParseFileName
	GPU   int       // the GPU index in the name
	Board string    // the board in the name (BoardID); "" in a name of the versions without it
	Day   time.Time // the date in the name, at midnight in the location asked for
	Part  int       // the part of the day, from 1 (a name without _<n>)
	GZ    bool      // compressed: the name ends in .csv.gz
}

// ParseFileName parses a CSV file name written by PartName, or its .gz once
// compressed, with the date taken in loc. ok is false for any other name.
func ParseFileName(name string, loc *time.Location) (f CSVDay, ok bool) {
	m := dayFile.FindStringSubmatch(name)
	if m == nil {
		return CSVDay{}, false
	}
	gpu, err := strconv.Atoi(m[1])
	if err != nil {
		return CSVDay{}, false
	}
	day, err := time.ParseInLocation(dayLayout, m[3], loc)
	if err != nil {
		return CSVDay{}, false
	}
	part := 1
	if m[4] != "" {
		if part, err = strconv.Atoi(m[4]); err != nil {
			return CSVDay{}, false
		}
	}
	return CSVDay{Path: name, GPU: gpu, Board: m[2], Day: day, Part: part, GZ: m[5] != ""}, true
}

// ListDays returns the CSV files in dir, by GPU index, then board, then day
// (oldest first), then part, with the days taken in loc. A part with both a
// .csv and a .csv.gz (compression under way) is listed once, as its .csv:
// the .gz is complete only once the .csv is gone.
func ListDays(dir string, loc *time.Location) ([]CSVDay, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	type key struct {
		gpu   int
		board string
		day   time.Time
		part  int
	}
	seen := map[key]int{}
	var out []CSVDay
	for _, e := range ents {
		f, ok := ParseFileName(e.Name(), loc)
		if !ok || !e.Type().IsRegular() {
			continue
		}
		f.Path = filepath.Join(dir, e.Name())
		k := key{f.GPU, f.Board, f.Day, f.Part}
		if i, ok := seen[k]; ok {
			if out[i].GZ && !f.GZ {
				out[i] = f
			}
			continue
		}
		seen[k] = len(out)
		out = append(out, f)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].GPU != out[j].GPU {
			return out[i].GPU < out[j].GPU
		}
		if out[i].Board != out[j].Board {
			return out[i].Board < out[j].Board
		}
		if !out[i].Day.Equal(out[j].Day) {
			return out[i].Day.Before(out[j].Day)
		}
		return out[i].Part < out[j].Part
	})
	return out, nil
}
