package sink

import "github.com/gpu-telemetry/gpu-telemetry/internal/counters"

// CSVCounters are the CSV writer's counters (RegisterCounters).
var CSVCounters = []counters.Field[Stats]{
	{Def: counters.Declare(counters.Def{Name: "rows_dropped", Loss: true,
		Help: "CSV rows not written (disk paused or full, file error, or after shutdown)"}),
		Get: func(s Stats) uint64 { return s.Dropped }},
	{Def: counters.Declare(counters.Def{Name: "sync_errors", Loss: true,
		Help: "failed fsync/fdatasync calls on CSV files"}),
		Get: func(s Stats) uint64 { return s.SyncErrors }},
	{Def: counters.Declare(counters.Def{Name: "sync_skips", Loss: true,
		Help: "periodic CSV sync rounds skipped because the previous one was still on the disk"}),
		Get: func(s Stats) uint64 { return s.SyncSkips }},
	{Def: counters.Declare(counters.Def{Name: "rows_written",
		Help: "CSV rows written"}),
		Get: func(s Stats) uint64 { return s.Written }},
	{Def: counters.Declare(counters.Def{Name: "sync_batches",
		Help: "periodic CSV sync rounds completed"}),
		Get: func(s Stats) uint64 { return s.SyncBatches }},
}

// RegisterCounters makes the writer's counters (CSVCounters) part of r.
func (c *CSV) RegisterCounters(r *counters.Registry) { counters.Observe(r, c.Stats, CSVCounters...) }

// LineLogCounters are a line log's counters; events.log's and summary.log's
// show summed. The lines a log refused (Overflowed) are counted by its
// writer, which knows what the line was.
var LineLogCounters = []counters.Field[LineLogStats]{
	{Def: counters.Declare(counters.Def{Name: "log_lines_lost_at_exit", Loss: true, OwnLog: true,
		Help: "events.log and summary.log lines still waiting for the disk when the logger exited"}),
		Get: func(s LineLogStats) uint64 { return s.LostAtClose }},
	{Def: counters.Declare(counters.Def{Name: "log_lines_delayed",
		Help: "events.log and summary.log lines kept in memory while the file could not be written (disk full) and written later with their own timestamps"}),
		Get: func(s LineLogStats) uint64 { return s.Delayed }},
}
