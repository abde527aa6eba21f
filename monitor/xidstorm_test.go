package monitor

import (
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/internal/events"
	"github.com/gpu-telemetry/gpu-telemetry/kmsg"
	"github.com/gpu-telemetry/gpu-telemetry/live"
	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

// TestXidStormIsThrottled: a storm of an application's Xid (13), as any
// user's CUDA program can cause, writes LineBurst lines and logs LineBurst
// critical events; the rest are counted (xid_lines_suppressed, the live
// view's Xid count, which status and xids_total read) and, once the minute
// ends, summed up in events.log by the poll loop's tick, with no further
// Xid to carry it; a corrected AER flood's count is written the same way.
// A critical Xid (79) in the storm is never held.
func TestXidStormIsThrottled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		hostRoot := t.TempDir()
		fakePCITree(t, hostRoot)
		r := newRig(t, 2, func(c *Config) { c.HostRoot = hostRoot; c.Interval = time.Second })
		const storm = 40
		var ended string
		var doc live.Doc
		r.run(0, func() {
			time.Sleep(500 * time.Millisecond)
			for range storm {
				r.m.onEvent(reading.Event{Time: time.Now(), GPU: 0, Kind: reading.EventXid, Source: reading.SourceNVML, Data: 13})
			}
			for i := range 15 {
				r.m.onKernelLine(kmsg.Record{Time: time.Duration(3201200000+i) * time.Microsecond,
					Message: "pcieport 0000:00:03.1: PCIe Bus Error: severity=Corrected, type=Physical Layer, (Receiver ID)"}, time.Now())
			}
			r.m.onEvent(reading.Event{Time: time.Now(), GPU: 0, Kind: reading.EventXid, Source: reading.SourceNVML, Data: 79})
			time.Sleep(events.LineWindow + 2*time.Second)
			ended = r.eventsLog()
			doc = live.NewDoc(r.m.Board().View())
		})
		if n := strings.Count(ended, "type=Xid xid=13 "); n != 10 {
			t.Errorf("%d Xid 13 lines, want 10 (the burst limit):\n%s", n, ended)
		}
		if n := strings.Count(ended, "type=Xid xid=79 "); n != 1 {
			t.Errorf("%d Xid 79 lines, want 1", n)
		}
		for _, want := range []string{"gpu=0 type=XID_LINES_SUPPRESSED xid=13 lines=30 window=1m0s", "gpu=1 source=kmsg type=KERNEL_LINES_SUPPRESSED kind=AER/corrected lines=5 window=1m0s"} {
			if strings.Count(ended, want) != 1 {
				t.Errorf("events.log a minute after the storm lacks %q:\n%s", want, ended)
			}
		}
		if got := r.counted("xid_lines_suppressed"); got != storm-10 {
			t.Errorf("xid_lines_suppressed = %d, want %d", got, storm-10)
		}
		if got := doc.GPUs[0].Xids["13"]; got != storm {
			t.Errorf("the live view counts %d Xid 13, want every one (%d)", got, storm)
		}
		logs := r.logs.String()
		if n := strings.Count(logs, `msg="critical GPU event"`); n != 11 {
			t.Errorf("%d critical events logged, want 11 (10 Xid 13, the Xid 79)", n)
		}
		if n := strings.Count(logs, "counter=xid_lines_suppressed"); n != 1 {
			t.Errorf("the first held Xid line logged %d times, want once:\n%s", n, logs)
		}
		// Said once: the stop finds nothing more to sum up.
		if n := strings.Count(r.eventsLog(), "type=XID_LINES_SUPPRESSED"); n != 1 {
			t.Errorf("%d XID_LINES_SUPPRESSED lines after the stop, want 1", n)
		}
	})
}
