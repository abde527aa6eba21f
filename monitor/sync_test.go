package monitor

import (
	"testing"
	"time"
)

// TestPollLoopDrivesCSVSyncRounds: the CSV sink has no timer of its own
// (Config.Tick is the poll loop's), so the periodic fdatasync rounds that
// bound what a power loss takes happen only if the poll loop sends them. A
// wiring slip would leave the files unsynced until Close and show nowhere
// else. Real time (the sync thread is outside any synctest bubble); the
// deadline is for giving up, not a measure of speed.
func TestPollLoopDrivesCSVSyncRounds(t *testing.T) {
	r := newRig(t, 1, func(c *Config) { c.CSV.FsyncEvery = 100 * time.Millisecond })
	syncBatches := func() uint64 {
		for _, c := range r.m.counters() {
			if c.Name == "sync_batches" {
				return c.Value
			}
		}
		t.Fatal("no sync_batches counter")
		return 0
	}
	before := syncBatches() // process-wide: no test here runs in parallel
	r.run(0, func() {
		deadline := time.Now().Add(60 * time.Second)
		for syncBatches() < before+2 || r.m.csv.Stats().Written < 3 {
			if time.Now().After(deadline) {
				t.Errorf("sync_batches %d -> %d with %d rows written in 60 s: the poll loop does not drive the CSV sync rounds",
					before, syncBatches(), r.m.csv.Stats().Written)
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	})
}
