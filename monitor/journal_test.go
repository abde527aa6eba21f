package monitor

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/internal/events"
	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

// TestEventsGoToTheJournal: under systemd every events.log line also goes
// to the journal, as structured fields: GPU_UUID, XID, a MESSAGE_ID per
// event type (stable, distinct), the priority from its level, MESSAGE the
// line without its timestamp.
func TestEventsGoToTheJournal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var got []journalEntry
		r := newRig(t, 1, func(c *Config) {
			c.Journal = func(msg string, prio int, f map[string]string) error {
				mu.Lock()
				defer mu.Unlock()
				got = append(got, journalEntry{msg, prio, f})
				return nil
			}
		})
		r.run(time.Second, func() {
			time.Sleep(300 * time.Millisecond)
			r.m.onEvent(reading.Event{Time: time.Now(), GPU: 0, Kind: reading.EventXid, Source: reading.SourceNVML, Data: 79})
			r.m.onEvent(reading.Event{Time: time.Now(), GPU: 0, Kind: reading.EventPState, Source: reading.SourceNVML})
		})
		ev, _ := os.ReadFile(filepath.Join(r.dir, "events.log"))
		mu.Lock()
		defer mu.Unlock()
		var xid, pstate *journalEntry
		for i := range got {
			switch got[i].fields["GPU_EVENT"] {
			case "Xid":
				xid = &got[i]
			case "PState":
				pstate = &got[i]
			}
		}
		if xid == nil || pstate == nil {
			t.Fatalf("journal entries %+v for events.log:\n%s", got, ev)
		}
		want := map[string]string{"XID": "79", "GPU_INDEX": "0", "GPU_UUID": "GPU-a", "GPU_TELEMETRY_HOST": "testhost",
			"GPU_EVENT_LEVEL": "critical", "SYSLOG_IDENTIFIER": "gpu-telemetry", "MESSAGE_ID": MessageID("Xid"),
			"XID_NAME": "GPU has fallen off the bus", "GPU_TELEMETRY_SOURCE": "nvml"}
		for k, v := range want {
			if xid.fields[k] != v {
				t.Errorf("Xid entry %s=%q, want %q", k, xid.fields[k], v)
			}
		}
		if xid.priority != 2 || pstate.priority != 6 {
			t.Errorf("priorities: Xid %d PState %d, want 2 (crit) and 6 (info)", xid.priority, pstate.priority)
		}
		if pstate.fields["MESSAGE_ID"] == xid.fields["MESSAGE_ID"] || len(xid.fields["MESSAGE_ID"]) != 32 {
			t.Errorf("MESSAGE_IDs: Xid %s PState %s, want distinct 128-bit ids", xid.fields["MESSAGE_ID"], pstate.fields["MESSAGE_ID"])
		}
		if !strings.HasPrefix(xid.message, "host=testhost uuid=GPU-a level=critical gpu=0 ") || !strings.Contains(string(ev), xid.message) {
			t.Errorf("MESSAGE %q is not the events.log line without its timestamp:\n%s", xid.message, ev)
		}
		for k := range xid.fields {
			if k != journalName(k) || strings.HasPrefix(k, "_") {
				t.Errorf("field name %q is not a journal field name", k)
			}
		}
	})
}

// TestStuckJournalNeverBlocksEvents: a journal that does not take entries
// (journald stuck) holds up no events.log line; the lines it cannot take
// are counted in journal_drops, and they are in events.log.
func TestStuckJournalNeverBlocksEvents(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		r := newRig(t, 1, func(c *Config) {
			c.Journal = func(string, int, map[string]string) error { <-release; return nil }
		})
		const n = journalQueue + 50
		r.run(time.Second, func() {
			time.Sleep(300 * time.Millisecond)
			for i := 0; i < n; i++ {
				r.m.onEvent(reading.Event{Time: time.Now(), GPU: 0, Kind: reading.EventPState, Source: reading.SourceNVML, Data: uint64(i)})
			}
			time.Sleep(100 * time.Millisecond)
			if d := r.m.reg.Load(journalDrops); d < n-journalQueue-1 { // one is in the stuck send
				t.Errorf("journal_drops %d, want at least %d", d, n-journalQueue-1)
			}
			close(release)
		})
		ev, _ := os.ReadFile(filepath.Join(r.dir, "events.log"))
		if c := strings.Count(string(ev), "type=PState"); c < n {
			t.Errorf("events.log has %d of the %d lines", c, n)
		}
	})
}

