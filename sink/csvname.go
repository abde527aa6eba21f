package sink

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"time"
)

// dayLayout is the date in a CSV file's name.
const dayLayout = "2006-01-02"

// FileName returns the CSV file name of GPU index on day (local date): the
// day's first part.
func FileName(index int, day time.Time) string {
	return PartName(index, day, 1)
}

// PartName returns the name of part part (from 1) of GPU index's CSV of day.
// A day has more than one part when its column set changed (a restart with
// another fan count, a GPU whose fans became known mid-run) or when rows of
// a day already compressed came again (the clock stepped back): every file
// is one table under one header. Part 1 is gpu<index>-deep-<day>.csv, part
// n > 1 gpu<index>-deep-<day>_<n>.csv, which sorts after it.
func PartName(index int, day time.Time, part int) string {
	if part <= 1 {
		return fmt.Sprintf("gpu%d-deep-%s.csv", index, day.Format(dayLayout))
	}
	return fmt.Sprintf("gpu%d-deep-%s_%d.csv", index, day.Format(dayLayout), part)
}

// dayFile matches the names PartName gives, compressed (.csv.gz) or not.
var dayFile = regexp.MustCompile(`^gpu(\d+)-deep-(\d{4}-\d{2}-\d{2})(?:_([2-9]|[1-9]\d{1,5}))?\.csv(\.gz)?$`)

// CSVDay is one part of one GPU's CSV of one day, named by PartName.
type CSVDay struct {
	Path string    // the file; only the name when from ParseFileName
	GPU  int       // the GPU index in the name
	Day  time.Time // the date in the name, at midnight in the location asked for
	Part int       // the part of the day, from 1 (a name without _<n>)
	GZ   bool      // compressed: the name ends in .csv.gz
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
	day, err := time.ParseInLocation(dayLayout, m[2], loc)
	if err != nil {
		return CSVDay{}, false
	}
	part := 1
	if m[3] != "" {
		if part, err = strconv.Atoi(m[3]); err != nil {
			return CSVDay{}, false
		}
	}
	return CSVDay{Path: name, GPU: gpu, Day: day, Part: part, GZ: m[4] != ""}, true
}

// ListDays returns the CSV files in dir, by GPU, then day (oldest first),
// then part, with the days taken in loc. A part with both a .csv and a
// .csv.gz (compression under way) is listed once, as its .csv: the .gz is
// complete only once the .csv is gone.
func ListDays(dir string, loc *time.Location) ([]CSVDay, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	type key struct {
		gpu  int
		day  time.Time
		part int
	}
	seen := map[key]int{}
	var out []CSVDay
	for _, e := range ents {
		f, ok := ParseFileName(e.Name(), loc)
		if !ok || !e.Type().IsRegular() {
			continue
		}
		f.Path = filepath.Join(dir, e.Name())
		k := key{f.GPU, f.Day, f.Part}
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
		if !out[i].Day.Equal(out[j].Day) {
			return out[i].Day.Before(out[j].Day)
		}
		return out[i].Part < out[j].Part
	})
	return out, nil
}
