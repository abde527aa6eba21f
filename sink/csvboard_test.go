package sink

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/internal/counters"
	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

var (
	boardA = Board{UUID: "GPU-5a3c1e2f-0b4d-4e6f-8a9b-0c1d2e3f4a5b", Serial: "1791025012340", Bus: "00000000:01:00.0", Name: "NVIDIA RTX PRO 6000 Blackwell Workstation Edition"}
	boardB = Board{UUID: "GPU-9e8d7c6b-0b4d-4e6f-8a9b-0c1d2e3f4a5b", Serial: "1791025012341", Bus: "00000000:21:00.0", Name: "NVIDIA RTX PRO 6000 Blackwell Workstation Edition"}
)

// TestBoardLine: the board line reads back as written, empty fields left
// out, and other lines are not board lines.
func TestBoardLine(t *testing.T) {
	for _, b := range []Board{{Index: 3, UUID: boardA.UUID, Serial: boardA.Serial, Bus: boardA.Bus, Name: boardA.Name}, {Index: 0}} {
		line := string(b.Line())
		if !strings.HasPrefix(line, "# gpu=") || !strings.HasSuffix(line, "\n") || strings.Count(line, "\n") != 1 {
			t.Errorf("board line %q: want one line starting '# gpu='", line)
		}
		got, ok := ParseBoardLine(line)
		if !ok || got != b {
			t.Errorf("ParseBoardLine(%q) = %+v %v, want %+v", line, got, ok, b)
		}
	}
	if got := string(Board{Index: 0}.Line()); got != "# gpu=0\n" {
		t.Errorf("a board not known yet: %q, want only its index", got)
	}
	for _, l := range []string{"timestamp,gpu_temp", "#", "# uuid=x", "# gpu=x", "2026-11-29T15:29:19.200+01:00,1"} {
		if _, ok := ParseBoardLine(l); ok {
			t.Errorf("%q taken for a board line", l)
		}
	}
}

// TestReadPreamble: a file's board line and header, and a file of the
// versions before the board line (its header alone).
func TestReadPreamble(t *testing.T) {
	b := Board{Index: 2, UUID: boardA.UUID}
	text := string(b.Line()) + string(Header(0)) + "row\n"
	got, ok, hdr, n, err := ReadPreamble(bufio.NewReader(strings.NewReader(text)))
	if err != nil || !ok || got != b || hdr != string(Header(0)) || n != int64(len(b.Line())+len(Header(0))) {
		t.Errorf("ReadPreamble = %+v %v %q %d %v", got, ok, hdr, n, err)
	}
	got, ok, hdr, n, err = ReadPreamble(bufio.NewReader(strings.NewReader(string(Header(0)) + "row\n")))
	if err != nil || ok || hdr != string(Header(0)) || n != int64(len(Header(0))) {
		t.Errorf("ReadPreamble of an older file = %+v %v %q %d %v", got, ok, hdr, n, err)
	}
}

// TestCSVOneBoardPerFile is the operator trial's reproduction at the
// writer: a run writes board A as GPU 0; the next run, the same day, finds
// board B at index 0 (A fell off the bus, the indices moved). B's rows go
// to a file of its own, never after A's, and each file's first line names
// its board whole.
func TestCSVOneBoardPerFile(t *testing.T) {
	dir := t.TempDir()
	s := fullSample()
	run := func(b Board, temp uint32) {
		c, err := NewCSV(CSVConfig{Counters: counters.New(), Dir: dir, FreeBytes: func(string) (uint64, error) { return 1 << 40, nil }},
			[]GPUColumns{{Index: 0, Fans: 2, Board: b}})
		if err != nil {
			t.Fatal(err)
		}
		s.Values[reading.TempC] = reading.Widen(reading.Some(temp))
		for range 3 {
			s.Time = s.Time.Add(time.Second)
			if err := c.Write(&s); err != nil {
				t.Fatal(err)
			}
		}
		c.Close()
	}
	run(boardA, 64)
	run(boardB, 35)
	files, err := ListDays(dir, s.Time.Location())
	if err != nil || len(files) != 2 {
		t.Fatalf("files %+v %v, want one per board", files, err)
	}
	for i, b := range []Board{boardA, boardB} {
		b.Index = 0
		path := filepath.Join(dir, FileName(0, b.ID(), s.Time))
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		first, _, _ := strings.Cut(string(raw), "\n")
		if got, ok := ParseBoardLine(first); !ok || got != b {
			t.Errorf("%s starts with %q, want board %d's line", path, first, i)
		}
		lines := readLines(t, path)
		if len(lines) != 4 {
			t.Fatalf("%s: %d lines, want the header and its board's 3 rows", path, len(lines))
		}
		temp := []string{",64,", ",35,"}[i]
		for _, l := range lines[1:] {
			if !strings.Contains(l, temp) {
				t.Errorf("%s holds a row of another board: %q", path, l)
			}
		}
	}
}

