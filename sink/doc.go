// Package sink owns the files gpu-telemetry writes: the per-GPU daily CSVs
// (rotation at local midnight, retention, background compression, fsync
// cadence, disk guard, repair of torn lines), events.log and summary.log
// (size-rotated through lumberjack; events.log's line format and which of
// its types tell of an incident) and system-info.txt. It knows files and
// readings, not NVML.
package sink
