package sink

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestParseFileName(t *testing.T) {
	day := time.Date(2026, 11, 30, 0, 0, 0, 0, cet)
	tests := []struct {
		name  string
		ok    bool
		gpu   int
		board string
		gz    bool
	}{
		{FileName(3, "5a3c1e2f", day), true, 3, "5a3c1e2f", false},
		{FileName(12, "5a3c1e2f", day) + ".gz", true, 12, "5a3c1e2f", true},
		{FileName(0, UnknownBoard, day), true, 0, UnknownBoard, false},
		{"gpu3-deep-2026-11-30.csv", true, 3, "", false}, // written before the board was in the name
		{"gpu3-deep-2026-11-30.csv.gz", true, 3, "", true},
		{"gpu3-5a3c1e2f-deep-2026-11-30.csv.gz.tmp", false, 0, "", false},
		{".gpu3-5a3c1e2f-deep-2026-11-30.csv.gz.tmp123", false, 0, "", false},
		{"gpu3-5a3c1e2f-deep-2026-13-30.csv", false, 0, "", false},
		{"gpu3-5A3C1E2F-deep-2026-11-30.csv", false, 0, "", false},
		{"gpu3-5a3c1e2f0-deep-2026-11-30.csv", false, 0, "", false},
		{"gpu-deep-2026-11-30.csv", false, 0, "", false},
		{"events.log", false, 0, "", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, ok := ParseFileName(tc.name, cet)
			if ok != tc.ok || f.GPU != tc.gpu || f.Board != tc.board || f.GZ != tc.gz || (ok && (!f.Day.Equal(day) || f.Path != tc.name)) {
				t.Errorf("got %+v %v, want gpu %d board %q gz %v on %v: %v", f, ok, tc.gpu, tc.board, tc.gz, day, tc.ok)
			}
		})
	}
}

// TestBoardID: a board is named by its UUID's first 8 characters after
// GPU-, in lower case; without a UUID it is unknown.
func TestBoardID(t *testing.T) {
	for uuid, want := range map[string]string{
		"GPU-5a3c1e2f-0b4d-4e6f-8a9b-0c1d2e3f4a5b": "5a3c1e2f",
		"GPU-5A3C1E2F-0B4D":                        "5a3c1e2f",
		"GPU-12ab":                                 "12ab",
		"5a3c1e2f9":                                "5a3c1e2f",
		"":                                         UnknownBoard,
		"GPU-":                                     UnknownBoard,
		"GPU-../../x":                              "x",
	} {
		if got := BoardID(uuid); got != want {
			t.Errorf("BoardID(%q) = %q, want %q", uuid, got, want)
		}
		if f, ok := ParseFileName(FileName(0, BoardID(uuid), time.Date(2026, 12, 1, 0, 0, 0, 0, cet)), cet); !ok || f.Board != want {
			t.Errorf("the file name of board %q does not parse back: %+v %v", want, f, ok)
		}
	}
}

// TestListDays: by GPU, then board, then day, one entry a day, the .csv
// while its .gz is being written; other names and directories are left out.
// Files named before the board was in the name are listed too.
func TestListDays(t *testing.T) {
	dir := t.TempDir()
	touch(t, dir, "gpu1-aaaa0001-deep-2026-11-29.csv.gz", "gpu1-aaaa0001-deep-2026-11-30.csv", "gpu1-aaaa0001-deep-2026-11-30.csv.gz",
		"gpu0-bbbb0002-deep-2026-11-30.csv", "gpu0-aaaa0001-deep-2026-11-28.csv.gz", "gpu0-deep-2026-11-27.csv.gz",
		"events.log", ".gpu0-bbbb0002-deep-2026-11-29.csv.gz.tmp1")
	os.Mkdir(filepath.Join(dir, "gpu2-aaaa0003-deep-2026-11-30.csv"), 0o755)
	wantDays(t, dir, "gpu0-deep-2026-11-27.csv.gz", "gpu0-aaaa0001-deep-2026-11-28.csv.gz", "gpu0-bbbb0002-deep-2026-11-30.csv",
		"gpu1-aaaa0001-deep-2026-11-29.csv.gz", "gpu1-aaaa0001-deep-2026-11-30.csv")
	if _, err := ListDays(filepath.Join(dir, "none"), cet); err == nil {
		t.Errorf("a missing directory listed without an error")
	}
}

// TestDayParts: a day continued in more parts (another column set, a day
// compressed already) lists its parts in order after the first, and only
// names PartName writes parse.
func TestDayParts(t *testing.T) {
	day := time.Date(2026, 12, 1, 0, 0, 0, 0, cet)
	for _, tc := range []struct {
		name string
		ok   bool
		part int
	}{
		{PartName(0, "5a3c1e2f", day, 1), true, 1},
		{PartName(0, "5a3c1e2f", day, 2), true, 2},
		{PartName(0, "5a3c1e2f", day, 12) + ".gz", true, 12},
		{"gpu0-5a3c1e2f-deep-2026-12-01_1.csv", false, 0}, // part 1 has no suffix
		{"gpu0-5a3c1e2f-deep-2026-12-01_02.csv", false, 0},
		{"gpu0-5a3c1e2f-deep-2026-12-01_.csv", false, 0},
		{"gpu0-deep-2026-12-01_2.csv", true, 2},
	} {
		f, ok := ParseFileName(tc.name, cet)
		if ok != tc.ok || f.Part != tc.part || (ok && (f.GPU != 0 || !f.Day.Equal(day))) {
			t.Errorf("%s: got %+v %v, want part %d ok %v", tc.name, f, ok, tc.part, tc.ok)
		}
	}
	if PartName(0, "5a3c1e2f", day, 1) != FileName(0, "5a3c1e2f", day) || PartName(0, "5a3c1e2f", day, 2) != "gpu0-5a3c1e2f-deep-2026-12-01_2.csv" {
		t.Errorf("part names: %s %s", PartName(0, "5a3c1e2f", day, 1), PartName(0, "5a3c1e2f", day, 2))
	}
	dir := t.TempDir()
	touch(t, dir, "gpu0-5a3c1e2f-deep-2026-12-02.csv", "gpu0-5a3c1e2f-deep-2026-12-01_10.csv", "gpu0-5a3c1e2f-deep-2026-12-01_2.csv.gz",
		"gpu0-5a3c1e2f-deep-2026-12-01_2.csv", "gpu0-5a3c1e2f-deep-2026-12-01.csv.gz")
	wantDays(t, dir, "gpu0-5a3c1e2f-deep-2026-12-01.csv.gz", "gpu0-5a3c1e2f-deep-2026-12-01_2.csv", "gpu0-5a3c1e2f-deep-2026-12-01_10.csv", "gpu0-5a3c1e2f-deep-2026-12-02.csv")
}

// touch creates empty files in dir.
func touch(t *testing.T, dir string, names ...string) {
	t.Helper()
	for _, n := range names {
		if err := os.WriteFile(filepath.Join(dir, n), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// wantDays fails unless ListDays lists exactly the files want of dir, in
// that order.
func wantDays(t *testing.T, dir string, want ...string) {
	t.Helper()
	got, err := ListDays(dir, cet)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("got %+v, want %v", got, want)
	}
	for i, f := range got {
		if f.Path != filepath.Join(dir, want[i]) {
			t.Errorf("%d: %s, want %s", i, f.Path, want[i])
		}
	}
}
