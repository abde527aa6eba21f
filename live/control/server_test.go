package control

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/internal/counters"
	"github.com/gpu-telemetry/gpu-telemetry/live"
	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

func testBoard() *live.Board {
	sl := live.NewSlot(reading.GPU{Index: 0, Name: "sim", BusID: "00000000:01:00.0"})
	s := reading.Sample{Time: time.Now(), Values: reading.Values{reading.TempC: reading.Some[uint64](41)}}
	sl.Update(func(g *live.GPU) { g.Observe(&s, 100*time.Millisecond) })
	sl.Record(&s)
	b := live.NewBoard([]*live.Slot{sl}, func() live.Host { return live.Host{Now: time.Now(), Version: "test"} })
	b.Event("2026-12-06T14:00:00.000Z host=h gpu=0 type=FIRST\n")
	b.Event("2026-12-06T14:00:01.000Z host=h gpu=0 type=SECOND")
	return b
}

// serve starts a server on a fresh path and returns it with its stop func.
func serve(t *testing.T, cfg Config) (*Server, func()) {
	t.Helper()
	if cfg.Counters == nil {
		cfg.Counters = counters.New()
	}
	if cfg.Path == "" {
		cfg.Path = filepath.Join(t.TempDir(), "run", "control.sock")
		if err := os.Mkdir(filepath.Dir(cfg.Path), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	s, err := Listen(cfg, testBoard())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.Serve(ctx); close(done) }()
	return s, func() { cancel(); <-done }
}

func TestStatusAnswered(t *testing.T) {
	s, stop := serve(t, Config{})
	defer stop()
	fi, err := os.Stat(s.cfg.Path)
	if err != nil || fi.Mode().Perm() != 0o600 || fi.Mode()&os.ModeSocket == 0 {
		t.Fatalf("socket %v mode %v", err, fi.Mode())
	}
	d, raw, err := Query(s.cfg.Path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.GPUs) != 1 {
		t.Fatalf("document %s", raw)
	}
	temp, ok := d.GPUs[0].Reading("temperature_c").Num()
	if _, power := d.GPUs[0].Reading("power_w").Num(); d.SchemaVersion != live.SchemaVersion || !ok || temp != 41 || power {
		t.Errorf("document %s", raw)
	}
	if !strings.Contains(string(raw), `"power_w":null`) {
		t.Errorf("absent power is not null: %s", raw)
	}
	if b, err := Ask(s.cfg.Path, "ping", time.Second); err != nil || string(b) != `{"ok":true}` {
		t.Errorf("ping: %s %v", b, err)
	}
}

func TestBadRequestsGetAnErrorAndTheServerGoesOn(t *testing.T) {
	s, stop := serve(t, Config{})
	defer stop()
	for _, req := range []string{"", "STATUS", "status please", "\xff\xfe", strings.Repeat("x", MaxRequest+10)} {
		_, err := Ask(s.cfg.Path, req, time.Second)
		if err == nil || !strings.Contains(err.Error(), "answered") {
			t.Errorf("request %q: %v, want an error answer", req, err)
		}
	}
	if _, _, err := Query(s.cfg.Path, time.Second); err != nil {
		t.Errorf("status after bad requests: %v", err)
	}
	if failed := s.counts.Load(requestsFailed); failed != 5 {
		t.Errorf("failed %d, want 5", failed)
	}
}

func TestSilentClientIsDropped(t *testing.T) {
	s, stop := serve(t, Config{})
	defer stop()
	c, err := net.Dial("unix", s.cfg.Path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// Others are answered while it says nothing.
	if _, _, err := Query(s.cfg.Path, time.Second); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(ReadTimeout + 2*time.Second))
	n, err := c.Read(make([]byte, 10))
	if n != 0 || err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("silent client not dropped by the server: %d bytes, %v", n, err)
	}
}

