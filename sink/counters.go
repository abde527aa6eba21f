package sink

import "github.com/gpu-telemetry/gpu-telemetry/internal/counters"

// The CSV writer's counters, counted in the registry it is given
// (CSVConfig.Counters), but sync_batches: the sync thread's, for the
// process (asyncSyncBatches), which the registry observes.
var (
	rowsDropped = counters.Declare(counters.Def{Name: "rows_dropped", Loss: true,
		Help: "CSV rows not written (disk paused or full, file error, or after shutdown)"})
	syncErrors = counters.Declare(counters.Def{Name: "sync_errors", Loss: true,
		Help: "failed fsync/fdatasync calls on CSV files, and those (or a file a row write held) still running at stop, abandoned"})
	syncSkips = counters.Declare(counters.Def{Name: "sync_skips", Loss: true,
		Help: "periodic CSV sync rounds skipped because the previous one was still on the disk"})
	rowsWritten = counters.Declare(counters.Def{Name: "rows_written",
		Help: "CSV rows written"})
	syncBatches = counters.Declare(counters.Def{Name: "sync_batches",
		Help: "periodic CSV sync rounds completed"})
)

// A line log's counters, counted in the registry it is given (NewLineLog);
// events.log's and summary.log's are counted in the daemon's one, summed. The lines a log refused
// (Line's error) are counted by its writer, which knows what the line was.
var (
	linesLostAtExit = counters.Declare(counters.Def{Name: "log_lines_lost_at_exit", Loss: true, OwnLog: true,
		Help: "events.log and summary.log lines still waiting for the disk when the logger exited"})
	lineSyncErrors = counters.Declare(counters.Def{Name: "log_sync_errors", Loss: true,
		Help: "failed fsyncs of events.log and summary.log (and of their directory after a new file): their recent lines may not survive a power loss"})
	linesDelayed = counters.Declare(counters.Def{Name: "log_lines_delayed",
		Help: "events.log and summary.log lines kept in memory while the file could not be written (disk full) and written later with their own timestamps"})
)
