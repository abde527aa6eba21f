package snapshot

import (
	"bytes"
	"strconv"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/sink"
)

// placeKernelLines writes, after each kernel log line's printk timestamp
// ("[ 5001.500000] ..."), the wall-clock time it maps to through the
// measured offset of the kernel log's clock (Config.KernelWall), in the CSV's
// timestamp format: the line can be found among the rows, which the raw
// seconds since boot cannot do. Lines without a timestamp stay as they are.
func placeKernelLines(r result, wall func(printk time.Duration) time.Time) result {
	if wall == nil || len(r.out) == 0 {
		return r
	}
	var out bytes.Buffer
	out.Grow(len(r.out) + len(r.out)/4)
	for line := range bytes.Lines(r.out) {
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
		out.Write(line[:end+1])
		out.WriteString(" {")
		out.WriteString(wall(time.Duration(secs * float64(time.Second))).Format(sink.TimestampLayout))
		out.WriteByte('}')
		out.Write(line[end+1:])
	}
	r.out = out.Bytes()
	return r
}
