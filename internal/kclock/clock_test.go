package kclock

import (
	"testing"
	"time"
)

// TestLoggedAt: a fresh record happened when it was read; one read after the
// fact when the kernel logged it, but never later than it was read; on the
// zero Clock, when it was read.
func TestLoggedAt(t *testing.T) {
	read := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	k := Anchored(read, 24*time.Hour)
	hourAgo := k.At(read.Add(-time.Hour))
	for _, tc := range []struct {
		name    string
		k       Clock
		ktime   time.Duration
		backlog bool
		want    time.Time
	}{
		{"fresh", k, hourAgo, false, read},
		{"backlog: its kernel time", k, hourAgo, true, read.Add(-time.Hour)},
		{"backlog stamped after its read", k, k.At(read.Add(time.Minute)), true, read},
		{"the zero Clock", Clock{}, hourAgo, true, read},
	} {
		if got := tc.k.LoggedAt(read, tc.ktime, tc.backlog); !got.Equal(tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
