package monitor

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"strings"
	"sync"
	"time"

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

// journalDrain bounds how long shutdown waits for the journal to take the
// lines still queued once events.log is closed (journald is local: a stuck
// one is not waited for).
const journalDrain = 2 * time.Second

// queueJournal queues an events.log line for the journal, when it is on,
// for runJournal; one it cannot queue (the queue full, or the forwarder
// stopped) is counted in journal_drops.
func (m *Monitor) queueJournal(line string) {
	if m.cfg.Journal == nil {
		return
	}
	e, ok := toJournal(line)
	if !ok {
		return
	}
	switch closed, full := m.journal.put(e); {
	case closed:
		lose(m.reg, m.log, journalDrops, "an events.log line written after the journal's forwarder stopped", slog.String("line", line))
	case full:
		lose(m.reg, m.log, journalDrops, "an events.log line for the journal", slog.String("line", line))
	}
}

// journalForwarder is the journal's queue and the line its forwarder is
// sending: one a stuck journal call still holds at shutdown is counted
// too (journal_drops), as what is still queued is.
type journalForwarder struct {
	dropQueue[journalEntry]
	sendMu  sync.Mutex // sending and gaveUp; the queue has its own mu
	sending bool       // a line is in a journal call, not counted yet
	gaveUp  bool       // stopJournal stopped waiting: lines are counted, not sent
}

// runJournal sends the queued lines until stop is closed, then what is
// still queued. It runs until events.log is closed (stopJournal), not
// with the listeners: the lines shutdown writes (the fans handed back,
// what the burst limits held) reach the journal too.
func (m *Monitor) runJournal(stop <-chan struct{}) {
	q := &m.journal
	q.serve(stop, func(e journalEntry) {
		q.sendMu.Lock()
		if q.gaveUp {
			q.sendMu.Unlock()
			lose(m.reg, m.log, journalDrops, "an events.log line the journal did not take by shutdown")
			return
		}
		q.sending = true
		q.sendMu.Unlock()
		err := m.cfg.Journal(e.message, e.priority, e.fields)
		q.sendMu.Lock()
		counted := !q.sending // by stopJournal, which gave up on this call
		q.sending = false
		q.sendMu.Unlock()
		if err != nil && !counted {
			lose(m.reg, m.log, journalDrops, "an events.log line the journal refused", slog.String("error", err.Error()))
		}
	})
}

// stopJournal stops runJournal (in wg) once events.log is closed: it sends
// what is queued, waited for at most journalDrain; what it has not taken
// by then, and the line a stuck journal call holds, are counted in
// journal_drops, as is any line written after.
func (m *Monitor) stopJournal(stop chan struct{}, wg *sync.WaitGroup) {
	q := &m.journal
	q.close()
	close(stop)
	if waitBounded(wg, journalDrain) {
		return
	}
	q.sendMu.Lock()
	held := q.sending
	q.sending, q.gaveUp = false, true
	q.sendMu.Unlock()
	if held {
		lose(m.reg, m.log, journalDrops, "an events.log line a stuck journal call held at shutdown")
	}
	q.drain(func(journalEntry) {
		lose(m.reg, m.log, journalDrops, "an events.log line the journal did not take by shutdown")
	})
}
