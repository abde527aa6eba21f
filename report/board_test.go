package report

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/sink"
)

// TestBoardsOfOneIndexStayApart: two boards were GPU 0, one before a
// restart and one after (the indices moved), and the older files of a
// version without board lines are there too. The report keeps each board's
// rows apart and names each; --gpu by UUID prefix or bus id picks one board,
// wherever it was; a prefix two boards share, or none has, is an error.
func TestBoardsOfOneIndexStayApart(t *testing.T) {
	dir := t.TempDir()
	loc := time.UTC
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, loc)
	a := sink.Board{Index: 0, UUID: "GPU-5a3c1e2f-0000", Serial: "S-A", Bus: "00000000:01:00.0"}
	b := sink.Board{Index: 0, UUID: "GPU-5a3c9999-0000", Serial: "S-B", Bus: "00000000:21:00.0"}
	write := func(bd sink.Board, start time.Time, temp int) {
		var s strings.Builder
		s.Write(bd.Line())
		s.WriteString(header)
		for i := range 50 {
			s.WriteString(rowLine(start.Add(time.Duration(i)*100*time.Millisecond), temp, ""))
		}
		name := sink.FileName(bd.Index, bd.ID(), start)
		if err := os.WriteFile(filepath.Join(dir, name), []byte(s.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(a, t0, 64)
	write(b, t0.Add(10*time.Second), 33)
	bAt1 := b
	bAt1.Index = 1
	write(bAt1, t0, 60) // B was GPU 1 before the restart
	writeDay(t, filepath.Join(dir, "gpu0-deep-2026-11-30.csv"), t0.Add(-24*time.Hour), 10, time.Second)

	build := func(gpu int, board string) (*Report, error) {
		return Build(Options{Dir: dir, At: t0.Add(10 * time.Second), GPU: gpu, Board: board, Before: time.Minute, After: time.Minute, Loc: loc})
	}
	rep, err := build(0, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.GPUs) != 2 || rep.GPUs[0].Board.UUID != a.UUID || rep.GPUs[1].Board.UUID != b.UUID {
		t.Fatalf("GPU 0's data: %d sets, want board A's then board B's", len(rep.GPUs))
	}
	for i, temp := range []float64{64, 33} {
		for _, r := range rep.GPUs[i].Rows {
			if v, ok := r.Temp.Get(); !ok || float64(v) != temp {
				t.Fatalf("%s holds a row of the other board: %v", rep.GPUs[i].Name(), r.Temp)
			}
		}
	}
	// Each board's peaks are its own, named by the board.
	peakOf := map[string]bool{}
	for _, p := range rep.Peaks {
		peakOf[p.name()] = true
	}
	if len(peakOf) != 2 || !peakOf["gpu0/5a3c1e2f"] || !peakOf["gpu0/5a3c9999"] {
		t.Errorf("peaks of %v, want one set per board", peakOf)
	}
	var text strings.Builder
	rep.WriteText(&text)
	for _, want := range []string{
		"Board:    GPU 0 (GPU-5a3c1e2f-0000, serial S-A, bus 00000000:01:00.0)\n",
		"Board:    GPU 0 (GPU-5a3c9999-0000, serial S-B, bus 00000000:21:00.0)\n",
		"Note:     GPU 0 was 2 boards in this window",
	} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, text.String())
		}
	}

	for _, tc := range []struct {
		sel     string
		indices []int
		err     string
	}{
		{"5a3c1e2f", []int{0}, ""},
		{"GPU-5A3C9999-0000", []int{0, 1}, ""},
		{"0000:21:00.0", []int{0, 1}, ""},
		{"5a3c", nil, "--gpu 5a3c: names 2 boards: GPU-5a3c1e2f-0000 (GPU 0, bus 00000000:01:00.0), GPU-5a3c9999-0000 (GPU 0, bus 00000000:21:00.0); give more of the UUID"},
		{"GPU-ffff", nil, "--gpu GPU-ffff: no board with this UUID or PCI bus id"},
	} {
		rep, err := build(-1, tc.sel)
		if tc.err != "" {
			if err == nil || !strings.HasPrefix(err.Error(), tc.err) {
				t.Errorf("--gpu %s: error %v, want %q", tc.sel, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("--gpu %s: %v", tc.sel, err)
			continue
		}
		var got []int
		for _, g := range rep.GPUs {
			got = append(got, g.Index)
			if !strings.EqualFold(g.Board.UUID, rep.Board) {
				t.Errorf("--gpu %s: rows of board %s", tc.sel, g.Board.UUID)
			}
		}
		if len(got) != len(tc.indices) {
			t.Errorf("--gpu %s: indices %v, want %v", tc.sel, got, tc.indices)
		}
	}
}
