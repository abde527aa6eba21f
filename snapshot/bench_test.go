package snapshot

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/internal/counters"
	"github.com/gpu-telemetry/gpu-telemetry/sink"
)

// BenchmarkCrashStage1 measures what stands between a crash and the
// operator's first file: rendering the header and 50 rows, and the atomic
// write (temp file, fsync, link, directory fsync). Its cost is dominated by
// the two fsyncs, so it depends on the disk.
func BenchmarkCrashStage1(b *testing.B) {
	dir := filepath.Join(b.TempDir(), "crashes")
	m := &Manager{files: sink.Atomic{Perm: fileMode}}
	req := testCrashRequest()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		data := renderCrash(&req, Section{}, nil, nil, 10*time.Second)
		if _, err := createNew(m.files, dir, baseName("crash", incidentTime.Add(time.Duration(i)*time.Millisecond), 0), ".log", data); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCrashRender measures rendering stage 1 alone (no disk).
func BenchmarkCrashRender(b *testing.B) {
	req := testCrashRequest()
	b.ReportAllocs()
	for b.Loop() {
		_ = renderCrash(&req, Section{}, nil, nil, 10*time.Second)
	}
}

// BenchmarkCrashSuppressed measures what a suppressed request costs the
// caller (the poll loop or event goroutine) during an Xid flood.
func BenchmarkCrashSuppressed(b *testing.B) {
	clk := newClock(incidentTime)
	m := New(Config{Dir: b.TempDir(), Runner: cannedRunner(), Now: clk.Now, FollowUps: []time.Duration{},
		HostRoot: fakeHost(b), Counters: counters.New()})
	crash(m, 0, testEvent, testCrashRequest)
	b.ReportAllocs()
	for b.Loop() {
		crash(m, 0, testEvent, testCrashRequest)
	}
	b.StopTimer()
	_ = m.Close(b.Context())
}
