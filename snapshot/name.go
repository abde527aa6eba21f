package snapshot

import (
	"regexp"
	"strconv"
	"time"
)

// stampLayout names files to the millisecond: gpu-telemetry-deep.py named
// them to the second (crash-%Y%m%d-%H%M%S.log), so two snapshots in one
// second collided.
const stampLayout = "20060102-150405.000"

// baseName is "<kind>-<stamp>-gpu<N>", or gpuNA for an event that matched no
// monitored GPU.
func baseName(kind string, t time.Time, gpu int) string {
	g := "gpuNA"
	if gpu >= 0 {
		g = "gpu" + strconv.Itoa(gpu)
	}
	return kind + "-" + t.Format(stampLayout) + "-" + g
}

// incidentName matches the names of crash and spike snapshots: baseName,
// the "-2" ... of a second in the same millisecond, ".log".
var incidentName = regexp.MustCompile(`^(crash|spike)-(\d{8}-\d{6}\.\d{3})-gpu(\d+|NA)(?:-\d+)?\.log$`)

// Name is what a snapshot file's name says.
type Name struct {
	Kind string    // "crash" or "spike"
	Time time.Time // the incident's time, to the millisecond
	GPU  int       // the GPU index; -1 when no monitored GPU matched (gpuNA)
}

// ParseName parses the base name of a crash or spike snapshot, reading its
// time in loc (names are in local time). ok is false for any other file,
// follow-ups and boot logs included.
func ParseName(name string, loc *time.Location) (n Name, ok bool) {
	m := incidentName.FindStringSubmatch(name)
	if m == nil {
		return Name{}, false
	}
	at, err := time.ParseInLocation(stampLayout, m[2], loc)
	if err != nil {
		return Name{}, false
	}
	gpu := -1
	if m[3] != "NA" {
		if gpu, err = strconv.Atoi(m[3]); err != nil {
			return Name{}, false
		}
	}
	return Name{Kind: m[1], Time: at, GPU: gpu}, true
}
