package sink

import "github.com/gpu-telemetry/gpu-telemetry/internal/counters"

// The CSV writer's counters, counted in its own registry (CSV.counts), but
// sync_batches: the sync thread's, for the process (asyncSyncBatches).
var (
	rowsDropped = counters.Declare(counters.Def{Name: "rows_dropped", Loss: true,
		Help: "CSV rows not written (disk paused or full, file error, or after shutdown)"})
	syncErrors = counters.Declare(counters.Def{Name: "sync_errors", Loss: true,
		Help: "failed fsync/fdatasync calls on CSV files"})
	syncSkips = counters.Declare(counters.Def{Name: "sync_skips", Loss: true,
		Help: "periodic CSV sync rounds skipped because the previous one was still on the disk"})
	rowsWritten = counters.Declare(counters.Def{Name: "rows_written",
		Help: "CSV rows written"})
	syncBatches = counters.Declare(counters.Def{Name: "sync_batches",
		Help: "periodic CSV sync rounds completed"})
)

// RegisterCounters makes r show the writer's counts.
func (c *CSV) RegisterCounters(r *counters.Registry) {
	r.Include(c.counts)
	counters.Observe(r, asyncSyncBatches, counters.Field[uint64]{Def: syncBatches, Get: func(n uint64) uint64 { return n }})
}

// A line log's counters, counted in its own registry (LineLog.counts);
// events.log's and summary.log's show summed. The lines a log refused
// (Line's error) are counted by its writer, which knows what the line was.
var (
	linesLostAtExit = counters.Declare(counters.Def{Name: "log_lines_lost_at_exit", Loss: true, OwnLog: true,
		Help: "events.log and summary.log lines still waiting for the disk when the logger exited"})
	linesDelayed = counters.Declare(counters.Def{Name: "log_lines_delayed",
		Help: "events.log and summary.log lines kept in memory while the file could not be written (disk full) and written later with their own timestamps"})
)

// RegisterCounters makes r show the log's counts.
func (l *LineLog) RegisterCounters(r *counters.Registry) { r.Include(l.counts) }
