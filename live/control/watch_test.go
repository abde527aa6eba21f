package control

import (
	"bufio"
	"context"
	"encoding/json"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/live"
)

// steppedTick is a watch clock the test steps: every watcher shares its
// channel, so one send wakes one watcher.
func steppedTick() (chan time.Time, func() (<-chan time.Time, func())) {
	ch := make(chan time.Time)
	return ch, func() (<-chan time.Time, func()) { return ch, func() {} }
}

// waitUntil polls cond for up to 5 s.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}

// TestParseWatch: a watch request takes the status request's options,
// parsed by the one parser (ParseRequest).
func TestParseWatch(t *testing.T) {
	for _, tc := range []struct {
		name, line string
		isWatch    bool
		want       Options
		err        string
	}{
		{"status is not watch", "status", false, Options{}, ""},
		{"watcher is not watch", "watcher", false, Options{}, "unknown request"},
		{"plain", "watch", true, Options{}, ""},
		{"newline and blanks", "  watch \r\n", true, Options{}, ""},
		{"history", "watch history=10m0s", true, Options{History: 10 * time.Minute}, ""},
		{"both", "watch events=200 history=90s", true, Options{History: 90 * time.Second, Events: 200}, ""},
		{"unknown option", "watch color=yes", true, Options{}, "unknown option"},
		{"bare word", "watch now", true, Options{}, "unknown option"},
		{"twice", "watch events=1 events=2", true, Options{}, "given twice"},
		{"bad duration", "watch history=soon", true, Options{}, "want a duration"},
		{"negative duration", "watch history=-1s", true, Options{}, "want a duration"},
		{"beyond the ring", "watch history=11m", true, Options{}, "at most 10m0s"},
		{"zero events", "watch events=0", true, Options{}, "from 1 to"},
		{"not UTF-8", "watch \xff", true, Options{}, "not UTF-8"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, o, err := ParseRequest([]byte(tc.line))
			isWatch := r == ReqWatch
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Errorf("ParseRequest(%q) = %v, %+v, %v; want an error with %q", tc.line, r, o, err, tc.err)
				}
				return
			}
			if err != nil || isWatch != tc.isWatch || o != tc.want {
				t.Errorf("ParseRequest(%q) = %v, %+v, %v; want watch %v with %+v", tc.line, r, o, err, tc.isWatch, tc.want)
			}
		})
	}
	// WatchLine is read back as what it was made of.
	for _, o := range []Options{{}, {History: 10 * time.Minute}, {Events: 200}, {History: time.Second, Events: 1}} {
		if r, got, err := ParseRequest([]byte(o.WatchLine())); r != ReqWatch || got != o || err != nil {
			t.Errorf("%q read back as %v %+v, %v", o.WatchLine(), r, got, err)
		}
	}
	if l := (Options{History: 10 * time.Minute, Events: 200}).WatchLine(); l != "watch history=10m0s events=200" {
		t.Errorf("WatchLine %q", l)
	}
}

