package monitor

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"strings"

	"github.com/gpu-telemetry/gpu-telemetry/sink"
)

// JournalFunc sends one entry to the systemd journal (go-systemd's
// journal.Send): a message, a syslog priority and structured fields.
type JournalFunc func(message string, priority int, fields map[string]string) error

// journalQueue is how many events.log lines may wait for the journal; more
// are dropped (journal_drops), never waited for: the journal's socket can
// block, and events.log lines are written from the poll loop's paths.
const journalQueue = 256

// journalEntry is one events.log line on its way to the journal.
type journalEntry struct {
	message  string
	priority int
	fields   map[string]string
}

// journalFields are the events.log keys with journal names of their own;
// any other becomes GPU_TELEMETRY_<KEY>.
var journalFields = map[string]string{
	"host": "GPU_TELEMETRY_HOST", "gpu": "GPU_INDEX", "uuid": "GPU_UUID", "bus": "GPU_BUS_ID",
	"type": "GPU_EVENT", "xid": "XID", "name": "XID_NAME", "level": "GPU_EVENT_LEVEL", "job": "GPU_JOB",
}

// journalPriority is each level= as a syslog priority; any other is info (6).
var journalPriority = map[string]int{"critical": 2, "warning": 4, "info": 6}

// MessageID is the journal's MESSAGE_ID of an events.log line type: 128
// bits of SHA-256 of "gpu-telemetry events.log " + type, so each type has
// one id, the same on every host and release (journalctl MESSAGE_ID=...).
func MessageID(typ string) string {
	sum := sha256.Sum256([]byte("gpu-telemetry events.log " + typ))
	return hex.EncodeToString(sum[:16])
}

// toJournal turns an events.log line into a journal entry: MESSAGE is the
// line without its timestamp (the journal stamps it), each key=value a field.
func toJournal(line string) (journalEntry, bool) {
	e, ok := sink.ParseEventLine(line)
	if !ok {
		return journalEntry{}, false
	}
	_, msg, _ := strings.Cut(line, " ")
	f := map[string]string{"SYSLOG_IDENTIFIER": "gpu-telemetry", "MESSAGE_ID": MessageID(e.Type())}
	for k, v := range e.KV {
		f[cmp.Or(journalFields[k], "GPU_TELEMETRY_"+journalName(k))] = v
	}
	return journalEntry{message: msg, priority: cmp.Or(journalPriority[e.KV["level"]], 6), fields: f}, true
}

// journalName makes an events.log key a journal field name.
func journalName(k string) string {
	b := []byte(strings.ToUpper(k))
	for i, c := range b {
		if !('A' <= c && c <= 'Z' || '0' <= c && c <= '9') {
			b[i] = '_'
		}
	}
	return string(b)
}

// queueJournal queues an events.log line for the journal, when it is on,
// for runJournal.
func (m *Monitor) queueJournal(line string) {
	if m.cfg.Journal == nil {
		return
	}
	e, ok := toJournal(line)
	if !ok {
		return
	}
	select {
	case m.journal <- e:
	default:
		lose(m.reg, m.log, journalDrops, "an events.log line for the journal", slog.String("line", line))
	}
}

// runJournal sends the queued lines until ctx ends, then what is still
// queued (journald is local; if it is stuck, shutdown's deadline applies).
func (m *Monitor) runJournal(ctx context.Context) {
	serve(ctx.Done(), m.journal, func(e journalEntry) {
		if err := m.cfg.Journal(e.message, e.priority, e.fields); err != nil {
			lose(m.reg, m.log, journalDrops, "an events.log line the journal refused", slog.String("error", err.Error()))
		}
	})
}
