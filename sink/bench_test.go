package sink

import (
	"testing"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/internal/counters"
)

// BenchmarkAppendRow formats one CSV row (8-GPU hosts do this 80 times a
// second).
func BenchmarkAppendRow(b *testing.B) {
	s := fullSample()
	buf := make([]byte, 0, 1024)
	b.ReportAllocs()
	for b.Loop() {
		buf = AppendRow(buf[:0], &s, 2)
	}
}

// BenchmarkWriteRow formats and writes one row to its file (one write(2)),
// keeping it in the in-memory ring: the sink's whole per-sample cost.
func BenchmarkWriteRow(b *testing.B) {
	c, err := NewCSV(CSVConfig{Counters: counters.New(), Dir: b.TempDir(), FreeBytes: func(string) (uint64, error) { return 1 << 40, nil }},
		[]GPUColumns{{Index: 0, Fans: 2}})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	s := fullSample()
	c.Write(&s)
	b.ReportAllocs()
	for b.Loop() {
		s.Time = s.Time.Add(time.Millisecond) // same day
		if err := c.Write(&s); err != nil {
			b.Fatal(err)
		}
	}
}
