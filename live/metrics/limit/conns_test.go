package limit

import (
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gpu-telemetry/gpu-telemetry/internal/counters"
	"github.com/gpu-telemetry/gpu-telemetry/internal/testutil"
)

// serve runs an http.Server on 127.0.0.1 behind Conns with lim; its
// handler answers "ok", at /slow only at the end of the test. The server
// stops at the end of the test.
func serve(t *testing.T, lim ConnLimits) (*Conns, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := NewConns(ln, lim, counters.New())
	release := make(chan struct{})
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			<-release
		}
		io.WriteString(w, "ok")
	}), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: time.Minute, ConnState: l.ConnState}
	done := make(chan struct{})
	go func() { defer close(done); srv.Serve(l) }()
	t.Cleanup(func() { close(release); srv.Close(); <-done })
	return l, ln.Addr().String()
}

// send opens n connections from from that each send req.
func send(t *testing.T, n int, from, addr, req string) {
	t.Helper()
	for range n {
		c := testutil.DialFrom(t, from, addr)
		if _, err := io.WriteString(c, req); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(100 * time.Millisecond) // read by the server
}

// Requests of send: one the server answers at the end of the test (the
// connection active meanwhile), and half a request (the connection new,
// silent after ConnLimits.Silent).
const (
	slowRequest = "GET /slow HTTP/1.1\r\nHost: x\r\n\r\n"
	halfRequest = "GET / HTTP/1.1\r\n"
)

// scrape makes one request on a new connection from from and returns how
// long it took.
func scrape(t *testing.T, from, addr string) (time.Duration, error) {
	t.Helper()
	start := time.Now()
	_, err := testutil.HTTPGet(testutil.DialFrom(t, from, addr), "/")
	return time.Since(start), err
}

// TestIdleConnectionsGiveWay: with every slot held by an idle keep-alive
// connection, a new client is answered at once (the oldest idle one is
// closed for it), from the same address or another.
func TestIdleConnectionsGiveWay(t *testing.T) {
	_, addr := serve(t, ConnLimits{Max: 4, PerAddr: 4, Silent: time.Minute})
	testutil.IdleHTTPConns(t, 4, "127.0.0.1", addr, "/")
	for _, from := range []string{"127.0.0.1", "127.0.0.2"} {
		if d, err := scrape(t, from, addr); err != nil || d > time.Second {
			t.Errorf("a request from %s with every slot idle: %v after %v, want answered at once", from, err, d)
		}
	}
}

// TestPerAddressLimit: one address holding its share of connections
// answering gets its next one closed at once (counted); another address is
// served. Idle connections and new ones do not count, silent ones do and
// give way to their address's new one.
func TestPerAddressLimit(t *testing.T) {
	const silent = 300 * time.Millisecond
	l, addr := serve(t, ConnLimits{Max: 8, PerAddr: 2, Silent: silent})
	send(t, 2, "127.0.0.1", addr, slowRequest)
	c := testutil.DialFrom(t, "127.0.0.1", addr)
	c.SetDeadline(time.Now().Add(2 * time.Second))
	if n, err := c.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Errorf("third connection from 127.0.0.1 with two busy: read %d, %v, want closed at once (EOF)", n, err)
	}
	if got := l.counts.Load(clientsRefused); got != 1 {
		t.Errorf("Refused() = %d, want 1", got)
	}
	if d, err := scrape(t, "127.0.0.2", addr); err != nil || d > time.Second {
		t.Errorf("a request from 127.0.0.2: %v after %v, want answered at once", err, d)
	}
	testutil.IdleHTTPConns(t, 2, "127.0.0.3", addr, "/")
	if d, err := scrape(t, "127.0.0.3", addr); err != nil || d > time.Second {
		t.Errorf("127.0.0.3's third connection with its two idle: %v after %v, want answered at once", err, d)
	}
	send(t, 2, "127.0.0.4", addr, halfRequest)
	time.Sleep(silent)
	first := testutil.DialFrom(t, "127.0.0.4", addr) // not silent yet
	io.WriteString(first, halfRequest)
	if d, err := scrape(t, "127.0.0.4", addr); err != nil || d > time.Second {
		t.Errorf("127.0.0.4's fourth connection with two silent: %v after %v, want answered at once", err, d)
	}
	if got := l.counts.Load(clientsRefused); got != 1 {
		t.Errorf("Refused() = %d after the idle and silent ones gave way, want still 1", got)
	}
}

// TestSilentConnectionsGiveWayAfterGrace: connections that never send a
// request hold their slots for Silent, then give way to a new one.
func TestSilentConnectionsGiveWayAfterGrace(t *testing.T) {
	const silent = 300 * time.Millisecond
	_, addr := serve(t, ConnLimits{Max: 2, PerAddr: 2, Silent: silent})
	testutil.DialFrom(t, "127.0.0.1", addr)
	testutil.DialFrom(t, "127.0.0.1", addr)
	d, err := scrape(t, "127.0.0.2", addr)
	if err != nil || d > silent+time.Second {
		t.Errorf("a request with every slot silent: %v after %v, want answered after about %v", err, d, silent)
	}
}

// TestBusyConnectionsMakeANewOneWait: with every slot reading a request, a
// new connection waits in Accept until one closes, and is then served.
func TestBusyConnectionsMakeANewOneWait(t *testing.T) {
	_, addr := serve(t, ConnLimits{Max: 2, PerAddr: 2, Silent: time.Minute})
	send(t, 1, "127.0.0.1", addr, halfRequest)
	c := testutil.DialFrom(t, "127.0.0.1", addr)
	io.WriteString(c, halfRequest)
	time.Sleep(100 * time.Millisecond)
	got := make(chan error, 1)
	go func() {
		_, err := scrape(t, "127.0.0.2", addr)
		got <- err
	}()
	select {
	case err := <-got:
		t.Fatalf("a request with every slot busy answered before one closed: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	c.Close()
	select {
	case err := <-got:
		if err != nil {
			t.Errorf("the waiting request: %v", err)
		}
	case <-time.After(2 * time.Second):
		t.Errorf("the waiting request not answered 2 s after a slot freed")
	}
}

// TestCloseWakesAWaitingAccept: closing the listener ends an Accept that
// waits for a slot.
func TestCloseWakesAWaitingAccept(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := NewConns(ln, ConnLimits{Max: 1, PerAddr: 1, Silent: time.Minute}, counters.New())
	testutil.DialFrom(t, "127.0.0.1", ln.Addr().String())
	if _, err := l.Accept(); err != nil {
		t.Fatal(err)
	}
	testutil.DialFrom(t, "127.0.0.2", ln.Addr().String())
	got := make(chan error, 1)
	go func() { _, err := l.Accept(); got <- err }()
	time.Sleep(100 * time.Millisecond)
	l.Close()
	select {
	case err := <-got:
		if err == nil || !strings.Contains(err.Error(), "closed") {
			t.Errorf("Accept after Close: %v, want the listener's closed error", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("Accept still waiting 2 s after Close")
	}
}