// dialSilent opens n connections that send nothing.
func dialSilent(t *testing.T, path string, n int) []net.Conn {
	t.Helper()
	conns := make([]net.Conn, 0, n)
	for range n {
		c, err := net.Dial("unix", path)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	t.Cleanup(func() {
		for _, c := range conns {
			c.Close()
		}
	})
	return conns
}

// closedByServer returns what the server said to c before closing it
// within wait; closed is false if it did not.
func closedByServer(c net.Conn, wait time.Duration) (said string, closed bool) {
	c.SetReadDeadline(time.Now().Add(wait))
	b, err := io.ReadAll(io.LimitReader(c, 1024))
	return string(b), err == nil || !errors.Is(err, os.ErrDeadlineExceeded)
}

// displacedAnswer is what a silent client closed to make room is told.
const displacedAnswer = `{"error":"busy: closed silent to make room for a new connection"}` + "\n"

// TestSilentClientsDoNotDenyStatus: with every slot held by a client that
// says nothing, or half a request line, a status request is answered at
// once (it was answered "busy" while they stayed, 2 s each, reconnecting
// at will): it takes the place of the oldest, which is told "busy",
// closed and counted as failed. The others stay; none is refused.
func TestSilentClientsDoNotDenyStatus(t *testing.T) {
	for _, said := range []string{"", "stat"} {
		t.Run("said "+strconv.Quote(said), func(t *testing.T) { silentClientsDoNotDenyStatus(t, said) })
	}
}

func silentClientsDoNotDenyStatus(t *testing.T, said string) {
	s, stop := serve(t, Config{})
	defer stop()
	silent := dialSilent(t, s.cfg.Path, MaxConns)
	for _, c := range silent {
		if _, err := c.Write([]byte(said)); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(2 * time.Second)
	for len(s.sem) < MaxConns { // all accepted and waiting for a request
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d silent clients accepted", len(s.sem), MaxConns)
		}
		time.Sleep(5 * time.Millisecond)
	}
	start := time.Now()
	if _, _, err := Query(s.cfg.Path, ReadTimeout/2); err != nil {
		t.Fatalf("status with %d silent clients: %v", MaxConns, err)
	}
	if took := time.Since(start); took > ReadTimeout/2 {
		t.Errorf("status took %v with the slots held", took)
	}
	if said, closed := closedByServer(silent[0], time.Second); !closed || said != displacedAnswer {
		t.Errorf("the client silent the longest: closed %v, told %q; want closed, told %q", closed, said, displacedAnswer)
	}
	if refused, failed := s.counts.Load(clientsRefused), s.counts.Load(requestsFailed); refused != 0 || failed < 1 {
		t.Errorf("refused %d, failed %d; want 0, at least 1 (the one closed)", refused, failed)
	}
	if len(s.sem) > MaxConns {
		t.Errorf("%d connections served at once, limit %d", len(s.sem), MaxConns)
	}
}

// TestSilentClientsClosedOldestFirst: silent clients beyond the limit
// each displace the oldest; at most MaxConns are held at once and none is
// refused; whoever stays silent is dropped after ReadTimeout.
func TestSilentClientsClosedOldestFirst(t *testing.T) {
	s, stop := serve(t, Config{})
	defer stop()
	const extra = 4
	conns := dialSilent(t, s.cfg.Path, MaxConns+extra)
	for i, c := range conns[:extra] {
		if said, closed := closedByServer(c, ReadTimeout/2); !closed || said != displacedAnswer {
			t.Errorf("silent client %d (of the oldest %d): closed %v, told %q; want closed to make room", i, extra, closed, said)
		}
	}
	if len(s.sem) > MaxConns {
		t.Errorf("%d connections served at once, limit %d", len(s.sem), MaxConns)
	}
	for i, c := range conns[extra:] {
		if said, closed := closedByServer(c, ReadTimeout+time.Second); !closed || said != "" {
			t.Errorf("silent client %d: closed %v, told %q; want dropped unanswered after the read timeout", extra+i, closed, said)
		}
	}
	if refused := s.counts.Load(clientsRefused); refused != 0 {
		t.Errorf("refused %d", refused)
	}
}

// TestLineWaiting: a connection whose whole request line waits unread is
// not silent (it is never displaced); one with half a line or none is.
func TestLineWaiting(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	for _, tc := range []struct {
		sent string
		want bool
	}{{"", false}, {"stat", false}, {"status\n", true}, {"status\nping\n", true}} {
		c, err := net.Dial("unix", path)
		if err != nil {
			t.Fatal(err)
		}
		sc, err := ln.AcceptUnix()
		if err != nil {
			t.Fatal(err)
		}
		c.Write([]byte(tc.sent))
		if got := lineWaiting(sc); got != tc.want {
			t.Errorf("sent %q: lineWaiting %v, want %v", tc.sent, got, tc.want)
		}
		// peeking left the line to read
		sc.SetReadDeadline(time.Now().Add(time.Second))
		if b := make([]byte, len(tc.sent)); tc.sent != "" {
			if _, err := io.ReadFull(sc, b); err != nil || string(b) != tc.sent {
				t.Errorf("sent %q: read %q, %v after the peek", tc.sent, b, err)
			}
		}
		c.Close()
		sc.Close()
	}
}

// TestBusyWhenEveryConnectionIsAnswered: a new connection is refused
// "busy" only when no slot is held by a silent client.
func TestBusyWhenEveryConnectionIsAnswered(t *testing.T) {
	s, stop := serve(t, Config{})
	defer stop()
	for range MaxConns { // slots held as if each were writing its answer
		s.sem <- struct{}{}
	}
	_, err := Ask(s.cfg.Path, "status", time.Second)
	if err == nil || !strings.Contains(err.Error(), "busy") {
		t.Errorf("connection beyond the limit: %v, want busy", err)
	}
	if refused := s.counts.Load(clientsRefused); refused != 1 {
		t.Errorf("refused %d", refused)
	}
	for range MaxConns {
		<-s.sem
	}
}

func TestStaleSocketReplacedLiveOneRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "control.sock")
	// A stale socket: bound, then its listener gone without unlinking.
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	ln.SetUnlinkOnClose(false)
	ln.Close()
	s, stop := serve(t, Config{Path: path})
	if _, _, err := Query(path, time.Second); err != nil {
		t.Fatalf("after replacing the stale socket: %v", err)
	}
	if _, err := Listen(Config{Path: path, Counters: counters.New()}, testBoard()); !errors.Is(err, ErrInUse) {
		t.Errorf("second instance: %v, want ErrInUse", err)
	}
	if _, _, err := Query(s.cfg.Path, time.Second); err != nil {
		t.Errorf("first instance after the refused one: %v", err)
	}
	stop()
	if _, err := os.Lstat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("socket left behind after shutdown: %v", err)
	}
	// Not a socket: refused, not removed.
	if err := os.WriteFile(path, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Listen(Config{Path: path, Counters: counters.New()}, testBoard()); err == nil || !strings.Contains(err.Error(), "not a socket") {
		t.Errorf("regular file at the path: %v", err)
	}
}

