package report

import (
	"io"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/sink"
)

// EventLine is one events.log line, taken apart, as the report reads it:
// its GPU and type (sink.ParsedLine) with an unclean stop placed at its
// last row.
type EventLine struct {
	Time time.Time
	GPU  int               // -1 when the line names no monitored GPU
	Type string            // Xid, GPU_LOST, TDP_CHANGE, NVML_HUNG, AER, ...
	KV   map[string]string // every key=value, quotes undone
}

// parseEventLine parses an events.log line (sink.ParseEventLine: logfmt
// with time=, or an older version's line with a bare timestamp first).
func parseEventLine(line string) (EventLine, bool) {
	l, ok := sink.ParseEventLine(line)
	if !ok {
		return EventLine{}, false
	}
	e := EventLine{Time: l.Time, GPU: -1, Type: l.Type(), KV: l.KV}
	if g, err := strconv.Atoi(e.KV["gpu"]); err == nil && g >= 0 {
		e.GPU = g
	}
	// An unclean stop is written at the next start; what it reports
	// happened when the rows stopped.
	if e.Type == sink.TypeUncleanStop {
		if t, err := parseTime(e.KV["last_row"]); err == nil {
			e.Time = t
		}
	}
	return e, true
}

// readEvents reads the events logs in order and returns the events between
// from and to (all when from is zero), the number of lines that did not
// parse and of those over sink.MaxLine (skipped unread). A log it cannot
// open is an error (unreadable): the events it holds would be missing from
// the report without a word.
func readEvents(open opener, paths []string, from, to time.Time) (evs []EventLine, bad, long int, err error) {
	for _, p := range paths {
		f, err := open(p)
		if err != nil {
			return evs, bad, long, unreadable(filepath.Base(p), p, err)
		}
		br := sink.NewLineReader(f)
		for {
			b, err := sink.ReadLine(br, &long)
			if line := strings.TrimRight(string(b), "\r\n"); line != "" {
				if e, ok := parseEventLine(line); !ok {
					bad++
				} else if from.IsZero() || !(e.Time.Before(from) || e.Time.After(to)) {
					evs = append(evs, e)
				}
			}
			if err != nil {
				if err != io.EOF {
					bad++ // the rest of the file could not be read
				}
				break
			}
		}
		f.Close()
	}
	return evs, bad, long, nil
}

// critical reports whether an event starts an incident: what makes the
// logger take a crash snapshot.
func (e EventLine) critical() bool {
	return sink.ParsedLine{Time: e.Time, KV: e.KV}.Class() == sink.EventIncident
}

// describe is a one-line account of the event for the timeline.
func (e EventLine) describe() string {
	kv := e.KV
	switch e.Type {
	case sink.TypeXid:
		s := "Xid " + kv["xid"] + ": " + kv["name"]
		if kv["source"] != "" {
			s += " (" + kv["source"] + ")"
		}
		if kv["duplicate_of"] != "" {
			s += ", also reported by " + kv["duplicate_of"]
		}
		return s
	case sink.TypeRecoveryAction:
		return "recovery action " + kv["action"] + ": " + kv["meaning"]
	case sink.TypeInventory:
		board := "board " + kv["uuid"] + " (serial " + kv["serial"] + ")"
		switch kv["change"] {
		case sink.InventoryMissing:
			return board + " missing since the previous run (it was GPU " + kv["prev_gpu"] + ", bus " + kv["prev_bus"] + ")"
		case sink.InventoryMoved:
			return board + " is GPU " + kv["gpu"] + " now (it was GPU " + kv["prev_gpu"] + ", bus " + kv["prev_bus"] + ")"
		case sink.InventoryIdentified:
			return board + " identified: GPU " + kv["gpu"] + ", stuck at start, answered (the previous run had it as GPU " + kv["prev_gpu"] + ", bus " + kv["prev_bus"] + ")"
		}
		return board + " new since the previous run"
	case sink.TypeTDPChange:
		return "TDP " + kv["from"] + " -> " + kv["to"] + " (" + kv["delta"] + ")"
	case sink.TypeGPULost:
		return "GPU lost (" + kv["source"] + ")"
	case sink.TypeNVMLHung:
		return "NVML call hung: " + kv["function"]
	case sink.TypeNVMLRecovered:
		if kv["stall_ms"] != "" {
			return "NVML answers again after a " + kv["stall_ms"] + " ms stall"
		}
		return "NVML answers again after " + kv["failures"] + " failures"
	case sink.TypeNVMLFailed:
		return "NVML failing: " + kv["error"]
	case sink.TypeAER:
		return "PCIe AER " + kv["severity"] + ": " + kv["text"]
	case sink.TypeHealth:
		s := "health " + kv["counter"]
		if kv["link"] != "" {
			s += " link " + kv["link"]
		}
		s += " " + kv["from"] + " -> " + kv["to"]
		if kv["delta"] != "" {
			s += " (" + kv["delta"] + ")"
		}
		if kv["action"] != "" {
			s += " " + kv["action"]
		}
		return s
	case sink.TypeHealthWarning, sink.TypeHealthCritical:
		level := "warning"
		if e.Type == sink.TypeHealthCritical {
			level = "CRITICAL"
		}
		return "health " + level + " " + kv["reason"] + ": " + kv["detail"]
	case sink.TypeHealthEvent:
		return "NVML health event " + kv["event"] + " (" + kv["severity"] + ")"
	case sink.TypeOpEvent:
		s := "GPU operational event " + kv["severity"] + " (category " + kv["category"] + ", " + kv["module"] + " code " + kv["module_event_code"] + ", attributes " + kv["attributes"] + ")"
		if kv["critical"] != "" {
			s += " CRITICAL: " + kv["critical"]
		}
		return s
	case sink.TypeHealthBaseline:
		return "health counters first read (the baseline every later HEALTH line starts from)"
	case sink.TypeGPUMissing:
		return "GPU missing at start: " + kv["detail"]
	case sink.TypeUncleanStop:
		s := "last row before the logger stopped without a clean exit ("
		if kv["same_boot"] == "true" {
			s += "killed; same boot"
		} else {
			s += "host went down; boot " + kv["prev_boot"] + " -> " + kv["boot"]
		}
		return s + "; " + kv["file"] + ")"
	}
	if t := kv["text"]; t != "" {
		return e.Type + ": " + t
	}
	return e.Type
}
