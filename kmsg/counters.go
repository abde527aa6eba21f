package kmsg

import "github.com/gpu-telemetry/gpu-telemetry/internal/counters"

// The reader's counters, counted in the registry it is given
// (Options.Counters).
var (
	malformedRecords = counters.Declare(counters.Def{Name: "kmsg_malformed", Loss: true,
		Help: "kernel log records that could not be parsed"})
	ringOverruns = counters.Declare(counters.Def{Name: "kmsg_overruns", Loss: true,
		Help: "times the kernel log ring overwrote records before they were read"})
	recordsLost = counters.Declare(counters.Def{Name: "kmsg_records_lost", Loss: true, OwnLog: true,
		Help: "/dev/kmsg records the kernel overwrote before they were read (the gaps in their sequence numbers): after an overrun, or, at a restart in the same boot, logged while no logger was reading and overwritten before the replay reached them (the reader logs each replay's and the first other)"})
	readReopens = counters.Declare(counters.Def{Name: "kmsg_reopens", Loss: true, OwnLog: true,
		Help: "kernel log read errors after which the log was opened again, with back-off from 1 s to 1 min (the reader logs the first; /dev/kmsg resumes after the last record read, the records lost meanwhile are in kmsg_records_lost)"})
	fileRestarts = counters.Declare(counters.Def{Name: "kmsg_file_restarts",
		Help: "times a --kmsg file was replaced (the new one read from its start) or truncated (read again from its start); each is logged"})
)
