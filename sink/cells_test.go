package sink

import (
	"encoding/csv"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/internal/counters"
	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

// TestCellsAreTheRowReadBack: Cells gives each cell of a sample's row as a
// CSV reader reads the row back (a quoted flags cell unquoted), for every
// fan layout; Recent's last cells are the last row's.
func TestCellsAreTheRowReadBack(t *testing.T) {
	full := fullSample()
	hung := reading.Sample{Time: full.Time, Status: reading.StatusHung, Err: "nvmlDeviceGetPowerUsage", HungFor: 2300 * time.Millisecond}
	hung.Flags.Add(reading.Flag{Kind: reading.FlagNVMLHung, S: hung.Err, A: 2300}) // NVML_HUNG(fn,ms): quoted
	quote := reading.Sample{Time: full.Time, Status: reading.StatusFailed, NumFans: 1}
	quote.Flags.Add(reading.Flag{Kind: reading.FlagNVMLFailed, S: `a "quoted", comma`})
	for name, s := range map[string]reading.Sample{"full": full, "hung": hung, "quote": quote, "empty": {Time: full.Time}} {
		for _, fans := range []int{0, 1, 2} {
			row := strings.TrimSuffix(string(AppendRow(nil, &s, fans)), "\n")
			want, err := csv.NewReader(strings.NewReader(row)).Read()
			if err != nil {
				t.Fatalf("%s, %d fans: the row does not parse: %v", name, fans, err)
			}
			if got := Cells(&s, fans); !slices.Equal(got, want) {
				t.Errorf("%s, %d fans: cells\n%q\nwant the row read back\n%q", name, fans, got, want)
			}
			if n := len(Columns(fans)); len(want) != n {
				t.Errorf("%s, %d fans: %d cells, %d columns", name, fans, len(want), n)
			}
		}
	}
	c, err := NewCSV(CSVConfig{Counters: counters.New(), Dir: t.TempDir(), MinFreeMB: 0}, []GPUColumns{{Index: 0, Fans: 2}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if r := c.Recent(0); len(r.Rows) != 0 || r.Last != nil || len(r.Columns) != len(Columns(2)) {
		t.Errorf("before any row: %+v", r)
	}
	for _, s := range []reading.Sample{full, hung} {
		c.Write(&s)
	}
	r := c.Recent(0)
	last, _ := csv.NewReader(strings.NewReader(r.Rows[len(r.Rows)-1])).Read()
	if !slices.Equal(r.Last, last) || !strings.HasPrefix(r.Header, "timestamp,") {
		t.Errorf("Recent's last cells %q, want the last row's %q (header %q)", r.Last, last, r.Header)
	}
}

// TestReadChanged: a cell the same as the row before's is not parsed again
// (the sample keeps what it holds), a changed or emptied one is, and
// without a row before (or of another width) every cell is.
func TestReadChanged(t *testing.T) {
	cols := []string{"timestamp", "gpu_temp", "ecc_sbe_volatile", "remap_pending"}
	rc := ReadingColumns(cols, nil)
	for _, tc := range []struct {
		name             string
		prev, cells      []string
		wantSBE, wantPen reading.Opt[uint64]
	}{
		{"same cells: kept as held", []string{"t", "60", "3", "0"}, []string{"t", "60", "3", "0"}, reading.Some[uint64](99), reading.Some[uint64](98)},
		{"changed cell: parsed", []string{"t", "60", "3", "0"}, []string{"t", "60", "6", "0"}, reading.Some[uint64](6), reading.Some[uint64](98)},
		{"emptied cell: absent", []string{"t", "60", "3", "1"}, []string{"t", "60", "3", ""}, reading.Some[uint64](99), reading.Opt[uint64]{}},
		{"no row before: all parsed", nil, []string{"t", "60", "3", "1"}, reading.Some[uint64](3), reading.Some[uint64](1)},
	} {
		var s reading.Sample
		s.Values[reading.HSBEVolatile], s.Values[reading.HRemapPending] = reading.Some[uint64](99), reading.Some[uint64](98)
		rc.ReadChanged(tc.cells, tc.prev, &s)
		if s.Values[reading.HSBEVolatile] != tc.wantSBE || s.Values[reading.HRemapPending] != tc.wantPen {
			t.Errorf("%s: sbe %v pending %v, want %v %v", tc.name, s.Values[reading.HSBEVolatile], s.Values[reading.HRemapPending], tc.wantSBE, tc.wantPen)
		}
	}
}
