package e2e

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/live"
)

// TestStatusHistoryAndEvents: `status --json --history 1m --events 20`
// against the daemon on simulated GPUs gives each GPU a minute of its
// readings, one a second, that agree with the CSV rows of the same seconds
// (the last row of each second), null before the daemon's first sample;
// and the host's last events.log lines, newest first, as events.log has
// them. A bad value is one line and the "unknown" exit status.
func TestStatusHistoryAndEvents(t *testing.T) {
	t.Parallel()
	p := start(t, opts{kmsg: true})
	sock := p.socketPath()
	p.waitForRows(0, 40, 20*time.Second)
	for _, x := range []string{"13", "31", "43"} { // to the simulated kernel log
		p.writeKmsg("4," + x + "00,100" + x + "000,-;NVRM: Xid (PCI:0000:21:00): " + x + ", pid=" + x + ", name=job" + x + ", test Xid")
	}
	p.waitForEvent("the Xids' lines", 15*time.Second, "xid=13", "xid=31", "xid=43")
	code, out := status(t, "--socket", sock, "--json", "--history", "1m", "--events", "20")
	var d live.Doc
	if err := json.Unmarshal([]byte(out), &d); err != nil {
		t.Fatalf("status (exit %d): %v\n%s", code, err, out)
	}
	ev := events(p.dir)
	tb := readCSV(t, p.csvFile(0))
	if len(d.GPUs) == 0 {
		t.Fatalf("no GPUs: %s", out)
	}
	for _, g := range d.GPUs {
		h := g.History
		if h == nil || h.StepS != 1 || len(h.Series) < 12 {
			t.Fatalf("GPU %d: history %+v", g.Index, h)
		}
		for _, s := range h.Series {
			if len(s.Values) != 60 {
				t.Errorf("GPU %d %s: %d values for a minute", g.Index, s.Key, len(s.Values))
			}
		}
		temps := h.Values("temperature_c")
		if temps[0] != nil {
			t.Errorf("GPU %d: a temperature 60 s back, before the daemon started", g.Index)
		}
		if temps[58] == nil && temps[59] == nil {
			t.Errorf("GPU %d: no temperature in the last two seconds", g.Index)
		}
	}
	// GPU 0's temperatures are the CSV's: the last row of each second
	// before the history's end.
	last := map[int64]string{}
	for _, r := range tb.rows {
		if r[tb.col["gpu_temp"]] != "" {
			last[parseTime(t, r[0]).Unix()] = r[tb.col["gpu_temp"]]
		}
	}
	h := d.GPUs[0].History
	end, temps, compared := h.End.Unix(), h.Values("temperature_c"), 0
	for j, v := range temps[:59] {
		sec := end - int64(59-j)
		want, ok := last[sec]
		switch {
		case v == nil && ok:
			t.Errorf("second %d: null in the history, %s in the CSV", sec, want)
		case v != nil && !ok:
			t.Errorf("second %d: %v in the history, no row in the CSV", sec, *v)
		case v != nil && strconv.FormatFloat(*v, 'f', -1, 64) != want:
			t.Errorf("second %d: %v in the history, %s in the CSV", sec, *v, want)
		case v != nil:
			compared++
		}
	}
	if compared < 3 {
		t.Errorf("only %d seconds compared with the CSV", compared)
	}
	// The events: events.log's lines, newest first; events.log may have
	// more since (the stop).
	lines := strings.Split(strings.TrimSpace(ev), "\n")
	if len(d.Events) == 0 || len(d.Events) > 20 || len(d.Events) > len(lines) {
		t.Fatalf("%d events for %d lines in events.log: %q", len(d.Events), len(lines), d.Events)
	}
	got := slices.Clone(d.Events)
	slices.Reverse(got)
	if i := slices.Index(lines, got[0]); i < 0 || !slices.Equal(lines[i:i+len(got)], got) {
		t.Errorf("events %q are not events.log's lines newest first:\n%s", d.Events, ev)
	}
	if len(d.Events) < 4 || len(lines) <= 20 && len(d.Events) != len(lines) {
		t.Errorf("%d events of events.log's %d lines", len(d.Events), len(lines))
	}
	// The plain document has neither.
	if code, plain := status(t, "--socket", sock, "--json"); code != 0 || strings.Contains(plain, `"history"`) || strings.Contains(plain, `"events"`) {
		t.Errorf("plain status (exit %d) carries history or events:\n%s", code, plain)
	}
	if code, out := status(t, "--socket", sock, "--json", "--history", "11m"); code != live.CheckUnknown || !strings.Contains(out, "--history 11m0s: want a duration from 1s to 10m0s") {
		t.Errorf("--history 11m: exit %d\n%s", code, out)
	}
	p.stop()
	t.Logf("%d seconds compared with the CSV, %d events of %d lines", compared, len(d.Events), len(lines))
}
