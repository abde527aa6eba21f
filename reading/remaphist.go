package reading

import (
	"strconv"
	"time"
)

// RemapHistogram is nvmlDeviceGetRowRemapperHistogram's answer: the GPU
// memory's banks counted by how many spare rows each has left for row
// remapping. Banks move from Max towards None as rows are remapped; a bank
// at None cannot remap again (the next uncorrectable error there is a remap
// failure). Read at start and whenever the remap counts change.
type RemapHistogram struct {
	At                            time.Time // the sample that read it
	Max, High, Partial, Low, None uint32    // banks with all, most, some, few, no spare rows left
}

// String is the histogram as events.log and the snapshot write it:
// "max:64,high:0,partial:0,low:0,none:0".
func (h RemapHistogram) String() string {
	b := make([]byte, 0, 48)
	for i, v := range h.Buckets() {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, RemapBucketNames[i]...)
		b = append(b, ':')
		b = strconv.AppendUint(b, uint64(v), 10)
	}
	return string(b)
}

// Buckets returns the counts in RemapBucketNames' order.
func (h RemapHistogram) Buckets() [5]uint32 {
	return [5]uint32{h.Max, h.High, h.Partial, h.Low, h.None}
}

// RemapBucketNames names the histogram's buckets, most spare rows first.
var RemapBucketNames = [5]string{"max", "high", "partial", "low", "none"}
