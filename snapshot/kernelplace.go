package snapshot

import (
	"bytes"
	"fmt"
	"strconv"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/sink"
)

// placeKernelLines writes, after each kernel log line's printk timestamp
// ("[ 5001.500000] ..."), the wall-clock time wall maps it to, in the CSV's
// timestamp format, so that the line can be found among the rows.
func placeKernelLines(in []byte, wall func(printk time.Duration) time.Time) []byte {
	if wall == nil || len(in) == 0 {
		return in
	}
	var out bytes.Buffer
	out.Grow(len(in) + len(in)/4)
	for line := range bytes.Lines(in) {
		end := bytes.IndexByte(line, ']')
		if len(line) < 3 || line[0] != '[' || end < 2 {
			out.Write(line)
			continue
		}
		secs, err := strconv.ParseFloat(string(bytes.TrimSpace(line[1:end])), 64)
		if err != nil || secs < 0 || secs > 1e9 {
			out.Write(line)
			continue
		}
		fmt.Fprintf(&out, "%s {%s}%s", line[:end+1], wall(time.Duration(secs*float64(time.Second))).Format(sink.TimestampLayout), line[end+1:])
	}
	return out.Bytes()
}