// TestSocketModeNeverThroughALink: the socket's mode and group are set
// where no one else can redirect them. Someone who swaps the temporary
// name for a link to another file between the bind and the chmod (possible
// with a socket directory others can write) changes neither that file nor
// the socket's mode. (Before, the chmod by name went through the link.)
func TestSocketModeNeverThroughALink(t *testing.T) {
	precious := filepath.Join(t.TempDir(), "precious")
	if err := os.WriteFile(precious, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(precious, 0o644); err != nil {
		t.Fatal(err)
	}
	testHookBound = func(tmp string) {
		if err := os.Rename(tmp, tmp+".moved"); err != nil {
			t.Error(err)
		}
		if err := os.Symlink(precious, tmp); err != nil {
			t.Error(err)
		}
	}
	defer func() { testHookBound = func(string) {} }()
	path := filepath.Join(t.TempDir(), "c.sock")
	s, err := Listen(Config{Path: path, Counters: counters.New()}, testBoard())
	if err == nil {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { s.Serve(ctx); close(done) }()
		defer func() { cancel(); <-done }()
		if fi, err := os.Lstat(path); err != nil || fi.Mode()&os.ModeSocket == 0 || fi.Mode().Perm() != 0o600 {
			t.Errorf("the socket: %v %v, want a socket, 0600", fi.Mode(), err)
		}
		if _, _, err := Query(path, time.Second); err != nil {
			t.Errorf("status: %v", err)
		}
	}
	if fi, err := os.Stat(precious); err != nil || fi.Mode().Perm() != 0o644 {
		t.Errorf("the link's target: mode %v %v, want 0644 as it was", fi.Mode().Perm(), err)
	}
}

func TestSocketGroup(t *testing.T) {
	gid := os.Getgid()
	s, stop := serve(t, Config{Group: itoa(gid)})
	defer stop()
	fi, err := os.Stat(s.cfg.Path)
	if err != nil || fi.Mode().Perm() != 0o660 {
		t.Errorf("mode with a group: %v %v", fi.Mode(), err)
	}
	for _, g := range []string{"no-such-group-here", "4294967290"} {
		want := "--socket-group " + g + ": no such group"
		if _, err := Listen(Config{Path: s.cfg.Path + "2", Group: g, Counters: counters.New()}, testBoard()); err == nil || err.Error() != want {
			t.Errorf("unknown group: %v, want %q", err, want)
		}
	}
}

// TestConcurrentStatus: many clients at once all get whole documents.
func TestConcurrentStatus(t *testing.T) {
	s, stop := serve(t, Config{})
	defer stop()
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				raw, err := Ask(s.cfg.Path, "status", 2*time.Second)
				if err != nil && strings.Contains(err.Error(), "busy") {
					time.Sleep(time.Millisecond)
					continue
				}
				if err == nil && !json.Valid(raw) {
					err = errors.New("invalid JSON")
				}
				errs <- err
				return
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
}

func itoa(i int) string { b, _ := json.Marshal(i); return string(b) }

func FuzzParseRequest(f *testing.F) {
	for _, s := range []string{"status\n", "ping", " status \r\n", "", "\x00", strings.Repeat("a", 300),
		"status history=10m events=200\n", "status events=0", "ping events=1", "status history=1h",
		"watch history=10m events=200\n", "watch events=5", "watch history=1m"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r, o, err := ParseRequest(b)
		if o.History < 0 || o.History > MaxHistory || o.Events < 0 || o.Events > MaxEvents || (r == ReqPing && o != Options{}) {
			t.Fatalf("%q: options out of bounds: %+v", b, o)
		}
		if (err == nil) != (r != 0) {
			t.Fatalf("%q: request %d with error %v", b, r, err)
		}
		if err == nil && len(b) > MaxRequest {
			t.Fatalf("%q: accepted beyond the limit", b)
		}
		if err != nil && len(err.Error()) > 2*MaxRequest {
			t.Fatalf("error text unbounded: %d bytes", len(err.Error()))
		}
	})
}

