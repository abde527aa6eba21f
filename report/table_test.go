package report

import (
	"strings"
	"testing"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/reading"
	"github.com/gpu-telemetry/gpu-telemetry/sink"
)

// TestReaderWalksTheTable: every reading of reading.Table with a CSV column,
// in a row the logger wrote (sink.Header, sink.AppendRow), is read by the
// report's reader into its sample: the cell it shows written again the same,
// the other readings absent, and an empty cell absent (not the row before's
// value, not 0). A new reading reaches the reader with no edit here.
func TestReaderWalksTheTable(t *testing.T) {
	lay, err := parseLayout(string(sink.Header(1)))
	if err != nil {
		t.Fatal(err)
	}
	cols := map[string]int{}
	for i, c := range sink.Columns(1) {
		cols[c] = i
	}
	at := time.Date(2026, 11, 30, 1, 2, 3, 0, time.UTC)
	read := func(t *testing.T, s *reading.Sample) {
		t.Helper()
		line := strings.TrimSuffix(string(sink.AppendRow(nil, s, 1)), "\n")
		if _, _, ok := lay.parseRow(line, nil); !ok {
			t.Fatalf("row %q does not parse", line)
		}
	}
	for i := range reading.Table {
		d := &reading.Table[i]
		if d.CSV == "" {
			continue
		}
		t.Run(d.Name, func(t *testing.T) {
			s := reading.Sample{Time: at, NumFans: 1}
			d.Set(&s, max(d.Min, 1000))
			read(t, &s)
			if _, ok := d.Get(&lay.s); !ok {
				t.Fatalf("%s written, read as absent", d.Name)
			}
			want, got := sink.Cells(&s, 1)[cols[d.CSV]], sink.Cells(&lay.s, 1)[cols[d.CSV]]
			if got != want {
				t.Errorf("%s written as %q, read back as %q", d.Name, want, got)
			}
			for j := range reading.Table {
				if o := &reading.Table[j]; o != d && o.CSV != "" {
					if v, ok := o.Get(&lay.s); ok {
						t.Errorf("%s written, %s read as %d", d.Name, o.Name, v)
					}
				}
			}
			d.Clear(&s)
			read(t, &s)
			if v, ok := d.Get(&lay.s); ok {
				t.Errorf("%s empty, read as %d", d.Name, v)
			}
		})
	}
}
