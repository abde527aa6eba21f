package control

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"math"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/live"
	"github.com/gpu-telemetry/gpu-telemetry/reading"
)

func testBoard() *live.Board {
	sl := live.NewSlot(reading.GPU{Index: 0, Name: "sim", BusID: "00000000:01:00.0"})
	s := reading.Sample{Time: time.Now(), TempC: reading.Some[uint32](41)}
	sl.Update(func(g *live.GPU) { g.Observe(&s, 100*time.Millisecond) })
	return live.NewBoard([]*live.Slot{sl}, func() live.Host { return live.Host{Now: time.Now(), Version: "test"} })
}

// serve starts a server on a fresh path and returns it with its stop func.
func serve(t *testing.T, cfg Config) (*Server, func()) {
	t.Helper()
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
	if failed := s.failed.Load(); failed != 5 {
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

func TestConnectionsBounded(t *testing.T) {
	s, stop := serve(t, Config{})
	defer stop()
	var conns []net.Conn
	for range MaxConns {
		c, err := net.Dial("unix", s.cfg.Path)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	time.Sleep(100 * time.Millisecond) // all accepted and waiting for a request
	_, err := Ask(s.cfg.Path, "status", time.Second)
	if err == nil || !strings.Contains(err.Error(), "busy") {
		t.Errorf("connection beyond the limit: %v, want busy", err)
	}
	if refused := s.refused.Load(); refused != 1 {
		t.Errorf("refused %d", refused)
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
	if _, err := Listen(Config{Path: path}, testBoard()); !errors.Is(err, ErrInUse) {
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
	if _, err := Listen(Config{Path: path}, testBoard()); err == nil || !strings.Contains(err.Error(), "not a socket") {
		t.Errorf("regular file at the path: %v", err)
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
		if _, err := Listen(Config{Path: s.cfg.Path + "2", Group: g}, testBoard()); err == nil || err.Error() != want {
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
	for _, s := range []string{"status\n", "ping", " status \r\n", "", "\x00", strings.Repeat("a", 300)} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := ParseRequest(b)
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
	s, err := Listen(Config{Path: path}, host)
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
	served, failed := s.served.Load(), s.failed.Load()
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