// TestStormSharesBuilds: however many requests come, the document is built
// at most once per Reuse.
func TestStormSharesBuilds(t *testing.T) {
	var builds atomic.Int64
	host := live.NewBoard(nil, func() live.Host { builds.Add(1); return live.Host{Now: time.Now()} })
	path := filepath.Join(t.TempDir(), "c.sock")
	s, err := Listen(Config{Path: path, Counters: counters.New()}, host)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.Serve(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	start := time.Now()
	const n = 200
	for range n {
		if _, _, err := Query(path, time.Second); err != nil {
			t.Fatal(err)
		}
	}
	elapsed := time.Since(start)
	if max := int64(elapsed/Reuse) + 1; builds.Load() > max {
		t.Errorf("%d builds for %d requests in %v, want at most %d", builds.Load(), n, elapsed, max)
	}
}

// TestAnswerReuse: a status answer a request still holds is never
// overwritten by a later build; one nobody holds is built into again.
func TestAnswerReuse(t *testing.T) {
	var n atomic.Int64
	s := &Server{board: live.NewBoard(nil, func() live.Host { return live.Host{Version: itoa(int(n.Add(1)))} })}
	rebuild := func() *answer {
		t.Helper()
		s.cmu.Lock()
		s.cachedAt = time.Time{}.Add(time.Hour) // in the future: stale
		s.cmu.Unlock()
		return s.status()
	}
	version := func(a *answer) string {
		var d live.Doc
		if err := json.Unmarshal(a.b, &d); err != nil || a.b[len(a.b)-1] != '\n' {
			t.Fatalf("answer %q: %v", a.b, err)
		}
		return d.Host.Version
	}
	a1 := rebuild()
	held := string(a1.b)
	a2 := rebuild() // a1 is held: a new buffer
	if a2 == a1 || string(a1.b) != held || version(a2) != "2" {
		t.Fatalf("a held answer was rebuilt: %q then %q", held, a1.b)
	}
	s.release(a1)
	s.release(a2)
	a3 := rebuild() // a1 and a2 are free; a2 was the cached one, a1 the spare
	if a3 != a1 || version(a3) != "3" {
		t.Errorf("built into %p (a1 %p, a2 %p), version %s", a3, a1, a2, version(a3))
	}
	if version(a2) != "2" {
		t.Errorf("the previous answer changed")
	}
}

// TestRefusedDocumentCountsAsFailed: a status document encoding/json
// refuses is answered with the error and counted as a failed request, not
// as one served.
func TestRefusedDocumentCountsAsFailed(t *testing.T) {
	s, stop := serve(t, Config{})
	defer stop()
	b, refused := s.encode(nil, live.Doc{Host: live.HostDoc{UptimeS: math.NaN()}})
	if !refused || !strings.Contains(string(b), `"error":"status document: `) {
		t.Fatalf("encode of a NaN document: %q refused=%v, want the error reply", b, refused)
	}
	s.cmu.Lock()
	s.cached, s.cachedAt = &answer{b: b, refusedDoc: true}, time.Now()
	s.cmu.Unlock()
	if _, err := Ask(s.cfg.Path, "status", time.Second); err == nil || !strings.Contains(err.Error(), "status document") {
		t.Errorf("status with a refused document: %v, want its error", err)
	}
	// The server counts after its write returns, which may be after the
	// client has read the reply: wait for the count, bounded.
	served, failed := s.counts.Load(requestsServed), s.counts.Load(requestsFailed)
	for end := time.Now().Add(5 * time.Second); served+failed == 0 && time.Now().Before(end); {
		time.Sleep(time.Millisecond)
		served, failed = s.counts.Load(requestsServed), s.counts.Load(requestsFailed)
	}
	if failed != 1 || served != 0 {
		t.Errorf("served %d failed %d, want 0 and 1", served, failed)
	}
}

// TestAskBoundsTheAnswer: Ask takes an answer of MaxReply bytes, newline
// included, and refuses a longer one (with or without its newline) with an
// error that says so, having read no more than MaxReply+1 bytes of it.
func TestAskBoundsTheAnswer(t *testing.T) {
	for _, c := range []struct {
		name   string
		answer string
		err    string
	}{
		{"MaxReply bytes", `"` + strings.Repeat("x", MaxReply-3) + "\"\n", ""},
		{"one byte more", `"` + strings.Repeat("x", MaxReply-2) + "\"\n", "longer than"},
		{"no newline", strings.Repeat("x", 2*MaxReply), "longer than"},
		{"cut short", `{"ok":`, "reading the answer"},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "s.sock")
			l, err := net.Listen("unix", path)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			go func() {
				conn, err := l.Accept()
				if err != nil {
					return
				}
				defer conn.Close()
				// Read the request first: a close before it is read would fail
				// Ask's write, and Ask returns that error instead.
				bufio.NewReader(conn).ReadString('\n')
				conn.Write([]byte(c.answer))
			}()
			out, err := Ask(path, "status", 10*time.Second)
			switch {
			case c.err == "" && (err != nil || len(out) != MaxReply-1):
				t.Errorf("answer of %d bytes: %d bytes, %v", len(c.answer), len(out), err)
			case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
				t.Errorf("answer of %d bytes: %v, want an error saying %q", len(c.answer), err, c.err)
			}
		})
	}
}

