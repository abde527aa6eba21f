package e2e

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/internal/testutil"
	"github.com/gpu-telemetry/gpu-telemetry/sink"
)

// TestIndicesMoveBoardsStayApart is the operator trial's reproduction: 8
// GPUs log into a directory; the next run, into the same directory, finds 7
// whose indices moved down by one (the board at index 0 fell off the bus at
// the reboot). Every file holds one board's rows, named by it; the start
// logs the missing board at warning level and the 7 moved ones; the report
// of GPU 0 across the restart keeps the two boards apart, and --gpu by UUID
// or bus id follows a board across the indices.
func TestIndicesMoveBoardsStayApart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	first := start(t, opts{scenario: "@healthy-8gpu", dir: dir})
	first.waitForRows(7, 20, 30*time.Second)
	first.stop()

	// The boards of the first run, from their files' first lines.
	boards := make([]sink.Board, 8)
	for i := range boards {
		b, ok := sink.ParseBoardLine(readFile(t, first.csvFile(i)))
		if !ok || b.UUID == "" || b.Serial == "" || b.Bus == "" || b.Index != i {
			t.Fatalf("GPU %d's CSV does not start with its board's line: %+v", i, b)
		}
		boards[i] = b
	}
	var scn strings.Builder
	scn.WriteString("gpus 7\ngpu all temp 35\ngpu all noise temp 1\n")
	for i, b := range boards[1:] {
		fmt.Fprintf(&scn, "gpu %d uuid %s\ngpu %d serial %s\ngpu %d busid %s\n", i, b.UUID, i, b.Serial, i, b.Bus)
	}
	second := start(t, opts{scenario: scn.String(), dir: dir})
	// GPU 6's files are the first run's until the second writes its own.
	second.waitFor("20 rows of GPU 6, board "+boards[7].UUID, 30*time.Second, func() bool {
		m, _ := filepath.Glob(filepath.Join(dir, "gpu6-"+boards[7].ID()+"-deep-*.csv"))
		return len(m) == 1 && rowCount(m[0]) >= 20
	})
	second.stop()

	// One board per file: A's only hot rows (the first run), B's at index
	// 0 only cool ones (the second), each file under its board's line.
	files, err := sink.ListDays(dir, time.Local)
	if err != nil {
		t.Fatal(err)
	}
	perBoard := map[string]int{}
	for _, f := range files {
		perBoard[f.Board]++
		tb := readCSV(t, f.Path)
		b, _ := sink.ParseBoardLine(readFile(t, f.Path))
		if b.Index != f.GPU || sink.BoardID(b.UUID) != f.Board {
			t.Errorf("%s names board %+v", filepath.Base(f.Path), b)
		}
		hot := b.UUID == boards[b.Index].UUID // the first run's board at this index
		for _, r := range tb.rows {
			temp, _ := strconv.Atoi(tb.get(r, "gpu_temp"))
			if hot != (temp > 50) {
				t.Errorf("%s (board %s) holds a row of another run's board: %d C", filepath.Base(f.Path), b.UUID, temp)
				break
			}
		}
	}
	for i, b := range boards {
		if want := min(i, 1) + 1; perBoard[b.ID()] != want {
			t.Errorf("board %s (first GPU %d) has %d files, want %d", b.UUID, i, perBoard[b.ID()], want)
		}
	}

	// The inventory: one line per board missing or moved, the missing one
	// at warning level, and the start-up says so.
	evs := events(dir)
	testutil.Contains(t, "events.log", evs,
		"uuid="+boards[0].UUID+" level=warning gpu=? source=start type=INVENTORY change=missing serial="+boards[0].Serial)
	for i, b := range boards[1:] {
		testutil.Contains(t, "events.log", evs, fmt.Sprintf("uuid=%s level=info gpu=%d bus=%s source=start type=INVENTORY change=moved serial=%s", b.UUID, i, b.Bus, b.Serial))
	}
	if n := strings.Count(evs, "type=INVENTORY"); n != 8 {
		t.Errorf("%d INVENTORY lines, want 8", n)
	}
	testutil.Contains(t, "second run's log", second.stderr.String(), `msg="GPU inventory changed since the previous run`, "missing=1 new=0 moved=7")
	if strings.Contains(first.stderr.String(), "GPU inventory changed") {
		t.Errorf("the first run in an empty directory reported an inventory change")
	}

	// The report of GPU 0 across the restart: both boards, apart.
	b0, _ := filepath.Glob(filepath.Join(dir, "gpu0-"+boards[1].ID()+"-deep-*.csv"))
	if len(b0) != 1 {
		t.Fatalf("board %s at GPU 0: files %v", boards[1].UUID, b0)
	}
	restart := parseTime(t, readCSV(t, b0[0]).rows[0][0])
	at := restart.Format(time.RFC3339Nano)
	code, text, stderr := runTool(t, second.operatorEnv(), "report", "--log-dir", dir, "--at", at, "--gpu", "0", "--before", "60s", "--after", "30s")
	if code != 0 {
		t.Fatalf("report --gpu 0: exit %d\n%s%s", code, text, stderr)
	}
	testutil.Contains(t, "report --gpu 0", text,
		"Board:    GPU 0 ("+boards[0].UUID+", serial "+boards[0].Serial+", bus "+boards[0].Bus+")\n",
		"Board:    GPU 0 ("+boards[1].UUID+", serial "+boards[1].Serial+", bus "+boards[1].Bus+")\n",
		"Note:     GPU 0 was 2 boards in this window",
		"first row in the window of board "+boards[1].UUID)

	// By UUID prefix: board A alone; by bus id: board B at both indices.
	code, text, stderr = runTool(t, second.operatorEnv(), "report", "--log-dir", dir, "--at", at, "--gpu", strings.Split(boards[0].UUID, "-")[1], "--before", "60s", "--after", "30s")
	if code != 0 || strings.Contains(text, boards[1].UUID) || !strings.Contains(text, "Board:    GPU 0 ("+boards[0].UUID) {
		t.Errorf("report --gpu <board A's UUID prefix>: exit %d, want board A alone\n%s%s", code, text, stderr)
	}
	code, text, stderr = runTool(t, second.operatorEnv(), "report", "--log-dir", dir, "--at", at, "--gpu", strings.ToLower(strings.Replace(boards[1].Bus, "00000000:", "0000:", 1)), "--before", "60s", "--after", "30s")
	if code != 0 || !strings.Contains(text, "Board:    GPU 1 ("+boards[1].UUID) || !strings.Contains(text, "Board:    GPU 0 ("+boards[1].UUID) || strings.Contains(text, boards[0].UUID) {
		t.Errorf("report --gpu <board B's bus id>: exit %d, want board B at index 1 then 0\n%s%s", code, text, stderr)
	}
	code, _, stderr = runTool(t, second.operatorEnv(), "report", "--log-dir", dir, "--at", at, "--gpu", "GPU-ffffffff")
	if code != 1 || !regexp.MustCompile(`^gpu-telemetry report: --gpu GPU-ffffffff: no board with this UUID or PCI bus id`).MatchString(stderr) {
		t.Errorf("report --gpu <a UUID no file names>: exit %d, %q", code, stderr)
	}
	// run-state keeps this run's boards for the next start.
	if rs := readFile(t, filepath.Join(dir, "run-state")); strings.Count(rs, "\nboard=gpu=") != 7 || !strings.Contains(rs, "uuid="+boards[1].UUID) {
		t.Errorf("run-state does not record the 7 boards:\n%s", rs)
	}
}

