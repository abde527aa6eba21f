package sink

import (
	"strconv"
	"strings"
	"testing"

	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

// TestFanTableReachesCSV walks reading.FanTable: each per-fan reading of
// fan 1 (of 2) is written in its column fan1_<CSV> and nowhere else, absent
// as an empty cell, and the column names it back (reading.FanColumn, what
// report reads).
func TestFanTableReachesCSV(t *testing.T) {
	cols := Columns(2)
	for i := range reading.FanTable {
		d := &reading.FanTable[i]
		t.Run(d.Name, func(t *testing.T) {
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