func TestParseRequest(t *testing.T) {
	cases := []struct {
		line string
		req  Request
		opts Options
		err  string // a part of the error; "" none
	}{
		{"status\n", ReqStatus, Options{}, ""},
		{"ping", ReqPing, Options{}, ""},
		{"status history=10m events=200\r\n", ReqStatus, Options{History: 10 * time.Minute, Events: 200}, ""},
		{"status events=1 history=1s", ReqStatus, Options{History: time.Second, Events: 1}, ""},
		{Options{History: 90 * time.Second, Events: 20}.Line(), ReqStatus, Options{History: 90 * time.Second, Events: 20}, ""},
		{"status history=10m1s", 0, Options{}, "at most 10m0s"},
		{"status history=0s", 0, Options{}, "above 0"},
		{"status history=-1m", 0, Options{}, "above 0"},
		{"status history=soon", 0, Options{}, "history="},
		{"status events=0", 0, Options{}, "from 1 to 500"},
		{"status events=501", 0, Options{}, "from 1 to 500"},
		{"status events=x", 0, Options{}, "from 1 to 500"},
		{"status events=2 events=3", 0, Options{}, "twice"},
		{"status colour=on", 0, Options{}, "unknown option"},
		{"status history", 0, Options{}, "history="},
		{"ping events=2", 0, Options{}, "takes no options"},
		{"stat", 0, Options{}, "unknown request"},
	}
	for _, c := range cases {
		t.Run(c.line, func(t *testing.T) {
			r, o, err := ParseRequest([]byte(c.line))
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("error %v, want one saying %q", err, c.err)
				}
				return
			}
			if err != nil || r != c.req || o != c.opts {
				t.Fatalf("%v %+v %v, want %v %+v", r, o, err, c.req, c.opts)
			}
		})
	}
}