// TestInventoryOfAGPUStuckAtStart: the previous run had 2 GPUs; this run's
// GPU 1 does not answer at start, so its board cannot be matched then: the
// previous run's board 1 is said missing with 1 GPU unidentified, and once
// GPU 1 answers, one line says which board it is and where it was. A run
// with --gpu 0 says none of the other boards missing.
func TestInventoryOfAGPUStuckAtStart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	first := start(t, opts{scenario: "gpus 2\n", dir: dir})
	first.waitForRows(1, 5, 20*time.Second)
	first.stop()
	b1, ok := sink.ParseBoardLine(readFile(t, first.csvFile(1)))
	if !ok || b1.UUID == "" {
		t.Fatalf("GPU 1's board: %+v", b1)
	}

	second := start(t, opts{scenario: "gpus 2\nat 0 gpu 1 hang 3s\n", dir: dir, args: []string{"--start-timeout", "1s"}})
	second.waitForEvent("GPU 1 identified once it answers", 30*time.Second, "type=INVENTORY change=identified")
	second.stop()
	evs := events(dir)
	testutil.Contains(t, "events.log", evs,
		"uuid="+b1.UUID+" level=warning gpu=? source=start type=INVENTORY change=missing serial="+b1.Serial,
		"prev_gpu=1 prev_bus="+b1.Bus+" unidentified=1",
		"uuid="+b1.UUID+" level=info gpu=1 bus="+b1.Bus+" source=start type=INVENTORY change=identified serial="+b1.Serial)
	// The stuck GPU is the board: it was never missing, so no critical
	// line and no repair action said so.
	for _, bad := range []string{"type=GPU_MISSING", "the board is not enumerated"} {
		if strings.Contains(evs, bad) {
			t.Errorf("a board stuck at start was raised as missing (%q):\n%s", bad, evs)
		}
	}
	if rs := readFile(t, filepath.Join(dir, "run-state")); !strings.Contains(rs, "uuid="+b1.UUID) {
		t.Errorf("run-state lacks the board that answered late:\n%s", rs)
	}

	before := rowCount(second.csvFile(0))
	third := start(t, opts{scenario: "gpus 2\n", dir: dir, args: []string{"--gpu", "0"}})
	third.waitFor("rows of the third run", 20*time.Second, func() bool { return rowCount(third.csvFile(0)) > before+5 })
	third.stop()
	if n := strings.Count(events(dir), "change=missing"); n != 1 {
		t.Errorf("%d missing lines after a run with --gpu 0, want the second run's one alone", n)
	}
	testutil.Contains(t, "third run's log", third.stderr.String(), "boards of the previous run not among the GPUs --gpu selects are not compared", "boards=1")
}
