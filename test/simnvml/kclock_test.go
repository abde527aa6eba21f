package simnvml_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/gpu-telemetry/gpu-telemetry/internal/testutil"
)

// TestKmsgClock: with kmsg_clock the records' timestamps run behind
// CLOCK_MONOTONIC by the offset and lose the drift per second since boot.
func TestKmsgClock(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "kmsg")
	before := testutil.Monotonic(t)
	if !simulate(t, opts{env: []string{"SIMNVML_KMSG=" + path}, scenario: `
gpus 1
kmsg_clock 37 drift 500
at 0.2 gpu 0 xid 79
at 0.6 gpu 0 xid 79
`}, func(c clock, l nvml.Interface) {
		_ = dev(t, l, 0)
		c.sleepUntil(800 * time.Millisecond)
	}) {
		return
	}
	after := testutil.Monotonic(t)
	printk := testutil.PrintkClock{Offset: 37 * time.Second, Drift: 500e-6}.At
	var ts []time.Duration
	for _, rec := range kmsgRecords(t, path) {
		ts = append(ts, rec.Time)
	}
	if len(ts) != 2 {
		t.Fatalf("%d records, want 2", len(ts))
	}
	for i, v := range ts {
		if v < printk(before)-time.Microsecond || v > printk(after) {
			t.Errorf("record %d at %v: not on the offset clock (between %v and %v)", i, v, printk(before), printk(after))
		}
	}
	// 0.4 s of CLOCK_MONOTONIC is 0.4 s less 500 ppm on the kmsg clock.
	if d := ts[1] - ts[0]; d < 399799*time.Microsecond || d > 399801*time.Microsecond {
		t.Errorf("records 0.4 s apart differ by %v on the kmsg clock, want 399.8 ms", d)
	}
}