// TestStatusWithHistoryAndEvents: the options add each GPU's history and
// the host's last events.log lines, newest first; the plain answer has
// neither, and a bad option is the one-line error answer.
func TestStatusWithHistoryAndEvents(t *testing.T) {
	s, stop := serve(t, Config{})
	defer stop()
	d, raw, err := QueryWith(s.cfg.Path, Options{History: time.Minute, Events: 5}, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	h := d.GPUs[0].History
	if h == nil || h.StepS != 1 || !h.End.Equal(d.Time.Truncate(time.Second)) {
		t.Fatalf("history %+v in %s", h, raw)
	}
	temps := h.Values("temperature_c")
	if len(temps) != 60 {
		t.Fatalf("%d temperatures for a minute: %s", len(temps), raw)
	}
	// The sample was taken within the last two seconds; before it, null.
	n := 0
	for _, p := range temps {
		if p != nil {
			if *p != 41 {
				t.Errorf("temperature %v, want 41", *p)
			}
			n++
		}
	}
	for _, p := range h.Values("power_w") {
		if p != nil {
			t.Errorf("absent power has a value: %s", raw)
		}
	}
	if n != 1 || temps[0] != nil {
		t.Errorf("%d temperatures given, want 1: %s", n, raw)
	}
	want := []string{"2026-12-06T14:00:01.000Z host=h gpu=0 type=SECOND", "2026-12-06T14:00:00.000Z host=h gpu=0 type=FIRST"}
	if len(d.Events) != 2 || d.Events[0] != want[0] || d.Events[1] != want[1] {
		t.Errorf("events %q, want %q", d.Events, want)
	}
	if d, _, _ := QueryWith(s.cfg.Path, Options{Events: 1}, time.Second); len(d.Events) != 1 || d.Events[0] != want[0] || d.GPUs[0].History != nil {
		t.Errorf("events=1: %q, history %v", d.Events, d.GPUs[0].History)
	}
	_, plain, err := Query(s.cfg.Path, time.Second)
	if err != nil || strings.Contains(string(plain), `"history"`) || strings.Contains(string(plain), `"events"`) {
		t.Errorf("plain answer (%v): %s", err, plain)
	}
	if _, err := Ask(s.cfg.Path, "status history=11m", time.Second); err == nil || !strings.Contains(err.Error(), "answered: history=\"11m\": want") {
		t.Errorf("bad option: %v", err)
	}
}

// countBuildsWith counts the builds of answers with options, by options,
// for the rest of the test.
func countBuildsWith(t *testing.T) func() map[Options]int {
	var mu sync.Mutex
	n := map[Options]int{}
	old := testHookBuildWith
	testHookBuildWith = func(o Options) { mu.Lock(); n[o]++; mu.Unlock() }
	t.Cleanup(func() { testHookBuildWith = old })
	return func() map[Options]int {
		mu.Lock()
		defer mu.Unlock()
		return maps.Clone(n)
	}
}

// TestOptionsStormSharesBuilds: clients looping on status with options
// (and watch, which builds the same answers) cost at most one build per
// Reuse for each set of options, as the plain status does, and the plain
// status is answered all along (the review of issue 40: 8 clients looping
// on history=10m each built a 5 MB document under the plain build's lock).
func TestOptionsStormSharesBuilds(t *testing.T) {
	builds := countBuildsWith(t)
	s, stop := serve(t, Config{})
	defer stop()
	lines := []string{"status history=10m", "status events=5", "status history=10m0s", "status events=5"}
	const clients, each = 8, 40
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, clients+1)
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				if _, err := Ask(s.cfg.Path, lines[c%len(lines)], 5*time.Second); err != nil && !strings.Contains(err.Error(), "busy") {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for range each {
			if _, _, err := Query(s.cfg.Path, 5*time.Second); err != nil && !strings.Contains(err.Error(), "busy") {
				errs <- err
				return
			}
		}
	}()
	wg.Wait()
	elapsed := time.Since(start)
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	got := builds()
	if len(got) != 2 {
		t.Errorf("builds by options %v, want two sets of options", got)
	}
	for o, n := range got {
		if max := int(elapsed/Reuse) + 1; n > max {
			t.Errorf("%+v: %d builds for %d requests in %v, want at most %d", o, n, clients/2*each, elapsed, max)
		}
	}
}

