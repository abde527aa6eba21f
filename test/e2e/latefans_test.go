package e2e

import (
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestGPULateAtStartGetsItsFanColumns: the only GPU (2 fans) does not
// answer for its first 3 s, so start-up knows no fans for it and its rows
// have no fan columns. Once it answers, its rows continue in a new part of
// the day under a header with its fan columns, and carry its fan speeds;
// each file is one table (readCSV checks every row's width).
func TestGPULateAtStartGetsItsFanColumns(t *testing.T) {
	t.Parallel()
	p := start(t, opts{scenario: "gpus 1\nat 0 gpu 0 hang 3s\n", args: []string{"--start-timeout", "1s"}})
	p.waitFor("the GPU to answer", 30*time.Second, func() bool {
		return strings.Contains(p.stderr.String(), "NVML answered again after a hang")
	})
	p.waitFor("rows in a new part of the day", 15*time.Second, func() bool {
		return strings.HasSuffix(p.csvFile(0), "_2.csv") && rowCount(p.csvFile(0)) >= 3
	})
	p.stop()
	parts, _ := filepath.Glob(filepath.Join(p.dir, "gpu0-deep-*.csv"))
	if len(parts) != 2 {
		t.Fatalf("GPU 0's files: %v, want the day's first part and its second", parts)
	}
	before, after := readCSV(t, parts[0]), readCSV(t, parts[1])
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
