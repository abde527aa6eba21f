package e2e

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/sink"
)

// TestGPULateAtStartGetsItsFanColumns: the only GPU (2 fans) does not
// answer for its first 3 s, so start-up knows no fans for it and its rows
// have no fan columns, and its board is not known. Once it answers, its rows
// continue in its board's file under a header with its fan columns, and
// carry its fan speeds; each file is one table (readCSV checks every row's
// width).
func TestGPULateAtStartGetsItsFanColumns(t *testing.T) {
	t.Parallel()
	p := start(t, opts{scenario: "gpus 1\nat 0 gpu 0 hang 3s\n", args: []string{"--start-timeout", "1s"}})
	p.waitFor("the GPU to answer", 30*time.Second, func() bool {
		return strings.Contains(p.stderr.String(), "NVML answered again after a hang")
	})
	// Until it answers, its board is unknown: its rows go to a file of an
	// unknown board; then to its board's file, with the fan columns.
	unknown := filepath.Join(p.dir, "gpu0-"+sink.UnknownBoard+"-deep-")
	p.waitFor("rows in its board's file", 15*time.Second, func() bool {
		f := p.csvFile(0)
		return f != "" && !strings.HasPrefix(f, unknown) && rowCount(f) >= 3
	})
	p.stop()
	parts, _ := filepath.Glob(filepath.Join(p.dir, "gpu0-*deep-*.csv"))
	if len(parts) != 2 || !strings.HasPrefix(parts[1], unknown) {
		t.Fatalf("GPU 0's files: %v, want its board's file and the unknown board's", parts)
	}
	before, after := readCSV(t, parts[1]), readCSV(t, parts[0])
	if b, ok := sink.ParseBoardLine(readFile(t, parts[0])); !ok || b.UUID == "" || sink.BoardID(b.UUID) != strings.Split(filepath.Base(parts[0]), "-")[1] {
		t.Errorf("the board's file does not start with the line naming it: %+v", b)
	}
	if _, ok := before.col["fan0_speed_pct"]; ok {
		t.Errorf("the rows before the GPU answered have fan columns: %v", before.header)
	}
	for _, c := range []string{"fan0_speed_pct", "fan0_target_pct", "fan1_speed_pct", "fan1_target_pct"} {
		if _, ok := after.col[c]; !ok {
			t.Fatalf("the rows after the GPU answered lack %s: %v", c, after.header)
		}
	}
	last := after.rows[len(after.rows)-1]
	if after.get(last, "fan0_speed_pct") == "" || after.get(last, "fan1_speed_pct") == "" {
		t.Errorf("the last row has no fan speeds: %v", last)
	}
}
