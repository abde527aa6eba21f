package sink

import (
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

// TestTableReachesCSV walks reading.Table: a reading with a CSV column is
// written in that column and nowhere else, and an absent one is an empty
// cell.
func TestTableReachesCSV(t *testing.T) {
	forEachColumn(t, func(t *testing.T, d *reading.Def, col int, at map[string]int) {
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

// forEachColumn runs f in a subtest for each reading of reading.Table with
// a CSV column, with its column's index in a one-fan file's header and the
// index of every column by name.
func forEachColumn(t *testing.T, f func(t *testing.T, d *reading.Def, col int, at map[string]int)) {
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
			f(t, d, col, at)
		})
	}
}

// TestTableReadsBack walks reading.Table: every reading with a CSV column
// is read back from its cell by ReadCell (what report reads), a value the
// cell's format holds exactly as the value written, any value as the value
// the cell shows (written again, the same cell), and an empty cell as
// absent.
func TestTableReadsBack(t *testing.T) {
	// quantum is the step of the stored value a format's cell shows.
	quantum := map[reading.Format]uint64{reading.Plain: 1, reading.Hex4: 1,
		reading.Watts: 1000, reading.CentiWatt: 10, reading.MiB: 1 << 20, reading.Seconds: 1e6}
	forEachColumn(t, func(t *testing.T, d *reading.Def, col int, _ map[string]int) {
		q, ok := quantum[d.Format]
		if !ok {
			t.Fatalf("format %d has no quantum here: add it", d.Format)
		}
		cell := func(s *reading.Sample) string { return Cells(s, 1)[col] }
		vals := []uint64{4321 * q, 1234567, 0}
		if d.Signed() {
			neg := int64(-7)
			vals = append(vals, uint64(neg))
		}
		for _, v := range vals {
			var w, r reading.Sample
			w.NumFans = 1
			d.Set(&w, v)
			c := cell(&w)
			if !ReadCell(d, c, &r) {
				t.Fatalf("%d written as %q does not read back", v, c)
			}
			got, ok := d.Get(&r)
			if !ok {
				t.Fatalf("%d written as %q reads back absent", v, c)
			}
			if v%q == 0 && got != v {
				t.Errorf("%d written as %q reads back as %d", v, c, got)
			}
			if again := cell(&r); again != c {
				t.Errorf("%d written as %q, read back and written again %q", v, c, again)
			}
			// An empty cell: absent, whatever the sample held.
			d.Clear(&w)
			if c := cell(&w); c != "" || !ReadCell(d, c, &r) {
				t.Fatalf("absent: cell %q", c)
			}
			if v, ok := d.Get(&r); ok {
				t.Errorf("an empty cell reads back as %d, not absent", v)
			}
		}
		// A cell past what the reading holds (one more than its type's
		// largest value; the writer never writes one): absent, and said,
		// never cut to a smaller value that reads as present.
		for _, c := range tooBig(t, d) {
			var r reading.Sample
			d.Set(&r, 5)
			if ReadCell(d, c, &r) {
				t.Errorf("cell %q read, past what the reading holds", c)
			}
			if v, ok := d.Get(&r); ok {
				t.Errorf("cell %q reads back as %d, not absent", c, v)
			}
		}
		// A cell that is not the format's: absent, and said.
		var r reading.Sample
		d.Set(&r, 5)
		if ReadCell(d, "x1", &r) {
			t.Errorf("cell %q read", "x1")
		}
		if v, ok := d.Get(&r); ok {
			t.Errorf("a bad cell reads back as %d, not absent", v)
		}
	})
}

// tooBig is the cells of d's format one step past the largest value d
// holds (and below the smallest, for a signed reading); none for a 64-bit
// reading, whose every value a cell can hold is parsed or refused by the
// parser itself.
func tooBig(t *testing.T, d *reading.Def) []string {
	t.Helper()
	if d.Fits(math.MaxUint32 + 1) {
		return nil
	}
	if d.Signed() {
		if d.Format != reading.Plain {
			t.Fatalf("signed reading of format %d: add its cells here", d.Format)
		}
		return []string{"2147483648", "-2147483649"}
	}
	switch d.Format {
	case reading.Plain:
		return []string{"4294967296", "18446744073709551615"}
	case reading.Hex4:
		return []string{"0x100000000"}
	case reading.Watts:
		return []string{"4294968"} // 4294968000 mW
	case reading.CentiWatt:
		return []string{"4294967.30"} // 4294967300 mW
	}
	t.Fatalf("32-bit reading of format %d: add its cells here", d.Format)
	return nil
}

// TestFanTableReachesCSV walks reading.FanTable: each per-fan reading of
// fan 1 (of 2) is written in its column fan1_<CSV> and nowhere else, absent
// as an empty cell, and the column names it back (reading.FanColumn, what
// report reads). A row without a column (the policy) writes no cell.
func TestFanTableReachesCSV(t *testing.T) {
	cols := Columns(2)
	for i := range reading.FanTable {
		d := &reading.FanTable[i]
		t.Run(d.Name, func(t *testing.T) {
			if d.CSV == "" {
				s := reading.Sample{NumFans: 2}
				d.Set(&s, 1, 42)
				if row := string(AppendRow(nil, &s, 2)); strings.Contains(row, "42") {
					t.Errorf("%s has no column, but its value is in the row %q", d.Name, row)
				}
				return
			}
			name := "fan1_" + d.CSV
			col := -1
			for j, c := range cols {
				if c == name {
					col = j
				}
			}
			if col < 0 {
				t.Fatalf("column %q is not in the header %v", name, cols)
			}
			if fan, def, ok := reading.FanColumn(name); !ok || fan != 1 || def != d {
				t.Errorf("FanColumn(%q) = %d, %v, %v; want 1, %s", name, fan, def, ok, d.Name)
			}
			s := reading.Sample{NumFans: 2}
			d.Set(&s, 1, 42)
			cells := strings.Split(strings.TrimSuffix(string(AppendRow(nil, &s, 2)), "\n"), ",")
			for j, c := range cells {
				switch {
				case j == col && c != "42":
					t.Errorf("%s of fan 1 is 42, its column %s holds %q", d.Name, name, c)
				case j != col && j > 0 && c != "": // 0: the timestamp
					t.Errorf("%s of fan 1 set, column %s holds %q", d.Name, cols[j], c)
				}
			}
			if c := Cells(&s, 2)[col]; c != "42" {
				t.Errorf("Cells: column %s holds %q, want 42", name, c)
			}
			s.NumFans = 1 // fan 1 is not the GPU's: absent
			if c := strings.Split(string(AppendRow(nil, &s, 2)), ",")[col]; c != "" {
				t.Errorf("%s of a fan the sample does not have: column holds %q", d.Name, c)
			}
		})
	}
	for _, bad := range []string{"fan_speed_pct", "fan01_speed_pct", "fan" + strconv.Itoa(reading.MaxFans) + "_speed_pct", "fan1_rpm", "fanx_speed_pct", "gpu_temp"} {
		if _, _, ok := reading.FanColumn(bad); ok {
			t.Errorf("FanColumn(%q) is a fan column", bad)
		}
	}
}
