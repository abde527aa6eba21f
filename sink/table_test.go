package sink

import (
	"strings"
	"testing"

	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

// TestTableReachesCSV walks reading.Table: a reading with a CSV column is
// written in that column and nowhere else, and an absent one is an empty
// cell.
func TestTableReachesCSV(t *testing.T) {
	cols := Columns(1)
	at := map[string]int{}
	for i, c := range cols {
		at[c] = i
	}
	for i := range reading.Table {
		d := &reading.Table[i]
		if d.CSV == "" {
			continue
		}
		t.Run(d.Name, func(t *testing.T) {
			col, ok := at[d.CSV]
			if !ok {
				t.Fatalf("column %q is not in the header %v", d.CSV, cols)
			}
			var s reading.Sample
			s.NumFans = 1
			d.Set(&s, max(d.Min, 1000))
			cells := strings.Split(strings.TrimSuffix(string(AppendRow(nil, &s, 1)), "\n"), ",")
			if cells[col] == "" {
				t.Errorf("%s set, its column %s is empty: %v", d.Name, d.CSV, cells)
			}
			for j := range reading.Table {
				o := &reading.Table[j]
				if o.CSV == "" || o == d {
					continue
				}
				if c := cells[at[o.CSV]]; c != "" {
					t.Errorf("%s set, column %s of %s holds %q", d.Name, o.CSV, o.Name, c)
				}
			}
			d.Clear(&s)
			if c := strings.Split(string(AppendRow(nil, &s, 1)), ",")[col]; c != "" {
				t.Errorf("%s absent, its column holds %q", d.Name, c)
			}
		})
	}
}