// The events.log lines written during shutdown, once the listeners have
// stopped (the stop's XID_LINES_SUPPRESSED sum of what the burst limit
// held, the fans handed back), reach the journal too: its forwarder stops
// once events.log is closed.
func TestShutdownLinesReachTheJournal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var got []string
		r := newRig(t, 1, func(c *Config) {
			c.Journal = func(msg string, _ int, _ map[string]string) error {
				mu.Lock()
				defer mu.Unlock()
				got = append(got, msg)
				return nil
			}
		})
		r.run(time.Second, func() {
			time.Sleep(300 * time.Millisecond)
			for range events.LineBurst + 5 {
				r.m.onEvent(reading.Event{Time: time.Now(), GPU: 0, Kind: reading.EventXid, Source: reading.SourceNVML, Data: 13})
			}
		})
		if !strings.Contains(r.eventsLog(), "type=XID_LINES_SUPPRESSED") {
			t.Fatalf("no XID_LINES_SUPPRESSED line at stop:\n%s", r.eventsLog())
		}
		mu.Lock()
		defer mu.Unlock()
		if !strings.Contains(strings.Join(got, "\n"), "type=XID_LINES_SUPPRESSED") {
			t.Errorf("the stop's XID_LINES_SUPPRESSED line is in events.log, not in the journal (journal_drops %d)", r.counted("journal_drops"))
		}
	})
}

// A journal stuck at shutdown holds it up for journalDrain at most; the
// lines still queued for it then are counted in journal_drops, not left
// in a queue nobody reads.
func TestJournalStuckAtShutdownCountsWhatItDidNotTake(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		r := newRig(t, 1, func(c *Config) {
			c.Journal = func(string, int, map[string]string) error { <-release; return nil }
		})
		const n = 10
		stopping := r.run(time.Second, func() {
			time.Sleep(300 * time.Millisecond)
			for i := range n {
				r.m.onEvent(reading.Event{Time: time.Now(), GPU: 0, Kind: reading.EventPState, Source: reading.SourceNVML, Data: uint64(i)})
			}
		})
		close(release)
		synctest.Wait()
		if d := r.counted("journal_drops"); d < n-1 { // one is in the stuck send
			t.Errorf("journal_drops %d, want at least %d", d, n-1)
		}
		if stopping > 10*time.Second {
			t.Errorf("shutdown took %v with the journal stuck", stopping)
		}
	})
}

// TestJournalLineHeldAtShutdownCounted: the line a stuck journal call
// holds when shutdown stops waiting for it is counted in journal_drops
// with the ones still queued: every events.log line is either in the
// journal by shutdown or counted then (the final summary holds it), once:
// the call that comes back later, taken or refused, adds nothing. Before,
// the held line was not counted by shutdown, and never when the call came
// back without an error.
func TestJournalLineHeldAtShutdownCounted(t *testing.T) {
	for _, back := range []error{nil, errors.New("journal gone")} {
		t.Run(fmt.Sprintf("comes back with %v", back), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				release := make(chan struct{})
				r := newRig(t, 1, func(c *Config) {
					c.Journal = func(string, int, map[string]string) error { <-release; return back }
				})
				r.run(time.Second, func() {
					time.Sleep(300 * time.Millisecond)
					for i := range 3 {
						r.m.onEvent(reading.Event{Time: time.Now(), GPU: 0, Kind: reading.EventPState, Source: reading.SourceNVML, Data: uint64(i)})
					}
				})
				lines := uint64(strings.Count(r.eventsLog(), "\n"))
				if d := r.counted("journal_drops"); d != lines {
					t.Errorf("journal_drops %d at shutdown, want %d: none of the events.log lines reached the journal:\n%s", d, lines, r.eventsLog())
				}
				close(release) // the stuck call comes back after shutdown counted its line
				synctest.Wait()
				if d := r.counted("journal_drops"); d != lines {
					t.Errorf("journal_drops %d once the stuck call came back, want still %d", d, lines)
				}
			})
		})
	}
}
