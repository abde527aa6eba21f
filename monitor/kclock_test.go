package monitor

import (
	"bytes"
	"cmp"
	"encoding/csv"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/internal/kclock"
	"github.com/gpu-telemetry/gpu-telemetry/internal/testutil"
	"github.com/gpu-telemetry/gpu-telemetry/sink"
)

// TestDmesgTimeFollowsTheKernelLogClock feeds the kernel log reader (a FIFO,
// delivered at once like /dev/kmsg) records whose timestamps run 37 s behind
// CLOCK_MONOTONIC and lose 300 ppm since boot. Once the first record is in,
// dmesg_time in the rows must follow that clock to within a few ms. Real time:
// the kernel log clock is read from CLOCK_MONOTONIC. A row only has a
// wall-clock time, and the wall clock may run at another rate than
// CLOCK_MONOTONIC (NTP slewing it), so the truth for a row comes from the
// wall/monotonic pair read nearest to it, not from one pair at the start.
func TestDmesgTimeFollowsTheKernelLogClock(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "kmsg")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	r := newRig(t, 1, func(c *Config) { c.KmsgPath = fifo })
	printk := testutil.PrintkClock{Offset: 37 * time.Second, Drift: 300e-6}.At
	mono := func() time.Duration { return testutil.Monotonic(t) }
	type clockPair struct {
		wall time.Time // wall clock only
		mono time.Duration
	}
	var pairs []clockPair
	// Both clocks read at one instant (bracketed): two plain reads can be
	// ms apart on a loaded machine, which would be the test's error.
	pair := func() {
		wall, m := kclock.Pair()
		pairs = append(pairs, clockPair{wall.Round(0), m})
	}
	var firstAt time.Time
	r.run(0, func() {
		w, err := os.OpenFile(fifo, os.O_WRONLY, 0) // waits for the reader
		if err != nil {
			t.Error(err)
			return
		}
		firstAt = time.Now()
		for i := range 60 {
			pair()
			fmt.Fprintf(w, "6,%d,%d,-;test: a kernel line\n", i, printk(mono())/time.Microsecond)
			time.Sleep(50 * time.Millisecond)
		}
		pair()
		w.Close()
	})
	if t.Failed() {
		t.FailNow()
	}

	// Every file of the run: it runs on the real clock, and local midnight
	// may fall in it.
	paths, _ := filepath.Glob(filepath.Join(r.dir, "gpu0-*-deep-*.csv"))
	if len(paths) == 0 {
		t.Fatal("no CSV")
	}
	var recs [][]string
	for i, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		cr := csv.NewReader(bytes.NewReader(b))
		cr.Comment = '#' // the board line
		day, err := cr.ReadAll()
		if err != nil {
			t.Fatal(err)
		}
		if i > 0 {
			day = day[1:] // the same header
		}
		recs = append(recs, day...)
	}
	tsCol, dmCol := slices.Index(recs[0], "timestamp"), slices.Index(recs[0], "dmesg_time")
	checked := 0
	for _, rec := range recs[1:] {
		wall, err := time.Parse(sink.TimestampLayout, rec[tsCol])
		if err != nil {
			t.Fatal(err)
		}
		if wall.Before(firstAt.Add(200 * time.Millisecond)) {
			continue // before the first records arrived
		}
		sec, err := strconv.ParseFloat(rec[dmCol], 64)
		if err != nil {
			t.Fatalf("dmesg_time %q: %v", rec[dmCol], err)
		}
		// The timestamp has ms, so the truth is known to 1 ms. Pairs are
		// 50 ms apart: even at 5000 ppm between the clocks, going from the
		// nearest one adds at most 0.125 ms.
		near := slices.MinFunc(pairs, func(a, b clockPair) int {
			return cmp.Compare((wall.Sub(a.wall)).Abs(), (wall.Sub(b.wall)).Abs())
		})
		truth := printk(near.mono + wall.Sub(near.wall))
		if d := time.Duration(sec*1e9) - truth; d < -3*time.Millisecond || d > 3*time.Millisecond {
			t.Errorf("row at %s: dmesg_time %s is %v off the kernel log's clock", rec[tsCol], rec[dmCol], d)
		}
		checked++
	}
	if checked < 20 {
		t.Errorf("only %d rows checked", checked)
	}
	if si, _ := os.ReadFile(filepath.Join(r.dir, "system-info.txt")); !strings.Contains(string(si), "dmesg_time: printk clock = CLOCK_MONOTONIC - ") {
		t.Errorf("system-info.txt lacks the estimate:\n%s", si)
	}
}