// TestCSVBoardKnownLate: a GPU that did not answer at start writes to
// files of an unknown board; once its UUID is known (SetGPU), its rows go
// to its board's file. The same board with another bus id (moved to
// another slot) the same day continues in a new part, under a line that
// says so.
func TestCSVBoardKnownLate(t *testing.T) {
	dir := t.TempDir()
	c := newTestCSV(t, dir, CSVConfig{})
	s := fullSample()
	write := func() {
		s.Time = s.Time.Add(time.Second)
		if err := c.Write(&s); err != nil {
			t.Fatal(err)
		}
	}
	write()
	c.SetGPU(GPUColumns{Index: 0, Fans: 2, Board: boardA})
	write()
	write()
	moved := boardA
	moved.Bus = "00000000:41:00.0"
	c.SetGPU(GPUColumns{Index: 0, Fans: 2, Board: moved})
	write()
	c.Close()
	if n := len(readLines(t, filepath.Join(dir, FileName(0, UnknownBoard, s.Time)))); n != 2 {
		t.Errorf("the unknown board's file: %d lines, want the header and 1 row", n)
	}
	if n := len(readLines(t, filepath.Join(dir, FileName(0, boardA.ID(), s.Time)))); n != 3 {
		t.Errorf("the board's file: %d lines, want the header and 2 rows", n)
	}
	p2 := filepath.Join(dir, PartName(0, boardA.ID(), s.Time, 2))
	raw, err := os.ReadFile(p2)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(raw), "# gpu=0 uuid="+boardA.UUID+" serial="+boardA.Serial+" bus=00000000:41:00.0 ") {
		t.Errorf("the part after the move starts %q", raw[:min(len(raw), 120)])
	}
}

// TestLeftoverCompressionTempOfABoardsFile: the temp file of a compression
// killed half-way is removed at the next start, with the board in its name
// as without.
func TestLeftoverCompressionTempOfABoardsFile(t *testing.T) {
	dir := t.TempDir()
	names := []string{".gpu0-5a3c1e2f-deep-2026-11-29.csv.gz.tmp-123", ".gpu1-deep-2026-11-29.csv.gz.tmp-456"}
	touch(t, dir, names...)
	c := newTestCSV(t, dir, CSVConfig{Compress: true})
	c.Close()
	for _, n := range names {
		if _, err := os.Stat(filepath.Join(dir, n)); !os.IsNotExist(err) {
			t.Errorf("%s left behind: %v", n, err)
		}
	}
}

// TestCSVUnknownBoardNotContinuedAcrossRuns: two runs the same day each
// find a GPU at index 0 stuck at start: nothing tells the two boards apart
// (no UUID), so the second run's rows never continue the first run's
// unknown-board file; within one run they do.
func TestCSVUnknownBoardNotContinuedAcrossRuns(t *testing.T) {
	dir := t.TempDir()
	s := fullSample()
	for run := range 2 {
		c := newTestCSV(t, dir, CSVConfig{})
		for range 2 {
			s.Time = s.Time.Add(time.Second)
			if err := c.Write(&s); err != nil {
				t.Fatal(err)
			}
		}
		c.Close()
		if n := len(readLines(t, filepath.Join(dir, PartName(0, UnknownBoard, s.Time, run+1)))); n != 3 {
			t.Errorf("run %d: %d lines in its part, want the header and its own 2 rows", run, n)
		}
	}
}

// TestCSVCutInItsPreambleIsRepaired: the last run died writing a new
// file's first lines (the board line whole, the header cut): the file is
// written again from its start, not left headerless beside a new part.
func TestCSVCutInItsPreambleIsRepaired(t *testing.T) {
	dir := t.TempDir()
	s := fullSample()
	board := Board{Index: 0, UUID: boardA.UUID, Serial: boardA.Serial, Bus: boardA.Bus}
	path := filepath.Join(dir, FileName(0, board.ID(), s.Time))
	if err := os.WriteFile(path, append(board.Line(), Header(2)[:20]...), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := NewCSV(CSVConfig{Counters: counters.New(), Dir: dir, FreeBytes: func(string) (uint64, error) { return 1 << 40, nil }},
		[]GPUColumns{{Index: 0, Fans: 2, Board: board}})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Write(&s); err != nil {
		t.Fatal(err)
	}
	c.Close()
	if lines := readLines(t, path); len(lines) != 2 || lines[0]+"\n" != string(Header(2)) {
		t.Errorf("the file cut in its header: %q, want the header and the row", lines)
	}
	if _, err := os.Stat(filepath.Join(dir, PartName(0, board.ID(), s.Time, 2))); !os.IsNotExist(err) {
		t.Errorf("a second part was started beside the file cut in its header")
	}
}
