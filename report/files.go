package report

import (
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/sink"
	"github.com/gpu-telemetry/gpu-telemetry/snapshot"
)

// overlaps reports whether a file of day f.Day can hold rows between from
// and to. A day's file holds that local day's rows; a row written just after
// midnight may still land in the day before, so a day is taken to run until
// 00:01 of the next.
func overlaps(f sink.CSVDay, from, to time.Time) bool {
	end := f.Day.AddDate(0, 0, 1).Add(time.Minute)
	return !f.Day.After(to) && end.After(from)
}

// eventLogs returns events.log and its rotated copies (lumberjack names
// them events-<time>.log), oldest first.
func eventLogs(dir string) []string {
	rotated, _ := filepath.Glob(filepath.Join(dir, "events-*.log"))
	sort.Strings(rotated) // the time in the name sorts
	if _, err := os.Stat(filepath.Join(dir, "events.log")); err == nil {
		rotated = append(rotated, filepath.Join(dir, "events.log"))
	}
	return rotated
}

// snapshotFile is one crash snapshot on disk.
type snapshotFile struct {
	path string
	snapshot.Name
}

// listSnapshots returns the crash snapshots in dir/crashes, oldest first.
func listSnapshots(dir string, loc *time.Location) []snapshotFile {
	ents, _ := os.ReadDir(filepath.Join(dir, "crashes"))
	var out []snapshotFile
	for _, e := range ents {
		if n, ok := snapshot.ParseName(e.Name(), loc); ok && n.Kind == "crash" {
			out = append(out, snapshotFile{filepath.Join(dir, "crashes", e.Name()), n})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Time.Before(out[j].Time) })
	return out
}

// snapshotHeader reads the header of the crash snapshot at path.
func snapshotHeader(path string) (snapshot.Header, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return snapshot.Header{}, false
	}
	return snapshot.ParseHeader(string(b))
}