// TestAnswersWithOptionsShared: an answer with options serves the
// requests with the same options within Reuse, is built again after it,
// is never taken for the plain answer's spare buffer, and at most
// maxWithCached of them are kept.
func TestAnswersWithOptionsShared(t *testing.T) {
	builds := countBuildsWith(t)
	s := &Server{board: testBoard(), counts: counters.New(), log: slog.New(slog.DiscardHandler)}
	o1, o2 := Options{History: time.Minute}, Options{Events: 1}
	a1 := s.statusWith(o1)
	if a2 := s.statusWith(o1); a2 != a1 {
		t.Errorf("the same options within Reuse built again")
	}
	if a3 := s.statusWith(o2); a3 == a1 || !strings.Contains(string(a3.b), "type=SECOND") || strings.Contains(string(a3.b), `"history"`) {
		t.Errorf("other options answered %q", a3.b)
	}
	s.release(a1)
	if s.spare == a1 {
		t.Errorf("an answer with options became the plain answer's spare")
	}
	for n := range 2 * maxWithCached {
		s.statusWith(Options{Events: n + 1})
	}
	if len(s.withCached) > maxWithCached {
		t.Errorf("%d answers with options kept, want at most %d", len(s.withCached), maxWithCached)
	}
	s.omu.Lock()
	for i := range s.withCached {
		s.withCached[i].at = s.withCached[i].at.Add(-Reuse)
	}
	s.omu.Unlock()
	before := builds()[o2]
	s.statusWith(o2)
	if got := builds(); got[o1] != 1 || got[o2] != before+1 {
		t.Errorf("builds %v: the same options past Reuse not built again", got)
	}
}

