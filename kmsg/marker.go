package kmsg

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"time"
)

// A marker is a record the logger writes to /dev/kmsg itself when the kernel
// log has been quiet for a long time, so that the clock estimator
// (kclock.Estimator) sees a fresh record: the kernel stamps it when it is
// written and the reader gets it back at once. It is tagged so that a reader of dmesg knows where it came from.
const (
	// MarkerTag starts every marker's message.
	MarkerTag = "gpu-telemetry: kmsg clock check"
	// MarkerEvery is how long the log must be quiet, and how long since the
	// last marker, before another is written: at most one an hour.
	MarkerEvery = time.Hour
)

// markerLine is written to /dev/kmsg: level 7 (debug), so consoles stay quiet.
const markerLine = "<7>" + MarkerTag + " (dmesg_time offset estimate; written at most hourly, only when the log is quiet)\n"

// IsMarker reports whether msg is a marker's message.
func IsMarker(msg string) bool { return strings.HasPrefix(msg, MarkerTag) }

// MarkerDue reports whether a marker should be written at now, when the last
// record arrived at lastRecord and the last marker was written at lastMarker
// (all CLOCK_MONOTONIC; lastMarker 0 for never). Both must be MarkerEvery ago.
func MarkerDue(now, lastRecord, lastMarker time.Duration) bool {
	return now-lastRecord >= MarkerEvery && (lastMarker == 0 || now-lastMarker >= MarkerEvery)
}

// OpenMarkerWriter opens path for writing markers. Only the kernel's log
// device takes them (a file or FIFO would get a record without a kernel
// timestamp), and only where the logger may write there (root): otherwise
// the error says why, wrapping ErrPermission when writing is not allowed.
func OpenMarkerWriter(path string) (io.WriteCloser, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("kmsg: markers: %w", err)
	}
	if fi.Mode()&os.ModeCharDevice == 0 {
		return nil, fmt.Errorf("kmsg: markers: %s is not the kernel log device", path)
	}
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		if errors.Is(err, fs.ErrPermission) {
			return nil, fmt.Errorf("kmsg: markers: %w: %w", err, ErrPermission)
		}
		return nil, fmt.Errorf("kmsg: markers: %w", err)
	}
	return f, nil
}

// WriteMarker writes one marker record to w (from OpenMarkerWriter).
func WriteMarker(w io.Writer) error {
	if _, err := io.WriteString(w, markerLine); err != nil {
		return fmt.Errorf("kmsg: write marker: %w", err)
	}
	return nil
}
