package sampler

import (
	"testing"
	"time"
)

// TestBatchThreadSwitchesOnARunNotAnOutlier: a GPU moves to its C thread
// only after switchAfter slow batches in a row, and back only after as many
// fast ones: one batch preempted for milliseconds on a busy machine, or one
// quick answer from a slow driver, changes nothing.
func TestBatchThreadSwitchesOnARunNotAnOutlier(t *testing.T) {
	slow, fast, middle := 5*time.Millisecond, 2*time.Microsecond, 100*time.Microsecond
	var th batchThread
	feed := func(d time.Duration, n int) {
		for range n {
			th.on = th.decide(d)
		}
	}
	feed(fast, 20)
	feed(slow, 1)
	feed(fast, 1)
	feed(slow, switchAfter-1)
	if th.on {
		t.Fatal("on the thread before switchAfter slow batches in a row")
	}
	feed(middle, 1) // neither slow nor fast: breaks the run
	feed(slow, switchAfter-1)
	if th.on {
		t.Fatal("a batch between the thresholds did not break the run")
	}
	feed(slow, 1)
	if !th.on {
		t.Fatalf("not on the thread after %d slow batches in a row", switchAfter)
	}
	feed(fast, switchAfter-1)
	feed(slow, 1)
	feed(fast, switchAfter-1)
	if !th.on {
		t.Fatal("back to the direct call before switchAfter fast batches in a row")
	}
	feed(middle, switchAfter)
	if !th.on {
		t.Fatal("batches between the thresholds moved it back")
	}
	feed(fast, switchAfter)
	if th.on {
		t.Fatalf("still on the thread after %d fast batches", switchAfter)
	}
}