// bigServer is a server over 16 GPUs with full history rings and a full
// events ring: what a history request costs at most.
func bigServer(b testing.TB) *Server {
	now := time.Now()
	var slots []*live.Slot
	for i := range 16 {
		sl := live.NewSlot(reading.GPU{Index: i, Name: "sim", UUID: "GPU-x"})
		for k := range 600 {
			s := reading.Sample{Time: now.Add(time.Duration(k-600) * time.Second), NumFans: 1}
			for _, d := range []reading.ID{reading.TempC, reading.PowerMW, reading.GPUUtil, reading.MemUtil, reading.VRAMUsedBytes, reading.SMMHz, reading.PCIeTxBytes, reading.PCIeRxBytes} {
				s.Values[d] = reading.Some(uint64(123456789 + k*1000 + i))
			}
			s.Fans[0].Speed = reading.Some(uint32(55))
			sl.Record(&s)
			if k == 599 {
				sl.Update(func(g *live.GPU) { g.Observe(&s, time.Second) })
			}
		}
		slots = append(slots, sl)
	}
	bd := live.NewBoard(slots, func() live.Host { return live.Host{Now: time.Now(), Version: "test"} })
	for i := range MaxEvents {
		bd.Event("time=2026-12-06T14:00:00.000Z host=gpu-node-07 uuid=GPU-00000000-1111-2222-3333-444444444444 level=warning gpu=3 source=nvml type=Xid xid=79 msg=" + string(rune('a'+i%26)))
	}
	return &Server{board: bd, counts: counters.New(), log: slog.New(slog.DiscardHandler)}
}

// benchmarkBuildWith measures one build of the answer with o (what each
// request with options cost before they were shared).
func benchmarkBuildWith(b *testing.B, o Options) {
	s := bigServer(b)
	b.ReportAllocs()
	var n int
	for b.Loop() {
		n = len(s.buildWith(o).b)
	}
	b.ReportMetric(float64(n), "bytes/doc")
}

func BenchmarkStatusWithHistory(b *testing.B) {
	benchmarkBuildWith(b, Options{History: MaxHistory, Events: MaxEvents})
}

func BenchmarkStatusWithEvents(b *testing.B) { benchmarkBuildWith(b, Options{Events: 200}) }

func BenchmarkStatusPlain(b *testing.B) {
	s := bigServer(b)
	b.ReportAllocs()
	var n int
	for b.Loop() {
		s.cmu.Lock()
		s.cachedAt = time.Time{} // stale: built again
		s.cmu.Unlock()
		a := s.status()
		n = len(a.b)
		s.release(a)
	}
	b.ReportMetric(float64(n), "bytes/doc")
}

// TestUnknownRequest: the answers of a daemon that does not know a
// request or an option (an older one) are told apart from the others.
func TestUnknownRequest(t *testing.T) {
	s, stop := serve(t, Config{})
	defer stop()
	for _, c := range []struct {
		req     string
		unknown bool
	}{
		{"status colour=1", true},
		{"stat", true},
		{"status history=11m", false},
		{"ping events=1", false},
	} {
		_, err := Ask(s.cfg.Path, c.req, time.Second)
		if err == nil || UnknownRequest(err) != c.unknown {
			t.Errorf("%s: %v, unknown %v, want %v", c.req, err, UnknownRequest(err), c.unknown)
		}
	}
	// What a daemon before issue 40 answered "status history=10m".
	old := &AnswerError{Path: "p", Msg: `unknown request "status history=10m0s events=200" (want status or ping)`}
	for _, err := range []error{fmt.Errorf("top: %w", old), &AnswerError{Path: "p", Msg: "busy: too many connections"}, os.ErrDeadlineExceeded, nil} {
		if got, want := UnknownRequest(err), err != nil && errors.Is(err, old); got != want {
			t.Errorf("%v: unknown %v, want %v", err, got, want)
		}
	}
}
