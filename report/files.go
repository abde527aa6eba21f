package report

import (
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/sink"
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

// crashName matches crash snapshot files: crash-<YYYYMMDD-HHMMSS.mmm>-gpu<i>.log,
// without the follow-ups (+10s).
var crashName = regexp.MustCompile(`^crash-(\d{8}-\d{6}\.\d{3})-gpu(\d+)\.log$`)

// snapshotFile is one crash snapshot on disk.
type snapshotFile struct {
	path string
	at   time.Time
	gpu  int
}

// listSnapshots returns the crash snapshots in dir/crashes, oldest first.
func listSnapshots(dir string, loc *time.Location) []snapshotFile {
	ents, _ := os.ReadDir(filepath.Join(dir, "crashes"))
	var out []snapshotFile
	for _, e := range ents {
		if s, ok := parseSnapshotName(filepath.Join(dir, "crashes", e.Name()), loc); ok {
			out = append(out, s)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].at.Before(out[j].at) })
	return out
}

func parseSnapshotName(path string, loc *time.Location) (snapshotFile, bool) {
	m := crashName.FindStringSubmatch(filepath.Base(path))
	if m == nil {
		return snapshotFile{}, false
	}
	at, err := time.ParseInLocation("20060102-150405.000", m[1], loc)
	if err != nil {
		return snapshotFile{}, false
	}
	gpu, _ := strconv.Atoi(m[2])
	return snapshotFile{path: path, at: at, gpu: gpu}, true
}

// snapshotHeader reads the "Time:", "GPU:" and "Reason:" lines of a crash
// snapshot's header.
func snapshotHeader(path string) (at time.Time, gpu int, reason string, ok bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return
	}
	gpu = -1
	for _, l := range strings.SplitN(string(b), "\n", 20) {
		switch {
		case strings.HasPrefix(l, "Time: "):
			t, err := time.Parse(time.RFC3339Nano, strings.TrimPrefix(l, "Time: "))
			if err == nil {
				at, ok = t, true
			}
		case strings.HasPrefix(l, "GPU: "):
			f := strings.Fields(strings.TrimPrefix(l, "GPU: "))
			if len(f) > 0 {
				if n, err := strconv.Atoi(f[0]); err == nil {
					gpu = n
				}
			}
		case strings.HasPrefix(l, "Reason: "):
			reason = strings.TrimPrefix(l, "Reason: ")
		}
	}
	return
}
