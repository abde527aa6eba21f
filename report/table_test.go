package report

import (
	"strings"
	"testing"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/reading"
	"github.com/gpu-telemetry/gpu-telemetry/sink"
)

// TestReaderWalksTheTable: every reading of reading.Table a Row keeps
// (rowReadings, and the throttle bitmask) or the health replay reads
// (watched), in a row the logger wrote
// (sink.Header, sink.AppendRow), is read by the report's reader from its
// column by the table's format: the cell it shows written again the same,
// the Row's value the stored one in the report's unit, the other readings
// absent (not parsed), and an empty cell absent (not the row before's
// value, not 0).
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
	read := func(t *testing.T, s *reading.Sample) Row {
		t.Helper()
		line := strings.TrimSuffix(string(sink.AppendRow(nil, s, 1)), "\n")
		r, _, ok := lay.parseRow(line, nil)
		if !ok {
			t.Fatalf("row %q does not parse", line)
		}
		return r
	}
	for i := range reading.Table {
		d := &reading.Table[i]
		if d.CSV == "" {
			continue
		}
		t.Run(d.Name, func(t *testing.T) {
			s := reading.Sample{Time: at, NumFans: 1}
			d.Set(&s, max(d.Min, 1000))
			r := read(t, &s)
			if !charted(d) && !watched(d) {
				if v, ok := d.Get(&lay.s); ok {
					t.Errorf("%s, which no Row keeps and the health replay does not read, parsed as %d", d.Name, v)
				}
				return
			}
			if _, ok := d.Get(&lay.s); !ok {
				t.Fatalf("%s written, read as absent", d.Name)
			}
			for _, rr := range rowReadings {
				want := reading.Opt[float64]{}
				if rr.d == d {
					want = reading.Some(float64(max(d.Min, 1000)) / rr.div)
				}
				if got := *rr.in(&r); got != want {
					t.Errorf("%s written: the Row's %s is %+v, want %+v", d.Name, rr.d.Name, got, want)
				}
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