// TestWatchStreamsUntilTheClientLeaves: a watcher gets the document at
// once and again at each tick of the server's watch clock, each a status
// document on one line; leaving frees its place (another MaxWatchers can
// stream), and it counts as one request answered.
func TestWatchStreamsUntilTheClientLeaves(t *testing.T) {
	tick, clock := steppedTick()
	s, stop := serve(t, Config{watchTick: clock})
	defer stop()
	ctx, cancel := context.WithCancel(context.Background())
	docs := make(chan live.Doc)
	done := make(chan error, 1)
	go func() {
		done <- Watch(ctx, s.cfg.Path, Options{}, time.Second, func(line []byte) error {
			var d live.Doc
			if err := json.Unmarshal(line, &d); err != nil {
				t.Errorf("line %q: %v", line, err)
			}
			docs <- d
			return nil
		})
	}()
	for i := range 3 {
		if i > 0 {
			tick <- time.Now()
		}
		select {
		case d := <-docs:
			if d.SchemaVersion != live.SchemaVersion || len(d.GPUs) != 1 {
				t.Fatalf("document %d: %+v", i, d)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("no document %d", i)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Watch after its context ended: %v", err)
	}
	waitUntil(t, "the watcher's place to be freed", func() bool { return len(s.watchers) == 0 })
	if served, failed := s.counts.Load(requestsServed), s.counts.Load(requestsFailed); served != 1 || failed != 0 {
		t.Errorf("served %d failed %d, want 1 and 0", served, failed)
	}
}

// dialWatch opens a watch by hand and reads its first line.
func dialWatch(t *testing.T, path string) (net.Conn, string) {
	t.Helper()
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte("watch\n")); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReaderSize(c, 1<<20).ReadString('\n')
	if err != nil {
		t.Fatalf("first line: %v", err)
	}
	return c, line
}

// TestWatchersAreLimited: MaxWatchers stream at once; another watch is
// answered busy (and counted), status is still answered, and a place left
// is taken again.
func TestWatchersAreLimited(t *testing.T) {
	_, clock := steppedTick()
	s, stop := serve(t, Config{watchTick: clock})
	defer stop()
	var conns []net.Conn
	for range MaxWatchers {
		c, line := dialWatch(t, s.cfg.Path)
		if !strings.HasPrefix(line, `{"schema_version":`) {
			t.Fatalf("watch answered %q", line)
		}
		conns = append(conns, c)
	}
	err := Watch(context.Background(), s.cfg.Path, Options{}, time.Second, func([]byte) error { return nil })
	if err == nil || !strings.Contains(err.Error(), "busy") {
		t.Errorf("a watch over the limit: %v", err)
	}
	if _, _, err := Query(s.cfg.Path, time.Second); err != nil {
		t.Errorf("status while the watchers stream: %v", err)
	}
	if failed := s.counts.Load(requestsFailed); failed != 1 {
		t.Errorf("failed %d, want 1", failed)
	}
	conns[0].Close()
	waitUntil(t, "a watcher's place to be freed", func() bool { return len(s.watchers) < MaxWatchers })
	if _, line := dialWatch(t, s.cfg.Path); !strings.HasPrefix(line, `{"schema_version":`) {
		t.Errorf("watch in the freed place answered %q", line)
	}
}

// TestSlowWatcherIsDropped: a watcher that reads nothing is sent lines
// until its socket is full; the write that does not go through within
// WriteTimeout ends it, counted as failed.
func TestSlowWatcherIsDropped(t *testing.T) {
	if testing.Short() {
		t.Skip("waits WriteTimeout")
	}
	tick, clock := steppedTick()
	s, stop := serve(t, Config{watchTick: clock})
	defer stop()
	c, _ := dialWatch(t, s.cfg.Path)
	defer c.Close()
	for end := time.Now().Add(30 * time.Second); s.counts.Load(requestsFailed) == 0; {
		if time.Now().After(end) {
			t.Fatal("a watcher that reads nothing was never dropped")
		}
		select {
		case tick <- time.Now():
		case <-time.After(10 * time.Millisecond):
		}
	}
	waitUntil(t, "the slow watcher's place to be freed", func() bool { return len(s.watchers) == 0 })
}

// TestWatchRefusals: bad options are answered with an error; each counts
// as failed.
func TestWatchRefusals(t *testing.T) {
	s, stop := serve(t, Config{})
	defer stop()
	for _, tc := range []struct{ line, want string }{
		{"watch color=yes", "unknown option"},
		{"watch history=1h", "at most 10m0s"},
	} {
		b, err := Ask(s.cfg.Path, tc.line, time.Second)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %s %v, want an error with %q", tc.line, b, err, tc.want)
		}
	}
	if failed := s.counts.Load(requestsFailed); failed != 2 {
		t.Errorf("failed %d, want 2", failed)
	}
}

// TestStopEndsWatchers: a daemon stopping ends its watchers at once, and
// Watch says the stream was closed.
func TestStopEndsWatchers(t *testing.T) {
	_, clock := steppedTick()
	s, stop := serve(t, Config{watchTick: clock})
	got := make(chan struct{}, 1)
	done := make(chan error, 1)
	go func() {
		done <- Watch(context.Background(), s.cfg.Path, Options{}, time.Second, func([]byte) error {
			select {
			case got <- struct{}{}:
			default:
			}
			return nil
		})
	}()
	<-got
	start := time.Now()
	stop()
	if d := time.Since(start); d > ReadTimeout {
		t.Errorf("stopping took %v with a watcher streaming", d)
	}
	if err := <-done; err == nil || !strings.Contains(err.Error(), "closed the watch") {
		t.Errorf("Watch after the daemon stopped: %v", err)
	}
}

// FuzzParseWatch: any line is read without panicking; a watch it takes is
// read back the same from its WatchLine.
func FuzzParseWatch(f *testing.F) {
	for _, s := range []string{"watch", "watch history=10m0s events=200", "watch events=1", "watch history=1h", "watch x", "status"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		r, o, err := ParseRequest([]byte(line))
		if r != ReqWatch || err != nil {
			return
		}
		if back, bo, err := ParseRequest([]byte(o.WatchLine())); back != ReqWatch || bo != o || err != nil {
			t.Errorf("%q: %+v, read back from %q as %+v, %v", line, o, o.WatchLine(), bo, err)
		}
	})
}

// TestWatchWithHistoryAndEvents: a watch with options streams what status
// with them answers: each GPU's history in the first document (the
// client's charts start from it), the host's last events in each.
func TestWatchWithHistoryAndEvents(t *testing.T) {
	s, stop := serve(t, Config{})
	defer stop()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var got []live.Doc
	err := Watch(ctx, s.cfg.Path, Options{History: time.Minute, Events: 1}, time.Second, func(line []byte) error {
		var d live.Doc
		if err := json.Unmarshal(line, &d); err != nil {
			return err
		}
		if got = append(got, d); len(got) == 2 {
			cancel()
		}
		return nil
	})
	if err != nil || len(got) != 2 {
		t.Fatalf("watch: %v, %d documents", err, len(got))
	}
	if h := got[0].GPUs[0].History; h == nil || len(h.Values("temperature_c")) != 60 {
		t.Errorf("first document's history %+v", h)
	}
	if h := got[1].GPUs[0].History; h != nil {
		t.Errorf("second document has a history too: %+v", h)
	}
	for i, d := range got {
		if len(d.Events) != 1 || !strings.Contains(d.Events[0], "type=SECOND") {
			t.Errorf("document %d: events %q", i, d.Events)
		}
	}
}
