package sink

import (
	"bytes"

	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

// remember copies the sample of a row into the ring.
func (gf *gpuFile) remember(s *reading.Sample) {
	if len(gf.ring) == 0 {
		return
	}
	gf.ring[gf.ringNext] = *s
	gf.ringNext = (gf.ringNext + 1) % len(gf.ring)
	if gf.ringLen < len(gf.ring) {
		gf.ringLen++
	}
}

// Rows returns the GPU's header line and its last rows, oldest first, without
// newlines, all laid out under the current header (a row written before
// the GPU's fans were known has empty fan cells). They come from memory, so
// they are there even when the file is not.
func (c *CSV) Rows(index int) (header string, rows []string) {
	gf := c.files[index]
	if gf == nil {
		return "", nil
	}
	c.lock(gf)
	defer gf.mu.Unlock()
	return gf.rowsLocked()
}

// rowsLocked is Rows with gf.mu held.
func (gf *gpuFile) rowsLocked() (header string, rows []string) {
	rows = make([]string, 0, gf.ringLen)
	start := (gf.ringNext - gf.ringLen + len(gf.ring)) % max(len(gf.ring), 1)
	var b []byte
	for i := range gf.ringLen {
		b = AppendRow(b[:0], &gf.ring[(start+i)%len(gf.ring)], gf.fans)
		rows = append(rows, string(bytes.TrimSuffix(b, []byte("\n"))))
	}
	return string(bytes.TrimSuffix(gf.header, []byte("\n"))), rows
}

// Recent is a GPU's recent rows from memory, for a snapshot: the header
// line and the rows (Rows), and the last row's columns and cells (Cells).
type Recent struct {
	Header  string
	Rows    []string
	Columns []string
	Last    []string // nil without rows
}

// Recent returns the GPU's recent rows with the last one's cells, all read
// at once (the last cells are those of the last row in Rows).
func (c *CSV) Recent(index int) Recent {
	gf := c.files[index]
	if gf == nil {
		return Recent{}
	}
	c.lock(gf)
	defer gf.mu.Unlock()
	r := Recent{Columns: Columns(gf.fans)}
	r.Header, r.Rows = gf.rowsLocked()
	if gf.ringLen > 0 {
		r.Last = Cells(&gf.ring[(gf.ringNext-1+len(gf.ring))%len(gf.ring)], gf.fans)
	}
	return r
}
