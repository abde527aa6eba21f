package kclock

import (
	"testing"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/internal/testutil"
)

// TestPairIsBracketed: the CLOCK_MONOTONIC reading Pair returns
// was taken between two reads around the call, and the wall reading is
// within the call too (not a zero or stale value).
func TestPairIsBracketed(t *testing.T) {
	for range 100 {
		wallBefore := time.Now()
		before := testutil.Monotonic(t)
		now, mono := Pair()
		after := testutil.Monotonic(t)
		wallAfter := time.Now()
		if mono < before || mono > after {
			t.Fatalf("CLOCK_MONOTONIC %v outside the call's [%v, %v]", mono, before, after)
		}
		if now.Before(wallBefore) || now.After(wallAfter) {
			t.Fatalf("time %v outside the call's [%v, %v]", now, wallBefore, wallAfter)
		}
	}
}
