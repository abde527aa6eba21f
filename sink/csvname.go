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

// FileName returns the CSV file name of GPU index on day (local date).
func FileName(index int, day time.Time) string {
	return fmt.Sprintf("gpu%d-deep-%s.csv", index, day.Format(dayLayout))
}

// dayFile matches the names FileName gives, compressed (.csv.gz) or not.
var dayFile = regexp.MustCompile(`^gpu(\d+)-deep-(\d{4}-\d{2}-\d{2})\.csv(\.gz)?$`)

// CSVDay is one GPU's CSV file of one day, named by FileName.
type CSVDay struct {
	Path string    // the file; only the name when from ParseFileName
	GPU  int       // the GPU index in the name
	Day  time.Time // the date in the name, at midnight in the location asked for
	GZ   bool      // compressed: the name ends in .csv.gz
}

// ParseFileName parses a CSV file name written by FileName, or its .gz once
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
	return CSVDay{Path: name, GPU: gpu, Day: day, GZ: m[3] != ""}, true
}

// ListDays returns the CSV files in dir, by GPU then day (oldest first),
// with the days taken in loc. A day with both a .csv and a .csv.gz
// (compression under way) is listed once, as its .csv: the .gz is complete
// only once the .csv is gone.
func ListDays(dir string, loc *time.Location) ([]CSVDay, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	type key struct {
		gpu int
		day time.Time
	}
	seen := map[key]int{}
	var out []CSVDay
	for _, e := range ents {
		f, ok := ParseFileName(e.Name(), loc)
		if !ok || !e.Type().IsRegular() {
			continue
		}
		f.Path = filepath.Join(dir, e.Name())
		k := key{f.GPU, f.Day}
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
		return out[i].Day.Before(out[j].Day)
	})
	return out, nil
}
