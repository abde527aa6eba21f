package events

import (
	"strconv"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/reading"
	"github.com/gpu-telemetry/gpu-telemetry/sink"
	"github.com/gpu-telemetry/gpu-telemetry/snapshot"
)

// xidLimit bounds the events.log lines of an application's Xids (the
// catalog's class application: 13, 31, 43, ...; snapshot.StageApplication):
// any user's CUDA program can make its GPU report them as fast as it
// faults, and 400,000 such lines would push every earlier line out of
// events.log. Past LineBurst of one code on one GPU in a LineWindow, an
// Xid is held (r.Held): no line, no incident, nothing in the daemon's log,
// counted in xid_lines_suppressed and summed up in one XID_LINES_SUPPRESSED
// line when the window ends; another source's report of a held Xid is held
// with it. Every other Xid (79, 48, 62, 119, ... and an unknown code) is
// never held, and neither is an application Xid that opens a window. r
// gets, before the Xid's own line, the line that sums up the code's
// previous window when this Xid opens a new one. It reports whether the Xid
// is held.
func (s *Stage) xidLimit(e reading.Event, ev snapshot.Event, dup bool, r *Record) bool {
	if e.Kind != reading.EventXid || ev.Stage != snapshot.StageApplication {
		return false
	}
	kind := strconv.FormatUint(e.Data, 10)
	var held bool
	if dup {
		held = s.xids.Holding(e.GPU, kind, e.Time)
	} else {
		ok, before := s.xids.Allow(e.GPU, kind, e.Time)
		if before > 0 {
			r.Lines = append(r.Lines, xidsSuppressed(e.Time, Held{GPU: e.GPU, Kind: kind, Lines: before}))
		}
		held = !ok
	}
	if held {
		r.Held, r.FirstHeld = "Xid "+kind, s.counts.Add(xidLinesHeld, 1) == 1
	}
	return held
}

// xidsSuppressed is the line that sums up the Xid lines of one code a
// window held on a GPU, written at t.
func xidsSuppressed(t time.Time, h Held) sink.EventLine {
	return sink.EventLine{Time: t, GPU: h.GPU, Type: sink.TypeXidLinesSuppressed,
		Fields: sink.KV("xid", h.Kind, "lines", strconv.Itoa(h.Lines), "window", LineWindow.String())}
}

// kernelLinesSuppressed is the line that sums up the kernel lines of one
// kind a window held on a GPU, written at t.
func kernelLinesSuppressed(t time.Time, h Held) sink.EventLine {
	return sink.EventLine{Time: t, GPU: h.GPU, Source: reading.SourceKmsg.String(), Type: sink.TypeKernelLinesSuppressed,
		Fields: sink.KV("kind", h.Kind, "lines", strconv.Itoa(h.Lines), "window", LineWindow.String())}
}

// WindowsEnded returns the lines that sum up what the burst limits held
// (kernel lines, an application's Xids) in the windows that ended by now,
// stamped now; with all (at stop), in every window, ended or not, so that
// no held line goes uncounted in events.log. The caller calls it on a
// clock of its own (the poll loop's, once a second) and writes the lines:
// a window's count is written when the window closes, not when the next
// line of its kind comes, which may be never. now is a time.Now reading,
// as the lines' receipt times are.
func (s *Stage) WindowsEnded(now time.Time, all bool) []sink.EventLine {
	var out []sink.EventLine
	for _, h := range s.limit.Ended(now, all) {
		out = append(out, kernelLinesSuppressed(now, h))
	}
	for _, h := range s.xids.Ended(now, all) {
		out = append(out, xidsSuppressed(now, h))
	}
	return out
}
